from __future__ import annotations

from array import array

import torch

from radixbench.cache import RadixCache, RadixKey, ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.integrity import check_integrity
from radixbench.sim.chunked import cache_unfinished_req
from radixbench.sim.request import Req

CPU = torch.device("cpu")


def _setup():
    alloc = TokenToKVPoolAllocator(1000, CPU, check_repeats=True)
    pool = ReqToTokenPool(4, 200, CPU)
    return RadixCache(pool, alloc), alloc, pool


def _start(cache: RadixCache, pool: ReqToTokenPool, alloc, ids: list[int], chunk: int) -> Req:
    """Admit ``ids`` and run its first chunk: match, lock, allocate and write the new slots."""
    r = Req(0, 0.0, array("q", ids), 4)
    m = cache.match_prefix(RadixKey(r.input_ids[:-1]))
    cache.inc_lock_ref(m.last_node)
    r.prefix_indices, r.last_node = m.device_indices, m.last_node
    r.req_pool_idx = pool.alloc()
    p = m.prefix_len
    r.fill_ids = r.input_ids[: p + chunk]
    new = alloc.alloc(len(r.fill_ids) - p)
    pool.req_to_token[r.req_pool_idx, :p] = m.device_indices
    pool.req_to_token[r.req_pool_idx, p : len(r.fill_ids)] = new
    r.seq_len = len(r.fill_ids)
    return r


def test_chunk_is_cached_locked_and_owned_by_the_tree() -> None:
    cache, alloc, pool = _setup()
    r = _start(cache, pool, alloc, list(range(100)), chunk=40)
    before = alloc.available_size()
    assert cache_unfinished_req(cache, r) == 40  # the chunk is now the cached prefix
    assert alloc.available_size() == before  # nothing was a duplicate
    assert r.prefix_indices.numel() == 40
    assert cache.match_prefix(RadixKey(array("q", range(40)))).prefix_len == 40
    assert cache.protected_size() == 40 and cache.evictable_size() == 0
    row = pool.req_to_token[r.req_pool_idx, :40].to(torch.int64)
    assert torch.equal(row, r.prefix_indices)
    check_integrity(cache)


def test_duplicate_slots_are_freed_and_the_row_rewritten() -> None:
    cache, alloc, pool = _setup()
    a = _start(cache, pool, alloc, list(range(100)), chunk=40)
    b = _start(cache, pool, alloc, list(range(100)), chunk=30)  # same tokens, nothing cached yet
    cache_unfinished_req(cache, a)
    old_b_row = pool.req_to_token[b.req_pool_idx, :30].clone()
    before = alloc.available_size()
    assert cache_unfinished_req(cache, b) == 30  # all 30 already in the tree (from a)
    assert alloc.available_size() == before + 30  # b's duplicate slots went back
    tree_slots = pool.req_to_token[a.req_pool_idx, :30]
    assert torch.equal(pool.req_to_token[b.req_pool_idx, :30], tree_slots)
    assert not torch.equal(old_b_row, tree_slots)
    # both hold locks on the shared path: nothing evictable
    assert cache.evictable_size() == 0
    check_integrity(cache)


def test_lock_moves_from_the_old_to_the_new_last_node() -> None:
    cache, alloc, pool = _setup()
    r = _start(cache, pool, alloc, list(range(100)), chunk=40)
    cache_unfinished_req(cache, r)
    first = r.last_node
    # second chunk: 40 more tokens
    r.fill_ids = r.input_ids[:80]
    new = alloc.alloc(40)
    pool.req_to_token[r.req_pool_idx, 40:80] = new
    cache_unfinished_req(cache, r)
    assert r.last_node is not first and r.prefix_indices.numel() == 80
    assert cache.protected_size() == 80
    assert first is not None and first.lock_ref == 1  # still on the locked path
    cache.dec_lock_ref(r.last_node)
    assert cache.evictable_size() == 80 and cache.protected_size() == 0
    check_integrity(cache)
