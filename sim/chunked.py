"""``cache_unfinished_req``: cache the KV of a request whose prefill is only partly done.

Mirrors SGLang ``RadixCache.cache_unfinished_req`` (python/sglang/srt/mem_cache/radix_cache.py
@ a7ec6b97), built only on the public ``RadixCache`` API so that the cache's own method can
replace it unchanged.
"""

from __future__ import annotations

from radixbench.cache.key import RadixKey
from radixbench.cache.radix_cache import RadixCache
from radixbench.sim.request import Req


def cache_unfinished_req(cache: RadixCache, req: Req) -> int:
    """Cache ``req.fill_ids`` (whose KV is in ``req_to_token[req.req_pool_idx, :len(fill_ids)]``)
    and make the request hold the tree's copy: ``RadixCache.cache_unfinished_req`` with the
    request's filled tokens as the key (see there: insert, free duplicates, re-match, rewrite
    ``req_to_token``, move the lock, update ``req.prefix_indices`` / ``req.last_node``).

    Returns the request's cached prefix length afterwards (tokens, page-aligned). Mutates the
    tree, the allocator, ``req_to_token`` and ``req``.
    """
    return cache.cache_unfinished_req(req, RadixKey(req.fill_ids, req.extra_key))
