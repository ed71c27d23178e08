"""Gateways: one gateway decides as the bare policy; many keep their own loads and state (or
share one index); unhealthy windows take instances out of every gateway's routing."""

from __future__ import annotations

from array import array
from types import SimpleNamespace
from typing import Any

import pytest

from radixbench.cluster.routers import make_router, router_options
from radixbench.cluster.routers.base import SHED, RouteRequest
from radixbench.cluster.routers.gateway import Gateways
from radixbench.cluster.spec import ClusterError, ClusterSpec

A = list(range(100, 140))


def req(tokens: list[int], rid: int) -> RouteRequest:
    return RouteRequest(rid, array("q", tokens), len(tokens), 8, 0.0)


def gateways(name: str, count: int = 1, shared: bool = False, **kw: Any) -> Gateways:
    opts = router_options(name, {"page": 4} if name == "cache-aware" else {})
    return Gateways(lambda s: make_router(name, 3, opts, s, 4), 3, 0, count, shared, **kw)


def test_one_gateway_decides_as_the_bare_policy(View: type) -> None:
    opts = router_options("cache-aware", {"page": 4})
    bare, gw = make_router("cache-aware", 3, opts, 0, 4), gateways("cache-aware")
    v, base = View(3), View(3)
    for rid in range(60):
        tokens = A[: 8 + (rid * 7) % 32] + [rid] * 4
        i = bare.route(req(tokens, rid), v)
        v.outstanding[i] += 1
        v.processed[i] += 1
        assert gw.route(req(tokens, rid), base) == i
        assert gw.views[0].outstanding == v.outstanding
        if rid % 3 == 0:
            gw.on_finish(i, rid)
            v.outstanding[i] -= 1
    assert gw.stats["hit"] == bare.stats["hit"] and gw.last_gateway == 0


def test_many_gateways_keep_their_own_loads_and_trees(View: type) -> None:
    gw = gateways("cache-aware", count=4)
    base = View(3)
    seen = [gw.route(req(A, rid), base) for rid in range(40)]
    used = {gw.owner[rid][0] for rid in range(40)}
    assert used == {0, 1, 2, 3}  # seeded uniform spread
    assert sum(sum(v.outstanding) for v in gw.views) == 40
    assert len({id(p) for p in gw.policies}) == 4
    # each gateway sent its first A to its least loaded instance 0, then kept affinity
    assert set(seen) == {0}
    gw.on_finish(seen[0], 0)
    assert sum(sum(v.outstanding) for v in gw.views) == 39
    shared = gateways("cache-aware", count=4, shared=True)
    assert len({id(p) for p in shared.policies}) == 1


def test_shared_index_sees_every_gateways_placements(View: type) -> None:
    """Own trees: a gateway that never saw a prefix routes it as a miss; one shared index
    routes it to the holder."""
    for shared, want in ((False, 2), (True, 0)):
        gw = gateways("cache-aware", count=2, shared=shared)
        base = View(3)
        gw.rng = SimpleNamespace(integers=lambda n: 0)  # type: ignore[assignment]
        assert gw.route(req(A, 0), base) == 0  # gateway 0 sends A to 0
        gw.rng = SimpleNamespace(integers=lambda n: 1)  # type: ignore[assignment]
        gw.views[1].outstanding = [1, 1, 0]
        assert gw.route(req(A, 1), base) == want


def test_unhealthy_windows(View: type) -> None:
    gw = gateways("round-robin", unhealthy=[(1, 10.0, 20.0)])
    v = View(3)
    assert [gw.route(req(A, r), v) for r in range(3)] == [0, 1, 2]
    v.t = 10.0
    assert [gw.route(req(A, r), v) for r in range(3, 6)] == [2, 0, 2]
    v.t = 20.0  # the window ends (exclusive)
    assert 1 in {gw.route(req(A, r), v) for r in range(6, 9)}
    down = gateways("cache-aware", unhealthy=[(i, 0.0, 5.0) for i in range(3)])
    assert down.route(req(A, 9), View(3)) == SHED and down.stats["shed"] == 1


def test_spec_validates_gateways_and_windows() -> None:
    with pytest.raises(ClusterError, match=r"gateways: each must be an int >= 1, got \[0\]"):
        ClusterSpec(instances=2, gateways=(0,))
    with pytest.raises(ClusterError, match=r"unhealthy: .*instance must be in 0\.\.1"):
        ClusterSpec(instances=2, unhealthy=((2, 0.0, 1.0),))
    with pytest.raises(ClusterError, match="start_s < end_s"):
        ClusterSpec(instances=2, unhealthy=((1, 5.0, 1.0),))
    spec = ClusterSpec(instances=2, unhealthy=((1, 50.0, 60.0),))
    spec.check_run(60.0)
    with pytest.raises(ClusterError, match="after the run's last arrival"):
        spec.check_run(40.0)
