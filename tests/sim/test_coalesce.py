"""Decode runs (``Scheduler.coalesce``: several decode steps in one simpy event) change nothing
but the event count: every bundled scenario, sliced small, run step by step and in runs under
the isolated clock gives bit-identical request tables, step tables and op tables (the measured
``ns`` / ``measured_cpu_s`` aside), for one server and for a cluster behind each router."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pandas as pd
import pytest
import torch

from radixbench.cluster.run import ClusterSim
from radixbench.harness.config.scenario import bundled_scenarios, load_scenario
from radixbench.harness.experiments.workload import load_requests
from radixbench.sim.clock import SimEnvironment
from radixbench.sim.run import VariantResult, VariantSim

CPU = torch.device("cpu")
REQUESTS = 50
#: Scenarios whose requests are long enough that fewer show the same (seconds, not minutes).
FEWER = {"long-context": 12}
MEASURED = {"ns", "measured_cpu_s"}


def _runs(name: str, coalesce: bool) -> list[tuple[VariantResult, int]]:
    sc = load_scenario(name, {"arrivals.max_requests": FEWER.get(name, REQUESTS)})
    trace = load_requests(sc, None).requests
    cfg = dataclasses.replace(sc.sim, clock="isolated")
    variant = sc.variants[0]
    sims: list[Any]
    if sc.cluster is None:
        sims = [VariantSim(trace, cfg, variant, CPU, coalesce=coalesce)]
    else:
        by_router = {dict(v.extra)["router"]: v for v in reversed(sc.variants)}
        sims = [
            ClusterSim(trace, cfg, v, CPU, sc.cluster, coalesce=coalesce)
            for v in by_router.values()
        ]
    out = []
    for sim in sims:
        while sim.step(1 << 30):
            pass
        out.append((sim.result(), sim.events))
    return out


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    cols = [c for c in a.columns if c not in MEASURED]
    pd.testing.assert_frame_equal(a[cols], b[cols], check_exact=True)


@pytest.mark.parametrize("name", sorted(bundled_scenarios()))
def test_decode_runs_give_the_step_by_step_results(name: str) -> None:
    steps = _runs(name, coalesce=False)
    runs = _runs(name, coalesce=True)
    for (a, events_a), (b, events_b) in zip(steps, runs, strict=True):
        _same(a.requests, b.requests)
        _same(a.timeseries, b.timeseries)
        _same(a.ops, b.ops)
        assert a.sim_end_s == b.sim_end_s
        assert events_b <= events_a
        for stem in a.tables:
            _same(a.tables[stem], b.tables[stem])


def test_decode_runs_take_fewer_events_on_the_mooncake_trace() -> None:
    """Not vacuous: on the Mooncake slice most decode steps run inside a run."""
    ((a, events_a),) = _runs("mooncake-conversation", coalesce=False)
    ((b, events_b),) = _runs("mooncake-conversation", coalesce=True)
    assert events_b < events_a / 2
    assert len(b.timeseries) == len(a.timeseries)


def test_timeout_at_lands_where_no_relative_delay_can() -> None:
    env = SimEnvironment()
    now, t = 0.7972708557601245, 3.795968790610672
    assert all(now + d != t for d in _near(t - now))
    seen: list[float] = []

    def proc() -> Any:
        yield env.timeout(now)
        yield env.timeout_at(t)
        seen.append(env.now)

    env.process(proc())
    env.run()
    assert seen == [t]
    with pytest.raises(ValueError, match="before now"):
        env.timeout_at(t - 1)


def _near(d: float) -> list[float]:
    out = [d]
    for toward in (math.inf, -math.inf):
        x = d
        for _ in range(8):
            x = math.nextafter(x, toward)
            out.append(x)
    return out
