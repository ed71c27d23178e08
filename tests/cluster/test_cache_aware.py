"""SMG's cache_aware as of smg-project/smg @f8daa88 (the default revision): the spill gate and
matched-tenant pressure selection (#2161), seeded random ties (#2096), overlap decay and
temperature (#2117), the KV-usage triggers on polled snapshots (#2182), the hash placement index
(#2213), the overload vetoes (#2220), the event-driven mode; against a scripted view."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pytest

from radixbench.cache.kv_events import BlockStored
from radixbench.cluster.routers import RouterError, make_router, needs_events, router_options
from radixbench.cluster.routers.base import SHED, RouteRequest
from radixbench.cluster.routers.page_hash import engine_block_ids, prefix_keys
from radixbench.cluster.routers.placement import PlacementIndex
from radixbench.cluster.routers.smg_select import sample_by_temperature

A = list(range(100, 140))  # 40 tokens: 10 pages of 4


def req(tokens: list[int], rid: int = 0) -> RouteRequest:
    return RouteRequest(rid, array("q", tokens), len(tokens), 8, 0.0)


def ca(n: int = 3, seed: int = 0, **opts: Any) -> Any:
    return make_router(
        "cache-aware", n, router_options("cache-aware", {"page": 4, **opts}), seed, 4
    )


def seed_tenants(router: Any, View: type, tenants: list[int]) -> None:
    """Make ``tenants`` hold A in the router's tree (in that order)."""
    keys = array("Q")
    keys.frombytes(prefix_keys(array("q", A), 4).tobytes())
    for t in tenants:
        router.tree.insert(keys, t)


def test_hit_prefers_the_least_loaded_matched_tenant(View: type) -> None:
    r = ca()
    seed_tenants(r, View, [0, 1])
    assert r.route(req(A), View(3, outstanding=[3, 1, 0])) == 1  # not 2: it holds nothing
    assert r.stats["hit"] == 1


def test_random_ties_are_seeded(View: type) -> None:
    picks = []
    for seed in (0, 0, 1):
        r = ca(seed=seed)
        seed_tenants(r, View, [0, 1])
        picks.append([r.route(req(A), View(3, outstanding=[1, 1, 0])) for _ in range(40)])
    assert set(picks[0]) == {0, 1} and picks[0] == picks[1] and picks[0] != picks[2]


def test_spill_gate_replicates_a_hot_prefix(View: type) -> None:
    """Over 1.5 x the mean AND 64 above it, the matched tenant spills to the least loaded,
    which the insert makes a new tenant of the prefix."""
    r = ca()
    seed_tenants(r, View, [0])
    assert r.route(req(A), View(3, outstanding=[100, 0, 5])) == 1
    assert r.stats["spill"] == 1
    assert r.route(req(A), View(3, outstanding=[100, 3, 0])) == 1  # 1 now holds A too
    assert r.route(req(A), View(3, outstanding=[60, 3, 0])) == 1  # 60 <= 21 + 64: no spill


def test_count_spread_no_longer_abandons_affinity(View: type) -> None:
    """73da68c abandons affinity fleet-wide on the count spread; f8daa88 only gates the
    selected candidate."""
    old, new = ca(revision="73da68c"), ca()
    seed_tenants(old, View, [2])
    seed_tenants(new, View, [2])
    v = View(3, outstanding=[80, 0, 10])
    assert old.route(req(A), v) == 1 and old.stats["imbalanced"] == 1
    assert new.route(req(A), v) == 2 and new.stats["hit"] == 1


def test_kv_triggers_read_the_polled_snapshot(View: type) -> None:
    """Over overload_token_usage_threshold in the last snapshot: min load, and the insert
    still lands (smg#2182 polls every load_monitor_interval_secs)."""
    r = ca(overload_token_usage_threshold=0.9)
    seed_tenants(r, View, [2])
    assert r.route(req(A), View(3, outstanding=[0, 1, 2])) == 2  # snapshot at t=0: cold
    hot = View(3, outstanding=[0, 1, 2], usage=[0.1, 0.1, 0.95], t=5.0)
    assert r.route(req(A), hot) == 2  # not polled since t=0
    hot.t = 10.0
    assert r.route(req(A), hot) == 0 and r.stats["imbalanced"] == 1  # polled at 10 s
    spread = ca(balance_token_usage_threshold=0.5)
    assert spread.route(req(A), View(3, usage=[0.7, 0.1, 0.3], outstanding=[0, 1, 1])) == 0
    assert spread.stats["imbalanced"] == 1


def test_overload_vetoes_and_shedding(View: type) -> None:
    r = ca(worker_overload_waiting_requests=4)
    v = View(3, queues=[5, 0, 4])
    assert r.route(req(A), v) == 1  # 0 and 2 are at or over 4 waiting requests
    r2 = ca(worker_overload_token_usage=0.8)
    assert r2.route(req(A), View(3, usage=[0.8, 0.9, 1.0])) == SHED


def test_overlap_decay_and_temperature(View: type) -> None:
    plain, decay = ca(), ca(overlap_decay=1.0)
    for r in (plain, decay):
        seed_tenants(r, View, [0, 1])
    v = View(3, outstanding=[0, 2, 0], queues=[9, 0, 0])  # backlog 900 tokens on 0
    assert plain.route(req(A), v) == 0 and decay.route(req(A), v) == 1
    rng = np.random.default_rng(0)
    cands = [[0, 1.0, 0], [1, 0.5, 0], [2, 0.0, 0]]
    picks = [sample_by_temperature(cands, 0.5, rng) for _ in range(3000)]
    counts = [picks.count(i) for i in range(3)]
    assert counts[0] > counts[1] > counts[2] > 0  # exp(0), exp(-1), exp(-2)
    assert abs(counts[0] / 3000 - 1 / (1 + np.exp(-1) + np.exp(-2))) < 0.03


def test_hash_index(View: type) -> None:
    r = ca(cache_index="hash", cache_boundaries="8,32")
    v = View(3, outstanding=[1, 0, 1])
    assert r.route(req(A), v) == 1  # nothing recorded: min load, recorded at 8 and 32
    v.outstanding = [0, 1, 0]
    assert r.route(req(A[:8] + [7] * 32), v) == 1  # the boundary-8 holder
    assert r.route(req([7] * 7), v) == 0  # shorter than every boundary: min load
    v.t = 200.0  # past the 180 s TTL
    assert r.route(req(A), v) == 0 and r.stats["hash_hit"] == 1
    with pytest.raises(RouterError, match="requires cache_boundaries"):
        router_options("cache-aware", {"cache_index": "hash"})


def test_event_mode_used_when_the_index_holds_blocks(View: type) -> None:
    r = ca(kv_events=True)
    assert r.needs_events and needs_events("cache-aware", r.opt)
    assert r.route(req(A), View(3, outstanding=[1, 0, 1])) == 1  # empty index: the tree
    ids = engine_block_ids(array("q", A), 4)
    r.on_events(2, [BlockStored(ids[:6], None, A[:24], 4)])
    r.on_events(0, [BlockStored(ids[:2], None, A[:8], 4)])
    assert r.route(req(A), View(3)) == 2 and r.predicted_tokens == 24
    assert r.route(req([5] * 40), View(3, outstanding=[1, 1, 0])) == 2  # no overlap: min load


def test_later_options_need_the_current_revision() -> None:
    with pytest.raises(RouterError, match="overlap_decay came with smg#2117"):
        router_options("cache-aware", {"revision": "73da68c", "overlap_decay": 1.0})
    with pytest.raises(RouterError, match="revision must be one of"):
        router_options("cache-aware", {"revision": "main"})


def test_placement_holder_cap() -> None:
    """A fourth holder of a head evicts the stalest (PLACEMENT_HOLDER_CAP 3, swap_remove)."""
    pl = PlacementIndex(180.0)
    keys = pl.heads(array("q", range(16)), (16,))
    for i, t in enumerate((0.0, 1.0, 2.0, 3.0)):
        pl.record(keys, i, t)
    assert sorted(h[0] for h in pl.keys[keys[0]]) == [1, 2, 3]
    assert pl.live_holder(keys[0], 3.0, {0, 1, 2, 3}, lambda i: 0) == 1


def test_placement_index_sweep() -> None:
    pl = PlacementIndex(10.0)
    a, b = pl.heads(array("q", range(16)), (8, 16))
    pl.record([a], 0, 0.0)
    pl.record([b], 1, 5.0)
    pl.sweep(12.0)  # a expired (12 - 0 > 10), b live
    assert list(pl.keys) == [b]


def test_boundaries_are_normalised() -> None:
    o = router_options("cache-aware", {"cache_boundaries": "64, 0,16,64"})
    assert o.boundaries() == (16, 64)
    with pytest.raises(RouterError, match="comma-separated"):
        router_options("cache-aware", {"cache_boundaries": "16,x"})
