"""Request-level cache operations: caching a finished request and a chunked-prefill chunk.

Mirror SGLang ``RadixCache.cache_finished_req`` / ``cache_unfinished_req``
(python/sglang/srt/mem_cache/radix_cache.py @ a7ec6b97). Kept apart from the tree code: they only
combine the tree's public operations with the request's ``req_to_token`` row and the allocator.
Bigram (EAGLE) keys work unchanged: a bigram key of ``B`` bigrams covers ``B`` KV slots.

Pages (``page_size > 1``): the tree holds whole pages only. After a chunk, ``prefix_indices`` is
the tree's slots followed by the request's own unaligned tail, so the part the tree protects is
``len(prefix_indices)`` rounded down to a page (SGLang's ``cache_protected_len``, introduced
because freeing from the unrounded length leaks the tail with a token allocator); duplicate
slots are freed from there. With the paged allocator a free returns every page it touches, so
the tail's page is freed exactly once: with the duplicates when the tree already holds that
page, else with the unaligned remainder of a finished request (or inserted with the next chunk).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from radixbench.cache.allocator import ReqToTokenPool
    from radixbench.cache.key import RadixKey
    from radixbench.cache.radix_cache import CacheReq, RadixCache


def _pool(cache: RadixCache) -> ReqToTokenPool:
    if cache.req_to_token_pool is None:
        raise RuntimeError("request operations need a ReqToTokenPool")
    return cache.req_to_token_pool


def _protected_len(cache: RadixCache, req: CacheReq) -> int:
    """Tokens of ``req``'s prefix held by the tree: ``len(prefix_indices)`` floored to a page."""
    return req.prefix_indices.numel() // cache.page_size * cache.page_size


def cache_finished_req(cache: RadixCache, req: CacheReq) -> int:
    """Insert a finished request's tokens, free its duplicate and unaligned KV slots, free its
    ``req_to_token`` row and unlock its prefix. Returns the already-cached prefix length (tokens).

    Reads ``req_to_token[req.req_pool_idx, :len(tokens)]`` (int32). Mutates the tree, the
    allocator (frees the tail beyond the last whole page and the slots of
    ``[protected, new_prefix_len)``, duplicates of what the tree holds; ``protected`` =
    ``len(prefix_indices)`` floored to a page), the pool row and the locks. Raises
    ``RuntimeError`` without a ``ReqToTokenPool``.
    """
    pool = _pool(cache)
    key = req.committed_token_ids()
    kv = pool.req_to_token[req.req_pool_idx, : len(key)].to(dtype=torch.int64, copy=True)
    aligned = len(key) // cache.page_size * cache.page_size
    if aligned < len(key):
        cache.allocator.free(kv[aligned:])
        key, kv = key[:aligned], kv[:aligned]
    old_prefix_len = _protected_len(cache, req)
    new_prefix_len = cache.insert(key, kv)
    # The slots of [old_prefix_len, new_prefix_len) duplicate what another request cached
    # meanwhile; the tree keeps its own copy.
    if new_prefix_len > old_prefix_len:
        cache.allocator.free(kv[old_prefix_len:new_prefix_len])
    pool.free(req.req_pool_idx)
    cache.dec_lock_ref(req.last_node)
    return new_prefix_len


def cache_unfinished_req(cache: RadixCache, req: CacheReq, key: RadixKey) -> int:
    """Cache the filled part of a request in chunked prefill, keeping the request running.

    ``key``: the tokens whose KV is written in ``req_to_token[req.req_pool_idx, :len(key)]``
    (SGLang ``req.fill_ids``). Steps, as SGLang: insert the page-aligned part; free the KV slots
    of ``[protected, new_prefix_len)`` (another request cached them meanwhile; the tree keeps its
    own; ``protected`` = ``len(prefix_indices)`` floored to a page, SGLang's
    ``cache_protected_len``); re-match to get the tree's slots and last node; rewrite
    ``req_to_token[row, protected:matched]`` with the tree's slots; move the lock from
    ``req.last_node`` to the new last node; set ``req.prefix_indices`` to the tree's slots
    followed by the request's own unaligned tail, and ``req.last_node``.
    Returns the new matched prefix length (tokens, page-aligned). Mutates tree, allocator, the
    ``req_to_token`` row, locks and ``req``. Raises ``RuntimeError`` without a pool.
    """
    pool = _pool(cache)
    row = req.req_pool_idx
    n = len(key)
    kv_row = pool.req_to_token[row, :n]
    aligned = n // cache.page_size * cache.page_size
    aligned_key = key[:aligned]
    old_prefix_len = _protected_len(cache, req)
    new_prefix_len = cache.insert(aligned_key, kv_row[:aligned].to(dtype=torch.int64, copy=True))
    if new_prefix_len > old_prefix_len:
        cache.allocator.free(kv_row[old_prefix_len:new_prefix_len].to(torch.int64))
    match = cache.match_prefix(aligned_key)
    matched = match.prefix_len
    if matched > old_prefix_len:
        pool.write(row, old_prefix_len, match.device_indices[old_prefix_len:])
    cache.dec_lock_ref(req.last_node)
    cache.inc_lock_ref(match.last_node)
    tail = pool.req_to_token[row, matched:n].to(dtype=torch.int64, copy=True)
    req.prefix_indices = (
        torch.cat([match.device_indices, tail]) if tail.numel() else (match.device_indices)
    )
    req.last_node = match.last_node
    return matched
