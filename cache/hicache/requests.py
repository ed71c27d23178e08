"""``checkpoint`` on the tiered cache: the request path of ``radixbench.cache.requests`` where the
insert may *adopt* the request's device slots for host-only nodes it walks.

sglang 0.5.23's unified insert frees the duplicates itself, node by node, and restores a walked
host-only node from the request's fresh slots instead (``_unevict_node_on_insert``,
``unified_tree_core.py:1564-1590``; ``_insert_overlap_step`` frees only the overlap of live
nodes, ``:1332-1366``). radixbench's insert returns the cached prefix and the adopted ranges
(``TieredTree.adopted``); this checkpoint frees ``[cache_protected_len, prefix_len)`` minus
those ranges, then proceeds as ``radixbench.cache.requests.checkpoint``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from radixbench.cache.key import RadixKey
from radixbench.cache.requests import _INT64_MAX, _pool

if TYPE_CHECKING:
    from radixbench.cache.hicache.tree import TieredTree
    from radixbench.cache.interface import CacheReq

__all__ = ["checkpoint"]


def _free_duplicates(cache: TieredTree, row: torch.Tensor, start: int, end: int) -> None:
    """Free ``row[start:end]`` except the ranges the last insert adopted."""
    if end <= start:
        return
    keep = [(a, b) for a, b in cache.adopted if b > start and a < end]
    if not keep:
        cache.allocator.free(row[start:end].to(torch.int64, copy=True))
        return
    parts, cur = [], start
    for a, b in sorted(keep):
        if a > cur:
            parts.append(row[cur:a])
        cur = max(cur, b)
    if cur < end:
        parts.append(row[cur:end])
    if parts:
        cache.allocator.free(torch.cat(parts).to(torch.int64, copy=True))


def checkpoint(cache: TieredTree, req: CacheReq, up_to: int) -> None:
    """``radixbench.cache.requests.checkpoint`` on a tiered cache (module docstring).
    Mutates the tree, the allocator, the ``req_to_token`` row and ``req``."""
    pool = _pool(cache)
    page = cache.page_size
    row = req.req_pool_idx
    token_ids = req.token_ids(up_to)
    n = len(token_ids) // page * page
    extra, salt = req.extra_key, getattr(req, "cache_salt", None)
    key = RadixKey(token_ids[:n] if n < len(token_ids) else token_ids, extra, salt)
    kv_row = pool.req_to_token[row, : len(token_ids)]
    values = kv_row[:n].to(dtype=torch.int64, copy=True)
    priority = req.priority or 0
    prefix_len = cache.insert(key, values, priority, req.cache_inserted_len)
    adopted = cache.adopted
    req.cache_inserted_len = max(req.cache_inserted_len, n)
    n_prompt = min(req.origin_input_len, len(token_ids)) // page * page
    if 0 < n_prompt < n:
        cache.insert(key[:n_prompt], values[:n_prompt], min(priority + 1, _INT64_MAX), n_prompt)
    cache.adopted = adopted
    _free_duplicates(cache, kv_row, req.cache_protected_len, prefix_len)
    match = cache.match_prefix(key)
    assert match.prefix_len == n, (match.prefix_len, n)
    protected = req.cache_protected_len
    if n > protected:
        pool.write(row, protected, match.device_indices[protected:])
    req.cache_protected_len = n
    cache.unlock(req.lock)
    req.lock = cache.lock(match.last_node)
    req.last_node = match.last_node
