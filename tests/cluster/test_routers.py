"""Router policies against a scripted cluster view: each decision rule of the module docstrings
(SGLang model gateway power_of_two / round_robin, cache_aware at 73da68c, llm-d scorers, oracle),
eligibility (unhealthy instances), option parsing and its one-line errors. SMG's current
cache_aware: ``test_cache_aware.py``; Dynamo: ``test_dynamo_kv.py``."""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from radixbench.cache.kv_events import BlockRemoved, BlockStored
from radixbench.cluster.routers import ROUTERS, RouterError, make_router, router_options
from radixbench.cluster.routers.base import SHED, RouteRequest, least_loaded
from radixbench.cluster.routers.page_hash import engine_block_ids


def req(tokens: list[int], rid: int = 0) -> RouteRequest:
    return RouteRequest(rid, array("q", tokens), len(tokens), 8, 0.0)


def route(router: Any, r: RouteRequest, view: Any) -> int:
    i = router.route(r, view)
    view.outstanding[i] += 1
    view.processed[i] += 1
    return i


def test_registry_lists_every_policy() -> None:
    assert set(ROUTERS) == {
        "round-robin", "random", "shortest-queue", "shortest-queue-tokens", "power-of-two",
        "cache-aware", "precise", "dynamo-kv", "oracle",
    }  # fmt: skip
    for name, cls in ROUTERS.items():
        assert cls.name == name
        make_router(name, 3, None, 0, 1)  # default options build


def test_option_errors_name_the_key() -> None:
    assert router_options("cache-aware", {"cache_threshold": "0.5"}).cache_threshold == 0.5
    assert router_options("cache-aware", {"balance_abs_threshold": 7}).balance_abs_threshold == 7
    with pytest.raises(RouterError, match=r"router_options\.cache-aware\.nope: no such option"):
        router_options("cache-aware", {"nope": 1})
    with pytest.raises(RouterError, match=r"cache-aware\.cache_threshold: expected float"):
        router_options("cache-aware", {"cache_threshold": "high"})
    with pytest.raises(RouterError, match=r"cache-aware: cache_threshold must be in \[0, 1\]"):
        router_options("cache-aware", {"cache_threshold": 2.0})
    with pytest.raises(RouterError, match="unknown router"):
        router_options("nearest", {})
    with pytest.raises(RouterError, match="no such option"):
        router_options("round-robin", {"x": 1})


def test_load_routers(View: type) -> None:
    v = View(3)
    rr = make_router("round-robin", 3, None, 0, 1)
    assert [route(rr, req([1]), v) for _ in range(5)] == [0, 1, 2, 0, 1]
    v = View(3, outstanding=[2, 1, 1], processed=[5, 4, 3])
    assert least_loaded(v) == 2  # ties on load: fewer processed
    v = View(3, outstanding=[2, 1, 1], processed=[5, 3, 3])
    assert least_loaded(v) == 1  # then lower index
    sq = make_router("shortest-queue", 3, None, 0, 1)
    assert sq.route(req([1]), v) == 1
    sqt = make_router("shortest-queue-tokens", 3, None, 0, 1)
    assert sqt.route(req([1]), View(3, outstanding_tokens=[9, 3, 5])) == 1
    rnd = make_router("random", 4, None, 7, 1)
    picks = [rnd.route(req([1]), View(4)) for _ in range(400)]
    assert set(picks) == {0, 1, 2, 3}
    again = make_router("random", 4, None, 7, 1)
    assert picks == [again.route(req([1]), View(4)) for _ in range(400)]  # seeded


def test_blind_routers_skip_unhealthy_and_shed(View: type) -> None:
    """SMG's policies pick among the healthy workers (round_robin.rs:28-44: the counter modulo
    the healthy ones) and answer None (shed) when none is."""
    v = View(3, down={1})
    rr = make_router("round-robin", 3, None, 0, 1)
    assert [route(rr, req([1]), v) for _ in range(4)] == [0, 2, 0, 2]
    for name in ("random", "shortest-queue", "shortest-queue-tokens", "power-of-two"):
        r = make_router(name, 3, None, 0, 1)
        assert {r.route(req([1]), v) for _ in range(50)} <= {0, 2}
        assert r.route(req([1]), View(3, down={0, 1, 2})) == SHED


def test_power_of_two_picks_the_lower_of_two_distinct(View: type) -> None:
    p2 = make_router(
        "power-of-two", 2, router_options("power-of-two", {"metric": "requests"}), 0, 1
    )
    assert all(p2.route(req([1]), View(2, outstanding=[5, 1])) == 1 for _ in range(20))
    kv = make_router("power-of-two", 2, None, 0, 1)
    assert all(kv.route(req([1]), View(2, usage=[0.1, 0.9])) == 0 for _ in range(20))


def _ca73(**kw: object) -> dict[str, object]:
    return {"revision": "73da68c", **kw}


def test_cache_aware_73da68c_follows_the_gateway(View: type) -> None:
    opts = router_options("cache-aware", _ca73(balance_abs_threshold=4, page=4))
    ca = make_router("cache-aware", 3, opts, 0, 1)
    v = View(3)
    a = list(range(100, 140))  # 10 pages of 4
    first = route(ca, req(a), v)
    assert first == 0  # miss on an empty tree: min load (ties: processed, index)
    assert route(ca, req(a[:32] + [7] * 8), v) == first  # 32/40 matched > 0.3: the same
    assert route(ca, req([1, 2, 3, 4, 5, 6, 7, 8, *a]), v) == 1  # miss: min load
    assert (ca.stats["imbalanced"], ca.stats["hit"], ca.stats["miss"]) == (0, 1, 2)
    v.outstanding = [9, 0, 0]  # 9 - 0 > 4 and 9 > 1.5 * 0: imbalanced -> min load
    assert route(ca, req(a), v) == 2  # loads tie: instance 2 processed fewer (0 < 1)
    assert ca.stats["imbalanced"] == 1
    # the imbalanced decision inserted a for instance 2 too, the most recent tenant; but the
    # gateway answers the node's cached tenant, else the first attached (token_tree.rs:253-269)
    v.outstanding = [1, 1, 1]
    assert route(ca, req(a), v) == 0
    low = make_router("cache-aware", 3, router_options("cache-aware", _ca73(page=4)), 0, 1)
    w = View(3)
    route(low, req(a), w)
    assert route(low, req(a[:8] + list(range(500, 532))), w) != 0  # 8/40 = 0.2 <= 0.3: miss


def test_cache_aware_73da68c_imbalance_is_f32(View: type) -> None:
    """cache_aware.rs:305-306 @73da68c: ``max as f32 > min as f32 * rel``. With rel 1.3, loads
    90 and 117: f32 says imbalanced (90 x 1.3 rounds below 117), f64 does not."""
    opts = router_options("cache-aware", _ca73(page=4, balance_abs_threshold=1,
                                               balance_rel_threshold=1.3))  # fmt: skip
    ca = make_router("cache-aware", 2, opts, 0, 1)
    a = list(range(40))
    assert route(ca, req(a), View(2)) == 0
    v = View(2, outstanding=[117, 90])
    assert ca.route(req(a), v) == 1 and ca.stats["imbalanced"] == 1


def test_cache_aware_hit_on_unhealthy_goes_to_first_healthy(View: type) -> None:
    """A hit whose tenant is unhealthy inserts nothing and goes to the first healthy worker
    (cache_aware.rs:1009-1063 @73da68c), not counted as processed."""
    for rev in ("73da68c", "f8daa88"):
        ca = make_router("cache-aware", 3, router_options("cache-aware", {"revision": rev,
                         "page": 4}), 0, 1)  # fmt: skip
        a = list(range(40))
        assert route(ca, req(a), View(3)) == 0
        before = dict(ca.tree.tokens)
        v = View(3, down={0}, outstanding=[1, 5, 0])
        assert ca.route(req(a), v) == 1 and ca.skip_processed
        assert ca.tree.tokens == before and ca.stats["fallback"] == 1


def test_cache_aware_smallest_tree_miss_and_tree_eviction(View: type) -> None:
    opts = router_options(
        "cache-aware",
        _ca73(miss="smallest-tree", page=4, max_tree_size=16, eviction_interval_secs=10),
    )
    ca = make_router("cache-aware", 2, opts, 0, 1)
    v = View(2, outstanding=[0, 5])
    assert route(ca, req(list(range(40))), v) == 0  # both trees empty: index 0
    assert route(ca, req(list(range(100, 108))), v) == 1  # instance 1 holds fewer tokens
    assert ca.tree.tokens == {0: 40, 1: 8}
    v.t = 11.0  # an eviction tick: instance 0 trimmed to 16 tokens by LRU leaves
    route(ca, req(list(range(200, 204))), v)
    assert ca.tree.tokens[0] <= 16


def _stored(tokens: list[int], page: int) -> BlockStored:
    return BlockStored(engine_block_ids(array("q", tokens), page), None, tokens, page)


def test_precise_scores_resident_prefixes(View: type) -> None:
    pr = make_router("precise", 3, None, 0, 4)
    a = list(range(40))
    pr.on_events(2, [_stored(a[:32], 4)])
    pr.on_events(1, [_stored(a[:8], 4)])
    v = View(3)
    assert pr.route(req(a), v) == 2
    assert pr.overlap == [0, 2, 8]
    pr.on_events(2, [BlockRemoved(engine_block_ids(array("q", a[:32]), 4)[2:])])
    assert pr.route(req(a), v) == 1 or pr.overlap[2] == 2
    assert pr.overlap == [0, 2, 2]
    # load scorers: a long queue and a full KV pool outweigh a small prefix advantage
    busy = View(3, queues=[0, 0, 9], usage=[0.0, 0.0, 0.9])
    pr.on_events(2, [_stored(a[:32], 4)])
    assert pr.route(req(a + [99] * 200), busy) in (0, 1)


def test_precise_and_oracle_skip_unhealthy(View: type) -> None:
    a = list(range(40))
    for name in ("precise", "oracle"):
        r = make_router(name, 3, None, 0, 4)
        r.on_events(0, [_stored(a, 4)])
        assert r.route(req(a), View(3)) == 0
        assert r.route(req(a), View(3, down={0})) in (1, 2)
        assert r.route(req(a), View(3, down={0, 1, 2})) == SHED


def test_oracle_longest_prefix_under_a_load_cap(View: type) -> None:
    orc = make_router("oracle", 3, router_options("oracle", {"slack": 2}), 0, 4)
    a = list(range(40))
    orc.on_events(0, [_stored(a, 4)])
    orc.on_events(1, [_stored(a[:20], 4)])
    assert orc.route(req(a), View(3)) == 0
    assert orc.route(req(a), View(3, outstanding=[5, 3, 1])) == 1  # 0 is over min + 2
    assert orc.route(req([7] * 40), View(3, outstanding=[1, 1, 0])) == 2  # none holds it
