"""``radixbench compare``: one scenario, several algorithm variants, one report.

workloads (trace) -> sim (one run per variant, same schedule) -> equivalence check -> reports.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from radixbench.harness.config.impl import implementations
from radixbench.harness.config.scenario import Scenario
from radixbench.harness.experiments.equivalence import check_equivalence
from radixbench.harness.experiments.rundir import AtomicRunDir, environment
from radixbench.reports import write_report
from radixbench.sim.belady import belady_bound
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.run import VariantSim, resolve_device, run_interleaved
from radixbench.workloads.ceiling import hit_ceiling
from radixbench.workloads.sources import load_workload
from radixbench.workloads.trace import TraceError, TraceRequest, check_bad_line_policy


@dataclass(frozen=True)
class CompareSpec:
    """What to compare: a validated ``scenario`` (workload, arrivals, sim config, variants,
    seed). ``on_bad_line``: "error" stops at a malformed trace line, "skip" leaves it out and
    counts it (None = the scenario's setting); ``device``: auto | cpu | cuda; ``out``: parent
    folder of run folders; ``baseline``: axis (evictor / matcher / flatten) -> the value the
    verdicts compare against (None or an axis left out: the first variant listed). Raises
    ``ValueError`` on an invalid policy or variant list."""

    scenario: Scenario
    device: str = "auto"
    out: Path = Path("runs")
    on_bad_line: str | None = None
    baseline: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.on_bad_line is not None:
            check_bad_line_policy(self.on_bad_line)
        if not self.variants:
            raise ValueError("at least one variant is needed")
        if len({v.name for v in self.variants}) != len(self.variants):
            raise ValueError("variants repeat")

    @property
    def variants(self) -> tuple[Variant, ...]:
        return self.scenario.variants

    @property
    def sim(self) -> SimConfig:
        return self.scenario.sim


@dataclass(frozen=True)
class CompareOutcome:
    run_dir: Path
    report: dict[str, Any]
    equivalence: dict[str, Any]
    wall_s: float
    meta: dict[str, Any] = field(default_factory=dict)
    metrics: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass(frozen=True)
class Workload:
    """The requests to simulate (first arrival at 0 s), the malformed lines skipped while
    loading them, and a one-line label of where they came from."""

    requests: list[TraceRequest]
    skipped: list[TraceError]
    label: str


def load_requests(spec: CompareSpec) -> Workload:
    """Load or generate ``spec``'s requests (deterministic for a given seed).

    Raises ``ValueError`` (an empty selection, bad parameters) or :class:`TraceError`
    (file:line of a malformed line, unless bad lines are skipped).
    """
    skipped: list[TraceError] = []
    sc = spec.scenario
    requests = load_workload(
        sc.kind,
        sc.workload,
        sc.arrivals,
        np.random.default_rng(sc.seed),
        on_bad_line=spec.on_bad_line or sc.on_bad_line,
        skipped=skipped,
        base_dir=sc.base_dir,
    )
    return Workload(requests, skipped, f"{sc.name}: {sc.description}")


def check_fits(requests: list[TraceRequest], sim: SimConfig) -> None:
    """Raise ``ValueError`` (one line naming ``--kv-capacity``) when the scheduler would reject
    every request: it rejects one whose input + output tokens reach the KV pool (whole pages)
    or ``max_context_len_tokens`` (``_get_new_batch_prefill`` in :mod:`radixbench.sim.scheduler`,
    after sglang 0.5.23), so such a run would measure nothing."""
    if not requests:
        return
    pool = sim.kv_capacity_tokens // sim.page_size * sim.page_size
    cap = min(pool, sim.max_context_len_tokens)
    need = min(r.input_length + r.output_length for r in requests)
    if need < cap:
        return
    if pool <= sim.max_context_len_tokens:
        raise ValueError(
            f"--kv-capacity {sim.kv_capacity_tokens} (kv_capacity_tokens): every request would be "
            f"rejected: the smallest needs {need} KV slots (input + output tokens) and must fit "
            f"in the pool; use --kv-capacity {(need // sim.page_size + 1) * sim.page_size} or more"
        )
    raise ValueError(
        f"max_context_len_tokens {sim.max_context_len_tokens}: every request would be rejected: "
        f"the smallest needs {need} tokens (input + output)"
    )


def served_ceiling(trace: list[TraceRequest], requests: pd.DataFrame) -> dict[str, Any]:
    """Infinite-cache hit-rate ceiling (:func:`hit_ceiling`) over the requests the first
    variant finished, as if the rejected ones never arrived, so it covers the same requests as
    the achieved hit rate (over finished requests); plus ``requests`` (covered) and
    ``rejected`` (left out) counts."""
    first = requests["variant"].iloc[0] if len(requests) else None
    mine = requests[(requests["variant"] == first) & (requests["status"] == "finished")]
    done = set(mine["rid"].tolist())
    served = [r for r in trace if r.rid in done]
    return {**hit_ceiling(served), "requests": len(served), "rejected": len(trace) - len(served)}


def served_belady(
    trace: list[TraceRequest], requests: pd.DataFrame, sim: SimConfig
) -> dict[str, Any]:
    """Belady's bound (:func:`radixbench.sim.belady.belady_bound`: optimal offline eviction,
    requests one at a time with the whole KV pool as cache) at the run's KV capacity and page
    size, over the same finished requests as :func:`served_ceiling`."""
    first = requests["variant"].iloc[0] if len(requests) else None
    mine = requests[(requests["variant"] == first) & (requests["status"] == "finished")]
    done = set(mine["rid"].tolist())
    served = [r for r in trace if r.rid in done]
    return belady_bound(served, sim.kv_capacity_tokens, sim.page_size)


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(x) for x in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def run_compare(
    spec: CompareSpec,
    progress: bool | None = None,
    run_name: str | None = None,
    extra_meta: dict[str, Any] | None = None,
    full_report: bool = True,
) -> CompareOutcome:
    """Run every variant of ``spec`` and write the report into a new run folder (atomically).

    ``progress``: show a progress bar (None = only on a terminal). ``run_name``: the run
    folder's name (default: a timestamp); ``extra_meta``: added to ``config.json`` and the
    report's meta; ``full_report=False`` writes the tables and summaries only (no plots, no
    ``report.md`` / ``report.html``: ``write_report(render=False)``), as sweep cells do.
    Raises ``ValueError`` / ``TraceError`` on bad input before anything is written.
    """
    started = time.perf_counter()
    device = resolve_device(spec.device)
    # One intra-op thread: small-tensor ops timed with perf_counter_ns otherwise stall on
    # thread hand-offs whenever another process competes for the cores.
    torch.set_num_threads(1)
    workload = load_requests(spec)
    trace = workload.requests
    check_fits(trace, spec.sim)
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
    ceiling = served_ceiling(trace, requests)
    belady = served_belady(trace, requests, spec.sim)
    meta = {
        "scenario": workload.label,
        "requests": len(trace),
        "skipped_lines": len(workload.skipped),
        "skipped_line_errors": [str(e) for e in workload.skipped[:5]],
        "hit_rate_ceiling": ceiling,
        "hit_rate_belady": belady,
        "seed": spec.sim.seed,
        "device": str(device),
        "clock": spec.sim.clock,
        "sched_policy": spec.sim.sched_policy,
        "kv_capacity_tokens": spec.sim.kv_capacity_tokens,
        "page_size": spec.sim.page_size,
        "cost_model": getattr(spec.sim.cost, "name", type(spec.sim.cost).__name__),
        "implementations": implementations(spec.variants, [s.cache for s in sims]),
        "events": {r.variant: r.events for r in results},
        "torch_threads": torch.get_num_threads(),
        "sim_end_s": {r.variant: r.sim_end_s for r in results},
        "spec": _jsonable(spec),
        "environment": environment(),
        **(extra_meta or {}),
    }
    with AtomicRunDir(spec.out, run_name) as run:
        meta["wall_s"] = round(time.perf_counter() - started, 2)
        (run.tmp / "config.json").write_text(json.dumps(meta, indent=2, default=str))
        report = write_report(
            run.tmp,
            requests,
            ops,
            meta,
            equivalence,
            timeseries=timeseries,
            metrics=metrics,
            render=full_report,
            baseline=spec.baseline,
            progress=progress,
        )
    assert run.final is not None
    return CompareOutcome(
        run.final, report, equivalence, time.perf_counter() - started, meta, metrics
    )
