from __future__ import annotations

from array import array

import pytest
import torch

from radixbench.cache import RadixCache, RadixKey, TokenToKVPoolAllocator
from radixbench.sim.request import Req
from radixbench.sim.sched_policy import SCHED_POLICIES, SchedPolicy


def _cache_with(prefixes: list[list[int]]) -> RadixCache:
    alloc = TokenToKVPoolAllocator(10_000, torch.device("cpu"))
    cache = RadixCache(None, alloc)
    for p in prefixes:
        v = alloc.alloc(len(p))
        n = cache.insert(RadixKey(array("q", p)), v)
        alloc.free(v[:n])
    return cache


def _req(rid: int, ids: list[int]) -> Req:
    return Req(rid, float(rid), array("q", ids), 5)


def test_lpm_puts_the_longest_cached_prefix_first_stable_on_ties() -> None:
    cache = _cache_with([list(range(50)), [7] * 20])
    q = [_req(0, [9] * 30), _req(1, [7] * 30), _req(2, list(range(60))), _req(3, [7] * 25)]
    order = [r.rid for r in SchedPolicy("lpm", cache, 0).order(q)]
    assert order == [2, 1, 3, 0]


def test_dfs_weight_groups_requests_of_the_heavier_subtree_first() -> None:
    cache = _cache_with([[1] * 10 + [2] * 10, [1] * 10 + [3] * 10, [5] * 10])
    q = [
        _req(0, [5] * 15),
        _req(1, [1] * 10 + [2] * 12),
        _req(2, [5] * 12),
        _req(3, [1] * 10 + [3] * 12),
        _req(4, [5] * 11),
        _req(5, [9] * 4),
    ]
    order = [r.rid for r in SchedPolicy("dfs-weight", cache, 0).order(q)]
    assert set(order) == set(range(6))
    assert order[:3] == [0, 2, 4]  # subtree [5]* holds 3 requests, [1]* only 2
    assert order[-1] == 5  # matched nothing: ends at the root, emitted last


def test_random_is_a_seeded_permutation() -> None:
    cache = _cache_with([])
    q = [_req(i, [i] * 3) for i in range(20)]
    a = [r.rid for r in SchedPolicy("random", cache, 1).order(q)]
    b = [r.rid for r in SchedPolicy("random", cache, 1).order(q)]
    c = [r.rid for r in SchedPolicy("random", cache, 2).order(q)]
    assert a == b and sorted(a) == list(range(20)) and a != c


def test_cache_aware_policies_fall_back_to_fcfs_on_long_queues() -> None:
    cache = _cache_with([list(range(50))])
    q = [_req(i, [9] * 30) for i in range(5)] + [_req(5, list(range(60)))]
    assert SchedPolicy("lpm", cache, 0, fallback_queue_len=3).order(q) == q
    assert SchedPolicy("fcfs", cache, 0).order(q) == q
    assert set(SCHED_POLICIES) == {"fcfs", "lpm", "dfs-weight", "random"}
    with pytest.raises(ValueError, match="unknown sched policy"):
        SchedPolicy("sjf", cache, 0)
