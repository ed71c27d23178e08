"""``bench peers``' cluster overhead (case ``l``): the cluster's CPU per request against one
instance's at the same per-instance load (issue 28: within 1.5x; a single instance is a cluster
of one, so the N-instance path should cost little more per request than one server).

Both runs are radixbench alone, each in a child process, on the first :data:`REQUESTS` lines
of the Mooncake trace at page 16 with the configuration of the other cases: the cluster is 8
instances behind ``round-robin`` (case (c)); the one instance gets what round-robin hands
instance 0 — every 8th request, ``0, 8, 16, ...``, at its own timestamp — so it sees the same
arrival rate and the same kind of requests as each cluster instance. The figure is the
simulation's CPU s (the interleaved run, not start-up or the report) per request, the median
of ``reps`` alternating runs; the ratio is cluster over one instance.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from radixbench.bench.peers import _RADIXBENCH, TRACE, Case, _child, radixbench_args

__all__ = ["REQUESTS", "TARGET", "ClusterOverhead", "overhead_text", "run_overhead"]

REQUESTS = 1000
INSTANCES = 8
#: The issue's target: the cluster's CPU per request at most this many times one instance's.
TARGET = 1.5


@dataclass(frozen=True)
class ClusterOverhead:
    """Simulation CPU s per request: ``cluster`` (8 instances), ``single`` (one instance on
    every 8th request), and the request counts each ran."""

    cluster: float
    single: float
    cluster_requests: int
    single_requests: int

    @property
    def ratio(self) -> float:
        return self.cluster / self.single


def _slices(work: Path, requests: int) -> tuple[Path, Path]:
    """The first ``requests`` trace lines, and every 8th of them, as files in ``work``."""
    with TRACE.open(encoding="utf-8") as src:
        lines = [line for _, line in zip(range(requests), src)]
    all_, every = work / "cluster_all.jsonl", work / "cluster_every8.jsonl"
    all_.write_text("".join(lines))
    every.write_text("".join(lines[::INSTANCES]))
    return all_, every


def _sim_cpu(words: list[str], work: Path) -> float:
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        doc, _, _ = _child([sys.executable, "-c", _RADIXBENCH, tmp, *words], None)
    return float(doc["sim_cpu_s"])


def run_overhead(work: Path, reps: int = 1, requests: int = REQUESTS) -> ClusterOverhead:
    """``reps`` alternating runs of the cluster and the one instance (module docstring).
    Raises ``RuntimeError`` (one line) if a run fails."""
    all_, every = _slices(work, requests)
    case = Case("l", "cluster overhead", None, INSTANCES, 16, "round_robin", ("round-robin",))
    cluster = [*radixbench_args(case, "round-robin", None), "--trace", str(all_)]
    single = [*radixbench_args(case, None, None), "--trace", str(every)]
    c_runs, s_runs = [], []
    for _ in range(reps):
        c_runs.append(_sim_cpu(cluster, work))
        s_runs.append(_sim_cpu(single, work))
    n_single = len(range(0, requests, INSTANCES))
    mid = (reps - 1) // 2
    return ClusterOverhead(
        sorted(c_runs)[mid] / requests, sorted(s_runs)[mid] / n_single, requests, n_single
    )


def overhead_text(o: ClusterOverhead) -> str:
    """The case's block of ``bench peers``' output."""
    status = "met" if o.ratio <= TARGET else "NOT met"
    return "\n".join(
        [
            f"(l) cluster overhead: simulation CPU per request, first {o.cluster_requests:,} "
            "requests, page 16",
            f"  {INSTANCES} instances, round-robin: {o.cluster * 1e3:.2f} ms per request",
            f"  1 instance, every {INSTANCES}th request ({o.single_requests:,}): "
            f"{o.single * 1e3:.2f} ms per request",
            f"  target (l) cluster <= {TARGET:g}x one instance at the same per-instance load: "
            f"{o.ratio:.2f}x, {status}",
        ]
    )
