"""Decode runs (``sim.scheduler``: several decode steps in one simpy event) change nothing a
router reads: behind 1 and 3 gateways, with unhealthy windows (one instance out, then every
instance, so requests are shed), cache-aware fed by KV events with its KV-usage triggers and
load-monitor polls, Dynamo's KV router (which reads each request's first token) and the precise
index over delayed, lossy events, a run step by step and a run in decode runs give bit-identical
request, step and op tables (the measured ``ns`` aside) and router counters, in fewer events.

tests/sim/test_coalesce.py checks the bundled scenarios; this checks the routing features those
scenarios leave at their defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import pytest
import torch

from radixbench.cluster.run import ClusterSim
from radixbench.cluster.spec import ClusterSpec, router_variants
from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.experiments.workload import load_requests
from radixbench.sim.config import Variant

CPU = torch.device("cpu")
MEASURED = {"ns", "measured_cpu_s"}
#: Metrics that hold measured time (wall clock, decision time) or simpy's event count.
MEASURED_METRICS = {
    "wall_s", "events", "events_per_s", "route_p50_us", "route_p99_us", "measured_cpu_s",
}  # fmt: skip

CACHE_AWARE_EVENTS = {
    "kv_events": True,
    "balance_token_usage_threshold": 0.5,
    "overload_token_usage_threshold": 0.7,
    "load_monitor_interval_secs": 0.5,
    "worker_overload_waiting_requests": 3,
    "overlap_decay": 0.5,
}


def _trace() -> tuple[list[Any], Any]:
    sc = load_scenario("mooncake-conversation", {"arrivals.max_requests": 40})
    trace = load_requests(sc, None).requests
    cfg = dataclasses.replace(sc.sim, clock="isolated", kv_capacity_tokens=60_000)
    return trace, cfg


def _spec(trace: list[Any], options: dict[str, Any]) -> ClusterSpec:
    at = [tr.arrival_s for tr in trace]
    return ClusterSpec(
        instances=3,
        routers=("cache-aware", "dynamo-kv", "precise"),
        router_options={"cache-aware": options},
        gateways=(1, 3),
        unhealthy=(  # instance 0 out for requests 10-37, every instance for 26-28 (shed)
            (0, at[10], at[38]),
            (1, at[26], at[29]),
            (2, at[26], at[29]),
        ),
        event_delay_s=0.5,
        event_loss=0.1,
    )


def _run(spec: ClusterSpec, trace: list[Any], cfg: Any, coalesce: bool) -> list[Any]:
    base = Variant("heapify", "galloping", "numpy")
    out = []
    for v in router_variants([base], spec):
        sim = ClusterSim(trace, cfg, v, CPU, spec, coalesce=coalesce)
        while sim.step(1 << 30):
            pass
        out.append((sim.result(), sim.events))
    return out


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    cols = [c for c in a.columns if c not in MEASURED]
    pd.testing.assert_frame_equal(a[cols], b[cols], check_exact=True)


@pytest.mark.parametrize("options", [CACHE_AWARE_EVENTS, {}], ids=["kv-events", "tree"])
def test_decode_runs_change_nothing_a_router_reads(options: dict[str, Any]) -> None:
    trace, cfg = _trace()
    spec = _spec(trace, options)
    steps = _run(spec, trace, cfg, coalesce=False)
    runs = _run(spec, trace, cfg, coalesce=True)
    fewer = 0
    for (a, events_a), (b, events_b) in zip(steps, runs, strict=True):
        _same(a.requests, b.requests)
        _same(a.timeseries, b.timeseries)
        _same(a.ops, b.ops)
        assert a.sim_end_s == b.sim_end_s
        for key in a.metrics.keys() - MEASURED_METRICS:
            assert a.metrics[key] == b.metrics[key] or (
                a.metrics[key] != a.metrics[key] and b.metrics[key] != b.metrics[key]
            ), key
        assert events_b <= events_a
        fewer += events_b < events_a
        reqs = a.requests
        # not vacuous: requests were shed, every gateway routed, events were published
        down = reqs["arrival_s"].between(*spec.unhealthy[1][1:], inclusive="left")
        assert down.sum() and (reqs.loc[down, "status"] == "rejected").all()
        assert reqs["gateway"].nunique() == int(a.metrics["gateways"])
        assert a.metrics["events_published"] > 0 or a.metrics["router"] == "cache-aware"
    assert fewer == len(steps)
    ca = [a for a, _ in steps if a.metrics["router"] == "cache-aware"]
    if options:
        assert any(r.metrics.get("router_event", 0) > 0 for r in ca)  # the event index routed
