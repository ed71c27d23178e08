"""``cache_unfinished_req``: cache the KV of a request whose prefill is only partly done.

Mirrors SGLang ``RadixCache.cache_unfinished_req`` (python/sglang/srt/mem_cache/radix_cache.py
@ a7ec6b97), built only on the public ``RadixCache`` API so that the cache's own method can
replace it unchanged.
"""

from __future__ import annotations

import torch

from radixbench.cache.key import RadixKey
from radixbench.cache.radix_cache import RadixCache
from radixbench.sim.request import Req


def cache_unfinished_req(cache: RadixCache, req: Req) -> int:
    """Insert ``req.fill_ids`` (whose KV is in ``req_to_token[req.req_pool_idx, :len(fill_ids)]``)
    into the tree and make the request hold the tree's copy.

    Steps, as SGLang: insert the page-aligned part of ``fill_ids``; free the duplicate KV slots
    ``[old_prefix_len, new_prefix_len)`` (another request cached them meanwhile); re-match;
    write ``req_to_token[row, old_prefix_len:len(new_indices)]`` with the tree's slots;
    ``dec_lock_ref`` the old ``last_node`` and ``inc_lock_ref`` the new one; set
    ``req.prefix_indices`` (int64 ``[aligned]`` plus the unaligned tail the request still owns)
    and ``req.last_node``. Returns the new prefix length (tokens).

    Mutates the tree, the allocator (frees duplicates), ``req_to_token`` and ``req``. Raises
    ``RuntimeError`` if the cache has no ``ReqToTokenPool``.
    """
    pool = cache.req_to_token_pool
    if pool is None:
        raise RuntimeError("cache_unfinished_req needs a ReqToTokenPool")
    assert req.last_node is not None
    ids = req.fill_ids
    row = req.req_pool_idx
    kv = pool.req_to_token[row, : len(ids)].to(dtype=torch.int64, copy=True)
    page = cache.page_size
    aligned = len(ids) // page * page
    key = RadixKey(ids[:aligned] if aligned < len(ids) else ids, req.extra_key)
    old_prefix_len = req.prefix_indices.numel()
    new_prefix_len = cache.insert(key, kv[:aligned])
    if new_prefix_len > old_prefix_len:
        cache.allocator.free(kv[old_prefix_len:new_prefix_len])
    match = cache.match_prefix(key)
    new_indices = match.device_indices
    n = new_indices.numel()
    if n > old_prefix_len:
        pool.req_to_token[row, old_prefix_len:n] = new_indices[old_prefix_len:]
    cache.dec_lock_ref(req.last_node)
    cache.inc_lock_ref(match.last_node)
    req.prefix_indices = new_indices if n == len(ids) else torch.cat([new_indices, kv[n:]])
    req.last_node = match.last_node
    return new_prefix_len
