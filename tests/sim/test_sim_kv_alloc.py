"""SlotAllocator: the scheduler's KV allocation per token and per page, against hand-worked
examples (SGLang alloc_for_extend / alloc_for_decode / check_decode_mem @ a7ec6b97)."""

from __future__ import annotations

from array import array

import pytest
import torch

from radixbench.cache import RadixKey, make_allocator
from radixbench.cache.allocator import ReqToTokenPool
from radixbench.cache.radix_cache import CacheConfig, RadixCache
from radixbench.sim.instrument import OpRecorder, instrument
from radixbench.sim.kv_alloc import SlotAllocator
from radixbench.sim.request import Req

EMPTY = torch.empty(0, dtype=torch.int64)


def setup(size: int = 64, page: int = 4):
    alloc = make_allocator(size, page)
    pool = ReqToTokenPool(8, 64)
    cache = RadixCache(pool, alloc, CacheConfig(page_size=page))
    rec = OpRecorder(lambda: 1.5)
    instrument(cache, rec)
    return cache, alloc, pool, SlotAllocator(cache, rec), rec


def req(rid: int, tokens: list[int], row: int, prefix: torch.Tensor = EMPTY) -> Req:
    r = Req(rid, 0.0, array("q", tokens), output_len=8)
    r.prefix_indices, r.req_pool_idx = prefix, row
    return r


def run_extend(slots: SlotAllocator, pool, reqs: list[Req]) -> torch.Tensor:
    """Allocate and write one extend step as the scheduler does (prefix, then new slots)."""
    prefix = [r.prefix_indices.numel() for r in reqs]
    loc = slots.extend(reqs, prefix)
    off = 0
    for r, p in zip(reqs, prefix):
        n = len(r.fill_ids) - p
        pool.req_to_token[r.req_pool_idx, :p] = r.prefix_indices
        pool.req_to_token[r.req_pool_idx, p : p + n] = loc[off : off + n]
        r.seq_len = len(r.fill_ids)
        off += n
    return loc


def ops(rec: OpRecorder, op: str) -> list[tuple[int, int]]:
    return [(k, r) for o, k, r in zip(rec.rows["op"], rec.rows["key_len"], rec.rows["result"])
            if o == op]  # fmt: skip


def test_extend_takes_new_pages_after_a_cached_prefix_in_request_order() -> None:
    cache, alloc, pool, slots, rec = setup()
    cache.insert(RadixKey(list(range(1, 9))), alloc.alloc(8))  # pages 1, 2: slots 4..11
    m = cache.match_prefix(RadixKey(list(range(1, 13))))
    a = req(0, list(range(1, 14)), 1, m.device_indices)  # 8 cached + 5 new -> pages 3, 4
    b = req(1, [50, 51, 52], 2)  # 3 new -> page 5
    assert run_extend(slots, pool, [a, b]).tolist() == [12, 13, 14, 15, 16, 20, 21, 22]
    assert ops(rec, "alloc") == [(8, 8)]
    assert rec.rows["sim_time_s"][-1] == 1.5


def test_a_chunk_continues_the_page_of_its_unaligned_tail() -> None:
    _cache, alloc, pool, slots, _ = setup()
    r = req(0, list(range(1, 15)), 1)
    r.fill_ids = r.input_ids[:10]
    assert run_extend(slots, pool, [r]).tolist() == list(range(4, 14))  # pages 1-3
    r.prefix_indices = pool.req_to_token[1, :10].to(torch.int64)  # tree 8 + own tail 2
    r.fill_ids = r.input_ids
    # positions 10, 11 finish page 3 (slots 14, 15); 12, 13 open page 4.
    assert run_extend(slots, pool, [r]).tolist() == [14, 15, 16, 17]
    assert alloc.available_size() == 64 - 4 * 4


@pytest.mark.parametrize(("page", "asked", "held"), [(1, [], 18), (4, [18 + 3 * 4 - 24], 24)])
def test_extend_evicts_the_worst_case_when_short(page: int, asked: list, held: int) -> None:
    """40 evictable tree tokens, 24 free; three fresh 6-token requests need 18 slots (page 1:
    they fit, nothing is evicted) or 6 pages (24 tokens): SGLang asks the tree for the extend
    plus one page per request, 30 > 24, so the paged allocator first evicts the shortfall, 6
    tokens (sglang 0.5.23 ``evict_to_free_tokens``)."""
    cache, alloc, pool, slots, rec = setup(page=page)
    cache.insert(RadixKey(list(range(1000, 1040))), alloc.alloc(40))
    reqs = [req(i, [10 * i + k for k in range(6)], i + 1) for i in range(3)]
    run_extend(slots, pool, reqs)
    assert [k for k, _ in ops(rec, "evict")] == asked
    assert alloc.available_size() + cache.total_size() == 64 - held


def test_decode_opens_a_page_only_at_a_boundary_and_fits_without_free_pages() -> None:
    _cache, alloc, pool, slots, _ = setup(size=16)  # 4 pages
    x, y = req(0, list(range(6)), 1), req(1, list(range(100, 108)), 2)
    run_extend(slots, pool, [x, y])  # x: pages 1, 2 (last slot 9); y: pages 3, 4 (full)
    assert alloc.available_size() == 0
    assert slots.new_pages_next_decode([x]) == 0 and slots.new_pages_next_decode([x, y]) == 1
    assert slots.decode_fits([x])  # position 6 lies in x's own page 2
    assert not slots.decode_fits([x, y])  # y's position 8 needs a page; nothing to evict
    assert slots.decode([x]).tolist() == [10]
    alloc.free(pool.req_to_token[2, :8].to(torch.int64))  # y leaves: pages 3, 4 free
    x.seq_len = 8
    pool.req_to_token[1, 6:8] = torch.tensor([10, 11], dtype=torch.int32)
    assert slots.decode_fits([x]) and slots.decode([x]).tolist() == [12]  # page 3


def test_release_frees_whole_pages_from_the_protected_page() -> None:
    cache, alloc, pool, slots, _ = setup()
    row = pool.alloc()  # the row release gives back
    assert row is not None
    r = req(0, list(range(1, 15)), row)
    run_extend(slots, pool, [r])  # 14 tokens: pages 1-4
    cache.insert(RadixKey(list(range(1, 9))), pool.req_to_token[row, :8].to(torch.int64))
    r.cache_protected_len = 8  # the tree owns pages 1, 2; the request the rest
    assert slots.own_start(r) == 8
    cache.release(r, r.seq_len, False)  # a retraction: no checkpoint
    assert alloc.available_size() == 64 - 8  # pages 3, 4 back; the tree keeps 1, 2
    assert not bool(alloc.is_free[4:12].any()) and bool(alloc.is_free[12:20].all())


def test_page_one_takes_slots_in_pool_order_and_paged_needs_the_paged_allocator() -> None:
    _cache, _alloc, pool, slots, _ = setup(page=1)
    a, b = req(0, [1, 2, 3], 1), req(1, [4, 5], 2)
    assert run_extend(slots, pool, [a, b]).tolist() == [1, 2, 3, 4, 5]
    assert slots.decode([a, b]).tolist() == [6, 7]
    tok = make_allocator(64, 1)
    with pytest.raises(ValueError, match="PagedTokenToKVPoolAllocator"):
        SlotAllocator(RadixCache(ReqToTokenPool(2, 8), tok, CacheConfig(page_size=4)),
                      OpRecorder())  # fmt: skip
