"""cache_finished_req: KV-slot bookkeeping of a finished request (SGLang semantics)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from radixbench.cache import DoubleFreeError, RadixKey, TreeNode, check_integrity


@dataclass
class FakeReq:
    """The minimal request ``cache_finished_req`` reads (SGLang ``Req`` shape)."""

    req_pool_idx: int
    prefix_indices: torch.Tensor
    last_node: TreeNode
    extra_key: str | None
    tokens: list[int]

    def committed_token_ids(self) -> RadixKey:
        return RadixKey(self.tokens, self.extra_key)


def start(cache, alloc, tokens: list[int], extra_key: str | None = None):
    """Schedule a request as SGLang does: match, lock the prefix, take a row, write the cached
    prefix's slots then fresh slots for the rest. Returns (req, fresh slots)."""
    pool = cache.req_to_token_pool
    r = cache.match_prefix(RadixKey(tokens, extra_key))
    cache.inc_lock_ref(r.last_node)
    row = pool.alloc()
    assert row is not None
    pool.write(row, 0, r.device_indices)
    fresh = alloc.alloc(len(tokens) - r.prefix_len)
    assert fresh is not None
    pool.write(row, r.prefix_len, fresh)
    check_integrity(cache)
    return FakeReq(row, r.device_indices, r.last_node, extra_key, list(tokens)), fresh


def finish(cache, req: FakeReq) -> int:
    pool = cache.req_to_token_pool
    rows = pool.available_size()
    p = cache.cache_finished_req(req)
    check_integrity(cache)
    assert pool.available_size() == rows + 1
    with pytest.raises(DoubleFreeError):  # the row really was freed
        pool.free(req.req_pool_idx)
    return p


def test_finish_first_request_caches_everything(make_cache, paths) -> None:
    cache, alloc = make_cache(kv_size=64)
    toks = list(range(1, 9))
    req, kv = start(cache, alloc, toks)
    assert req.last_node is cache.root
    assert finish(cache, req) == 0
    assert paths(cache) == {(None, tuple(toks)): kv.tolist()}
    assert alloc.available_size() == 64 - 8
    assert (cache.evictable_size(), cache.protected_size()) == (8, 0)
    assert cache.root.lock_ref == 1


def test_finish_request_with_cached_prefix_releases_lock(make_cache, paths) -> None:
    cache, alloc = make_cache(kv_size=64)
    req1, kv1 = start(cache, alloc, list(range(1, 9)))
    finish(cache, req1)
    req2, kv2 = start(cache, alloc, [1, 2, 3, 4, 5, 20, 21, 22])
    assert req2.prefix_indices.tolist() == kv1[:5].tolist()
    assert req2.last_node.lock_ref == 1
    assert cache.protected_size() == 5
    assert finish(cache, req2) == 5
    assert req2.last_node.lock_ref == 0
    assert (cache.evictable_size(), cache.protected_size()) == (11, 0)
    assert alloc.available_size() == 64 - 11
    assert paths(cache)[(None, (1, 2, 3, 4, 5, 20, 21, 22))] == kv1[:5].tolist() + kv2.tolist()


def test_finish_second_request_frees_duplicate_slots(make_cache, paths) -> None:
    cache, alloc = make_cache(kv_size=64)
    req1, kv1 = start(cache, alloc, list(range(1, 9)))
    finish(cache, req1)
    # Two requests with the same new tail, scheduled before either finished.
    toks = [1, 2, 3, 4, 5, 20, 21, 22]
    req2, kv2 = start(cache, alloc, toks)
    req3, kv3 = start(cache, alloc, toks)
    assert req2.last_node is req3.last_node
    assert req2.last_node.lock_ref == 2
    assert alloc.available_size() == 64 - 8 - 3 - 3
    assert finish(cache, req2) == 5
    assert alloc.available_size() == 64 - 8 - 3 - 3
    # req3's tail [20,21,22] was cached by req2 meanwhile: its own 3 slots are duplicates.
    assert finish(cache, req3) == 8
    assert alloc.available_size() == 64 - 8 - 3
    assert bool(alloc.is_free[kv3].all())
    assert not bool(alloc.is_free[kv2].any())
    assert req3.last_node.lock_ref == 0
    assert (cache.evictable_size(), cache.protected_size()) == (11, 0)
    assert paths(cache)[(None, tuple(toks))] == kv1[:5].tolist() + kv2.tolist()


def test_finish_without_cache_hit_frees_recomputed_prefix(make_cache, paths) -> None:
    cache, alloc = make_cache(kv_size=64)
    # Both scheduled on an empty tree: neither had a prefix hit.
    req_a, kv_a = start(cache, alloc, list(range(1, 9)))
    req_b, kv_b = start(cache, alloc, [1, 2, 3, 4, 30])
    assert req_b.prefix_indices.numel() == 0
    finish(cache, req_a)
    assert finish(cache, req_b) == 4
    # kv_b[:4] recomputed what req_a cached: freed; kv_b[4] is the tree's.
    assert bool(alloc.is_free[kv_b[:4]].all())
    assert not bool(alloc.is_free[kv_b[4:]].any())
    assert alloc.available_size() == 64 - 9
    assert paths(cache)[(None, (1, 2, 3, 4, 30))] == kv_a[:4].tolist() + kv_b[4:].tolist()


def test_finish_request_in_namespace(make_cache, paths) -> None:
    cache, alloc = make_cache(kv_size=64)
    req, kv = start(cache, alloc, [1, 2, 3], extra_key="lora")
    finish(cache, req)
    assert paths(cache) == {("lora", (1, 2, 3)): kv.tolist()}
    assert cache.match_prefix(RadixKey([1, 2, 3])).prefix_len == 0
    assert cache.match_prefix(RadixKey([1, 2, 3], "lora")).prefix_len == 3


@pytest.mark.parametrize("page", [4, 16])
def test_paged_finish_frees_unaligned_tail(make_cache, paths, page) -> None:
    cache, alloc = make_cache(page_size=page, kv_size=512)
    n = 2 * page + 2
    toks = list(range(1, n + 1))
    # C is scheduled before A finishes: no hit, all of its slots are fresh.
    req_a, kv_a = start(cache, alloc, toks)
    req_c, kv_c = start(cache, alloc, toks)
    finish(cache, req_a)
    # Only the 2 whole pages are cached; the 2-token tail went back to the allocator.
    assert paths(cache) == {(None, tuple(toks[: 2 * page])): kv_a[: 2 * page].tolist()}
    assert bool(alloc.is_free[kv_a[2 * page :]].all())
    assert alloc.available_size() == 512 - 2 * page - n
    # C: the 2 pages are duplicates of A's and its tail is unaligned: all n slots freed.
    assert finish(cache, req_c) == 2 * page
    assert bool(alloc.is_free[kv_c].all())
    assert alloc.available_size() == 512 - 2 * page
    # B diverges inside the 2nd page: its hit is 1 page; 3 pages get cached under it.
    toks_b = toks[: page + 2] + [-1] * (2 * page - 2) + [-2, -3]
    req_b, kv_b = start(cache, alloc, toks_b)
    assert req_b.prefix_indices.tolist() == kv_a[:page].tolist()
    assert cache.protected_size() == page
    assert finish(cache, req_b) == page
    assert bool(alloc.is_free[kv_b[-2:]].all())  # unaligned tail
    assert not bool(alloc.is_free[kv_b[:-2]].any())
    assert alloc.available_size() == 512 - 2 * page - 2 * page
    assert (cache.evictable_size(), cache.protected_size()) == (4 * page, 0)
    assert req_b.last_node.lock_ref == 0


def test_finished_slots_are_evictable(make_cache) -> None:
    cache, alloc = make_cache(kv_size=16)
    req, _ = start(cache, alloc, list(range(1, 9)))
    finish(cache, req)
    req2, _ = start(cache, alloc, [1, 2, 3, 9, 9])
    # req2 runs: its prefix [1,2,3] is locked, [4..8] is not.
    res = cache.evict(100)
    check_integrity(cache)
    assert res.num_evicted == 5
    assert cache.total_size() == 3
    finish(cache, req2)
    assert cache.evict(100).num_evicted == 5
    assert alloc.available_size() == 16
    check_integrity(cache)
