"""Request-level cache operations: publishing a running request's KV and releasing a request.

Mirror sglang 0.5.23: ``RadixCache.checkpoint`` / ``_insert_cache``
(``sglang/srt/mem_cache/radix_cache.py``), called after every extend step for every request that
did not finish (``checkpoint_kv_cache`` in ``mem_cache/common.py``, from the batch result
processor and ``stash_chunked_request``), and ``release_kv_cache`` (``mem_cache/common.py``) for a
``RadixCache``: on finish with a checkpoint first, on retraction (``release_req``) without.
Kept apart from the tree code: they only combine the tree's public operations with the request's
``req_to_token`` row and the allocator, so the SGLang adapter can run the same request flows.

Pages (``page_size > 1``): the tree holds whole pages only; ``req.cache_protected_len`` (page
aligned) marks the part of the row the tree owns, so the partial last page stays the request's
and is freed by the next checkpoint's duplicates or by ``release``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import torch

from radixbench.cache.key import RadixKey

if TYPE_CHECKING:
    from radixbench.cache.allocator import ReqToTokenPool
    from radixbench.cache.interface import CacheReq
    from radixbench.cache.node import TreeNode
    from radixbench.cache.radix_cache import RadixCache

#: SGLang clamps the prompt split's ``priority + 1`` to int64's max.
_INT64_MAX = (1 << 63) - 1


def _pool(cache: RadixCache) -> ReqToTokenPool:
    if cache.req_to_token_pool is None:
        raise RuntimeError("request operations need a ReqToTokenPool")
    return cache.req_to_token_pool


def free_duplicates(
    cache: RadixCache, row: torch.Tensor, start: int, end: int, kept: list[tuple[int, int]]
) -> None:
    """Free the slots ``row[start:end]`` (a copy: the row is rewritten after) except the
    ``kept`` ``[a, b)`` ranges, which the tree adopted. Mutates the allocator."""
    if end <= start:
        return
    keep = [(a, b) for a, b in kept if b > start and a < end]
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


def checkpoint(
    cache: RadixCache,
    req: CacheReq,
    up_to: int,
    adopted: Callable[[], list[tuple[int, int]]] | None = None,
) -> None:
    """Insert ``req.token_ids(up_to)`` (whose KV is in ``req_to_token[req.req_pool_idx,
    :up_to]``) and make the request hold the tree's copy.

    Steps, as ``RadixCache.checkpoint`` / ``_insert_cache`` of sglang 0.5.23: insert the
    page-aligned key with the row's slots (a copy), ``inserted_len = req.cache_inserted_len``
    and the request's priority; raise ``cache_inserted_len`` to the key length; when the key
    runs past the prompt, insert the page-aligned prompt again with ``inserted_len`` = its length
    and priority ``priority + 1`` (it splits the leaf at the prompt boundary so eviction can drop
    the output KV first); free the row's slots ``[cache_protected_len, prefix_len)``, duplicates
    of what the tree already held; re-match the key, rewrite ``req_to_token[row,
    cache_protected_len:]`` with the tree's slots; set ``cache_protected_len`` to the key
    length; move the lock (``req.lock``) to the new last node and set ``req.last_node``. Both
    inserts carry the request's ``session_id`` (``None`` when it has none), as 0.5.23's
    ``InsertParams.session_id = req.session_id`` (``unified_radix_cache.py:1187``): the KV
    events of the nodes they add name the session.

    ``adopted``: with tiers, the ranges of the key whose slots the (first) insert adopted for
    host-only nodes it walked (``TieredTree.adopted``: sglang 0.5.23's unified insert restores
    such a node from the request's fresh slots, ``_unevict_node_on_insert``,
    ``unified_tree_core.py:1564-1590``, and frees only the overlap of live nodes,
    ``:1332-1366``); those slots are the tree's now and are not freed as duplicates.

    Mutates the tree, the allocator, the ``req_to_token`` row and ``req`` (``lock``,
    ``last_node``, ``cache_protected_len``, ``cache_inserted_len``). Raises ``RuntimeError``
    without a ``ReqToTokenPool``; ``AssertionError`` if the re-match misses part of the key.
    """
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
    session = getattr(req, "session_id", None)
    prefix_len = cache.insert(key, values, priority, req.cache_inserted_len, session)
    kept = adopted() if adopted is not None else []
    req.cache_inserted_len = max(req.cache_inserted_len, n)
    n_prompt = min(req.origin_input_len, len(token_ids)) // page * page
    if 0 < n_prompt < n:
        split_priority = min(priority + 1, _INT64_MAX)
        cache.insert(key[:n_prompt], values[:n_prompt], split_priority, n_prompt, session)
    protected = req.cache_protected_len
    # a copy: the row is rewritten below (allocator: Ownership)
    free_duplicates(cache, kv_row, protected, prefix_len, kept)
    match = cache.match_prefix(key)
    assert match.prefix_len == n, (match.prefix_len, n)
    if n > protected:
        pool.write(row, protected, match.device_indices[protected:])
    req.cache_protected_len = n
    cache.unlock(req.lock)
    req.lock = cache.lock(match.last_node)
    req.last_node = match.last_node


def release(cache: RadixCache, req: CacheReq, owned_len: int, checkpoint_first: bool) -> None:
    """Give ``req``'s KV row back: with ``checkpoint_first`` (a finished request) first
    ``checkpoint(req, owned_len)``; then free the row's slots ``[cache_protected_len,
    owned_len)`` (the request's own KV: the unaligned tail, or everything uncached on a
    retraction), unlock ``req.lock`` and free the ``req_to_token`` row.

    ``owned_len``: tokens whose KV the request wrote (0.5.23 ``Req.owned_kv_len``: input +
    output minus the last sampled token). Slots the request allocated beyond ``owned_len`` are
    the caller's to free (0.5.23 ``_release_overallocated_kv_indices``). Mirrors
    ``release_kv_cache`` of sglang 0.5.23 for a ``RadixCache``. Mutates the tree, the allocator,
    the pool and ``req`` (``lock`` and ``last_node`` become ``None``). Raises ``RuntimeError``
    without a ``ReqToTokenPool``.
    """
    pool = _pool(cache)
    if checkpoint_first:
        checkpoint(cache, req, owned_len)
    protected = req.cache_protected_len
    if owned_len > protected:
        cache.allocator.free(  # a copy: the row goes to the next request
            pool.req_to_token[req.req_pool_idx, protected:owned_len].to(torch.int64, copy=True)
        )
    cache.unlock(req.lock)
    req.lock = None
    req.last_node = None
    pool.free(req.req_pool_idx)


class RequestOps:
    """``PrefixCache``'s request surface of radixbench's tree (``lock`` / ``unlock`` over its
    ``inc_lock_ref`` / ``dec_lock_ref``; ``checkpoint`` / ``release`` as the functions above).
    A mixin of :class:`~radixbench.cache.radix_cache.RadixCache`."""

    def inc_lock_ref(self, node: TreeNode) -> int:
        raise NotImplementedError  # the tree's

    def dec_lock_ref(self, node: TreeNode) -> int:
        raise NotImplementedError  # the tree's

    def lock(self, node: TreeNode) -> TreeNode:
        """Lock the path root..node for one holder; the handle to give ``unlock`` (here the node
        itself). Mirrors ``BasePrefixCache.lock`` of sglang 0.5.23 (which returns a
        ``TreeLock``)."""
        self.inc_lock_ref(node)
        return node

    def unlock(self, handle: TreeNode | None) -> None:
        """Release a ``lock`` handle; ``None`` is a no-op (``BasePrefixCache.unlock``)."""
        if handle is not None:
            self.dec_lock_ref(handle)

    def checkpoint(self, req: CacheReq, up_to: int) -> None:
        """Publish what a running request has computed so far (its first ``up_to`` tokens),
        so that other requests can match it; see ``requests.checkpoint`` (mirrors
        ``RadixCache.checkpoint`` of sglang 0.5.23)."""
        checkpoint(cast("RadixCache", self), req, up_to)

    def release(self, req: CacheReq, owned_len: int, checkpoint: bool) -> None:
        """Give a request's KV row back (finish: ``checkpoint=True``; retraction or abort:
        ``False``); see ``requests.release`` (mirrors ``release_kv_cache`` of sglang 0.5.23)."""
        release(cast("RadixCache", self), req, owned_len, checkpoint)
