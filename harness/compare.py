"""``radixbench compare``: one scenario, several algorithm variants, one report.

workloads (trace) -> sim (one run per variant, same schedule) -> equivalence check -> reports.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm import tqdm

from radixbench.harness.equivalence import check_equivalence
from radixbench.harness.runinfo import AtomicRunDir, environment
from radixbench.reports import write_report
from radixbench.reports.tables import write_table
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.run import VariantSim, resolve_device, run_interleaved
from radixbench.workloads.trace import TraceRequest, load_mooncake


@dataclass(frozen=True)
class CompareSpec:
    """What to compare. ``trace``: Mooncake JSONL path (None = the bundled conversation trace);
    ``max_requests`` / ``window_s`` / ``start_s``: selection (s); ``time_scale``: arrival times
    are multiplied by it (2.0 = half the request rate); ``out``: parent folder of run folders."""

    trace: Path | None = None
    max_requests: int | None = 1000
    window_s: float | None = None
    start_s: float = 0.0
    time_scale: float = 1.0
    variants: tuple[Variant, ...] = (
        Variant("heapify", "linear"),
        Variant("heapify", "galloping"),
        Variant("persistent-heap", "linear"),
        Variant("persistent-heap", "galloping"),
    )
    sim: SimConfig = field(default_factory=SimConfig)
    device: str = "auto"
    out: Path = Path("runs")

    def __post_init__(self) -> None:
        if not self.variants:
            raise ValueError("at least one variant is needed")
        if len({v.name for v in self.variants}) != len(self.variants):
            raise ValueError("variants repeat")
        if not self.time_scale > 0:
            raise ValueError(f"time scale must be > 0, got {self.time_scale}")


@dataclass(frozen=True)
class CompareOutcome:
    run_dir: Path
    report: dict[str, Any]
    equivalence: dict[str, Any]
    wall_s: float
    metrics: pd.DataFrame = field(default_factory=pd.DataFrame)


def load_trace(spec: CompareSpec) -> list[TraceRequest]:
    """The selected trace requests, arrival times scaled by ``spec.time_scale``."""
    trace = load_mooncake(
        spec.trace, max_requests=spec.max_requests, window_s=spec.window_s, start_s=spec.start_s
    )
    if not trace:
        raise ValueError("the selection contains no request")
    t0 = trace[0].arrival_s
    return [dataclasses.replace(t, arrival_s=(t.arrival_s - t0) * spec.time_scale) for t in trace]


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(x) for x in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def run_compare(spec: CompareSpec, progress: bool | None = None) -> CompareOutcome:
    """Run every variant of ``spec`` and write the report into a new run folder (atomically).

    ``progress``: show a progress bar (None = only on a terminal). Raises ``ValueError`` /
    ``TraceError`` on bad input before anything is written.
    """
    started = time.perf_counter()
    device = resolve_device(spec.device)
    # One intra-op thread: small-tensor ops timed with perf_counter_ns otherwise stall on
    # thread hand-offs whenever another process competes for the cores.
    torch.set_num_threads(1)
    trace = load_trace(spec)
    with tqdm(
        total=len(trace) * len(spec.variants),
        unit="req",
        disable=None if progress is None else not progress,
        desc="compare",
    ) as bar:
        sims = [
            VariantSim(trace, spec.sim, v, device, lambda: bar.update(1)) for v in spec.variants
        ]
        results = run_interleaved(sims)
    requests = pd.concat([r.requests for r in results], ignore_index=True)
    ops = pd.concat([r.ops for r in results], ignore_index=True)
    timeseries = pd.concat([r.timeseries for r in results], ignore_index=True)
    metrics = pd.DataFrame([r.metrics for r in results])
    equivalence = check_equivalence(requests)
    meta = {
        "scenario": f"mooncake conversation trace ({spec.trace or 'bundled'})",
        "requests": len(trace),
        "seed": spec.sim.seed,
        "device": str(device),
        "clock": spec.sim.clock,
        "sched_policy": spec.sim.sched_policy,
        "kv_capacity_tokens": spec.sim.kv_capacity_tokens,
        "cost_model": getattr(spec.sim.cost, "name", type(spec.sim.cost).__name__),
        "events": {r.variant: r.events for r in results},
        "torch_threads": torch.get_num_threads(),
        "sim_end_s": {r.variant: r.sim_end_s for r in results},
        "spec": _jsonable(spec),
        "environment": environment(),
    }
    with AtomicRunDir(spec.out) as run:
        meta["wall_s"] = round(time.perf_counter() - started, 2)
        (run.tmp / "config.json").write_text(json.dumps(meta, indent=2, default=str))
        report = write_report(run.tmp, requests, ops, meta, equivalence)
        write_table(timeseries, run.tmp, "timeseries")
        write_table(metrics, run.tmp, "metrics")
    assert run.final is not None
    return CompareOutcome(run.final, report, equivalence, time.perf_counter() - started, metrics)


def parse_variants(
    evictors: Sequence[str], matchers: Sequence[str], flattens: Sequence[str]
) -> tuple[Variant, ...]:
    """The cartesian product evictor x matcher x flatten, validated (``ValueError``)."""
    return tuple(Variant(e, m, f) for e in evictors for m in matchers for f in flattens)
