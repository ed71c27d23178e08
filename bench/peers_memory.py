"""``bench peers``' memory slope (case ``m``): radixbench's peak RSS against the instance count
on one trace (issue 28: the whole trace on 8 instances within 1 GB, growing linearly).

The runs are ``radixbench compare mooncake-cluster`` with the ``cache-aware`` router, page 16
and the configuration of the other cases (one instance: ``compare mooncake-conversation``, the
same server loop without a router), one per instance count (:data:`INSTANCES`), each in
a fresh child process (its ``ru_maxrss``). :func:`fit` gives the least-squares line through
the points (MB per instance, the intercept: what one process holds whatever the instances)
and how far the points lie from it, so "linear" is a figure, not a claim.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from radixbench.bench.peers import _RADIXBENCH, Case, _child, radixbench_args

__all__ = ["INSTANCES", "MemoryPoint", "fit", "memory_text", "run_memory"]

#: The instance counts of the slope.
INSTANCES = (1, 2, 4, 8)
ROUTER = "cache-aware"


@dataclass(frozen=True)
class MemoryPoint:
    """One run: ``instances``, peak RSS (MB), CPU s and wall s of the whole process."""

    instances: int
    rss_mb: float
    cpu_s: float
    wall_s: float


def run_memory(
    work: Path, requests: int | None = None, instances: tuple[int, ...] = INSTANCES
) -> list[MemoryPoint]:
    """One radixbench run per count of ``instances`` on the first ``requests`` of the trace
    (None: all of it), each in its own child process. Raises ``RuntimeError`` (one line) if a
    run fails."""
    points = []
    for n in instances:
        case = Case("m", "memory", requests, n, 16, "kv_router", (ROUTER,))
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            # one instance: the one-server command (compare refuses a router with nothing
            # to choose from); the same server loop
            words = radixbench_args(case, ROUTER if n > 1 else None, requests)
            doc, cpu, wall = _child([sys.executable, "-c", _RADIXBENCH, tmp, *words], None)
        points.append(MemoryPoint(n, float(doc["rss_mb"]), cpu, wall))
    return points


def fit(points: list[MemoryPoint]) -> tuple[float, float, float]:
    """``(slope MB per instance, intercept MB, largest |residual| MB)`` of the least-squares
    line of peak RSS on instances. Raises ``ValueError`` with fewer than two counts."""
    xs = np.array([float(p.instances) for p in points])
    ys = np.array([p.rss_mb for p in points])
    if len(set(xs.tolist())) < 2:
        raise ValueError("a slope needs runs at two instance counts or more")
    slope, icept = (float(c) for c in np.polyfit(xs, ys, 1))
    worst = float(np.abs(ys - (icept + slope * xs)).max())
    return slope, icept, worst


def memory_text(points: list[MemoryPoint], requests: int | None, target_mb: float = 1024) -> str:
    """The slope's block of ``bench peers``' output: one row per instance count, the fitted
    line, and the 1 GB target at the largest count."""
    what = "the whole trace" if requests is None else f"the first {requests:,} requests"
    lines = [
        f"(m) memory: peak RSS vs instances, {what}, page 16, radixbench {ROUTER}",
        f"{'instances':>9} {'peak RSS MB':>11} {'CPU s':>8} {'wall s':>8}",
    ]
    lines += [
        f"{p.instances:>9} {p.rss_mb:>11,.0f} {p.cpu_s:>8.1f} {p.wall_s:>8.1f}" for p in points
    ]
    if len({p.instances for p in points}) >= 2:
        slope, icept, worst = fit(points)
        lines.append(
            f"slope {slope:,.1f} MB per instance, intercept {icept:,.0f} MB (the process "
            f"before any instance), largest distance from the line {worst:,.1f} MB"
        )
    top = max(points, key=lambda p: p.instances)
    status = "MET" if top.rss_mb <= target_mb else "NOT MET"
    lines.append(
        f"target: {top.instances} instances within {target_mb:,.0f} MB peak RSS: {status} "
        f"({top.rss_mb:,.0f} MB)"
    )
    return "\n".join(lines)
