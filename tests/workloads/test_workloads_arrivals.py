"""Tests for arrival processes, time/rate scaling and selection."""

from __future__ import annotations

import numpy as np
import pytest

from radixbench.workloads.arrivals import Arrivals, apply_arrivals, select
from radixbench.workloads.tokens import HashBlocks
from radixbench.workloads.trace import TraceRequest


def reqs(n: int, gap: float = 1.0) -> list[TraceRequest]:
    return [TraceRequest(i, 5.0 + i * gap, 4, 1, HashBlocks((i,), 4)) for i in range(n)]


def gaps(a: Arrivals, n: int = 20000, seed: int = 0) -> np.ndarray:
    out = apply_arrivals(reqs(n), a, np.random.default_rng(seed))
    return np.diff([r.arrival_s for r in out])


def test_trace_times_shift_and_scale() -> None:
    out = apply_arrivals(
        reqs(3), Arrivals(time_scale=3.0, rate_scale=2.0), np.random.default_rng(0)
    )
    assert [r.arrival_s for r in out] == pytest.approx([0.0, 1.5, 3.0])
    assert [r.rid for r in out] == [0, 1, 2]


@pytest.mark.parametrize(("process", "cv"), [("poisson", 1.0), ("gamma", 3.0), ("gamma", 0.5)])
def test_drawn_processes_have_the_requested_rate_and_cv(process: str, cv: float) -> None:
    g = gaps(Arrivals(process=process, rate=4.0, cv=cv))
    assert g.mean() == pytest.approx(0.25, rel=0.05)
    assert g.std() / g.mean() == pytest.approx(cv, rel=0.1)


def test_constant_and_determinism() -> None:
    assert np.allclose(gaps(Arrivals(process="constant", rate=2.0), 10), 0.5)
    a = Arrivals(process="poisson", rate=1.0)
    assert np.array_equal(gaps(a, 50, 7), gaps(a, 50, 7))
    assert not np.array_equal(gaps(a, 50, 7), gaps(a, 50, 8))


def test_select_by_count_and_window() -> None:
    r = reqs(10)  # arrivals 5..14 s
    assert [x.rid for x in select(r, Arrivals(max_requests=3))] == [0, 1, 2]
    assert [x.rid for x in select(r, Arrivals(start_s=7.0, window_s=2.0))] == [2, 3]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"process": "uniform"}, "unknown process"),
        ({"process": "poisson"}, "needs a rate"),
        ({"rate": 2.0}, "rate is set"),
        ({"process": "gamma", "rate": 1.0, "cv": 0.0}, "cv"),
        ({"time_scale": -1.0}, "time_scale"),
        ({"rate_scale": float("inf")}, "rate_scale"),
        ({"window_s": 0.0}, "window_s"),
        ({"max_requests": 0}, "max_requests"),
        ({"start_s": -1.0}, "start_s"),
    ],
)
def test_invalid_arrivals(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        Arrivals(**kwargs)
