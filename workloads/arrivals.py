"""Arrival processes, trace time/rate scaling and request selection.

:class:`Arrivals` (frozen, validated) says how arrival times are made: ``"trace"`` keeps the
trace's own timestamps; ``"poisson"`` (exponential gaps of mean ``1 / rate``), ``"gamma"``
(gamma gaps of mean ``1 / rate`` and coefficient of variation ``cv``: shape ``1 / cv**2``;
``cv > 1`` is burstier than Poisson) and ``"constant"`` (gaps ``1 / rate``) draw new ones from
the scenario's seeded numpy Generator; ``"stages"`` is a Poisson process whose rate steps through
``stages`` (``(rate, duration_s)`` pairs, e.g. a QPS ramp): in each stage a Poisson number of
arrivals (mean ``rate x duration``) uniform over the stage, so the requests given are cut to
the arrivals drawn. Then times are shifted so the first selected request
arrives at 0 s and multiplied by ``time_scale / rate_scale``. Selection (``max_requests``,
``window_s``, ``start_s``) uses the times *before* scaling; for traces the loaders apply it while
streaming the file.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from radixbench.workloads.trace import TraceRequest

__all__ = ["PROCESSES", "Arrivals", "apply_arrivals", "select"]

PROCESSES = ("trace", "poisson", "gamma", "constant", "stages")


@dataclass(frozen=True)
class Arrivals:
    """Arrival process (``process``, ``rate`` in requests/s, gamma ``cv``), scaling of the times
    (``time_scale``: 2 = twice as spread out; ``rate_scale``: 2 = twice the request rate) and
    selection (first ``max_requests``; window ``[start_s, start_s + window_s)`` in seconds)."""

    process: str = "trace"
    rate: float | None = None
    cv: float = 1.0
    time_scale: float = 1.0
    rate_scale: float = 1.0
    max_requests: int | None = None
    window_s: float | None = None
    start_s: float = 0.0
    stages: tuple[tuple[float, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.process not in PROCESSES:
            raise ValueError(f"unknown process {self.process!r}; known: {', '.join(PROCESSES)}")
        if (self.process == "stages") != bool(self.stages):
            raise ValueError("stages are given with process 'stages', and only then")
        for stage in self.stages:
            if len(stage) != 2 or not all(math.isfinite(x) and x > 0 for x in stage):
                raise ValueError(f"stages: each is [rate > 0, duration_s > 0], got {list(stage)}")
        if self.process == "trace" or self.process == "stages":
            if self.rate is not None:
                raise ValueError(f"rate is set but process is {self.process!r} (use rate_scale)")
        elif self.rate is None:
            raise ValueError(f"process {self.process!r} needs a rate (requests/s)")
        for name in ("rate", "cv", "time_scale", "rate_scale", "window_s"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v}")
        if self.max_requests is not None and self.max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {self.max_requests}")
        if not (math.isfinite(self.start_s) and self.start_s >= 0):
            raise ValueError(f"start_s must be >= 0 seconds, got {self.start_s}")


def _gaps(a: Arrivals, n: int, rng: np.random.Generator) -> np.ndarray:
    assert a.rate is not None
    mean = 1.0 / a.rate
    if a.process == "poisson":
        return rng.exponential(mean, size=n)
    if a.process == "gamma":
        shape = 1.0 / a.cv**2
        return rng.gamma(shape, mean / shape, size=n)
    return np.full(n, mean)


def _stage_times(stages: tuple[tuple[float, ...], ...], rng: np.random.Generator) -> np.ndarray:
    """Arrival times (s) of a Poisson process whose rate steps through ``stages``."""
    out, start = [], 0.0
    for rate, duration in stages:
        n = int(rng.poisson(rate * duration))
        out.append(np.sort(rng.uniform(start, start + duration, n)))
        start += duration
    return np.concatenate(out) if out else np.empty(0)


def select(requests: Sequence[TraceRequest], a: Arrivals) -> list[TraceRequest]:
    """Requests with ``start_s <= arrival_s < start_s + window_s``, at most ``max_requests``."""
    end = math.inf if a.window_s is None else a.start_s + a.window_s
    out = [r for r in requests if a.start_s <= r.arrival_s < end]
    return out if a.max_requests is None else out[: a.max_requests]


def apply_arrivals(
    requests: Sequence[TraceRequest], a: Arrivals, rng: np.random.Generator
) -> list[TraceRequest]:
    """Give ``requests`` (in order) their arrival times per ``a``; the first arrives at 0 s.

    With a drawn process the first gap is dropped (the first request arrives at 0) and the
    request order is kept. Returns new records; ``rid`` and prompts are unchanged.
    """
    if not requests:
        return []
    if a.process == "trace":
        times = np.array([r.arrival_s for r in requests], dtype=np.float64)
        times -= times[0]
    elif a.process == "stages":
        times = _stage_times(a.stages, rng)
        requests = requests[: times.size]
        times = times[: len(requests)]
        if times.size:
            times -= times[0]
    else:
        gaps = _gaps(a, len(requests), rng)
        gaps[0] = 0.0
        times = np.cumsum(gaps)
    times *= a.time_scale / a.rate_scale
    return [dataclasses.replace(r, arrival_s=float(t)) for r, t in zip(requests, times)]
