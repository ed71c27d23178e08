"""``radixbench compare``: one scenario, several algorithm variants, one report.

workloads (trace) -> sim (one run per variant, same schedule) -> equivalence check -> reports.
:class:`CompareSpec` says what to run; :func:`run_compare` runs it into a new run folder.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from radixbench.harness.config.impl import implementations
from radixbench.harness.config.scenario import Scenario
from radixbench.harness.experiments.equivalence import check_equivalence, exemption
from radixbench.harness.experiments.progress import progress as progress_display
from radixbench.harness.experiments.rundir import AtomicRunDir, environment
from radixbench.harness.experiments.workload import (
    check_fits,
    load_requests,
    served_belady,
    served_ceiling,
)
from radixbench.reports.axes import AXES, REPLICA, VariantSet
from radixbench.reports.parted import as_frame
from radixbench.reports.pipeline import write_report
from radixbench.reports.record import RunMeta, write_meta
from radixbench.reports.routing_report import write_routing_report
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.heap import trim_heap
from radixbench.sim.kv_event_log import KVEventLog
from radixbench.sim.parted import PartedTable
from radixbench.sim.run import VariantResult, VariantSim, resolve_device, run_interleaved
from radixbench.workloads.trace import check_bad_line_policy


@dataclass(frozen=True)
class CompareSpec:
    """What to compare: a validated ``scenario`` (workload, arrivals, sim config, variants,
    seed). ``on_bad_line``: "error" stops at a malformed trace line, "skip" leaves it out and
    counts it (None = the scenario's setting); ``device``: auto | cpu | cuda; ``out``: parent
    folder of run folders; ``baseline``: axis (evictor / matcher / flatten / impl) -> the value
    the verdicts compare against (None or an axis left out: the first variant listed);
    ``aa``: also run an A/A replica of the baseline variant (:func:`aa_replica`), interleaved
    like the others, whose verdicts against the baseline are the noise floor every other
    verdict must clear (a run of one variant has no verdicts and gets none);
    ``expect_divergence``: differing prefix hits are a behaviour change the user expects (a
    policy patch), reported as such, not a failure; ``command_line``: the words that reproduce
    the run (recorded). ``kv_events``: write every variant's KV events to this file
    (``sim.kv_event_log``; the caches emit them, as a cluster's do). A scenario with a
    ``cluster`` runs each variant as N instances behind its router
    (``radixbench.cluster.run.ClusterSim``; no A/A replica: routers are compared on requests).
    Raises ``ValueError`` on an invalid policy or variant list."""

    scenario: Scenario
    device: str = "auto"
    out: Path = Path("runs")
    on_bad_line: str | None = None
    baseline: Mapping[str, str] | None = None
    aa: bool = True
    expect_divergence: bool = False
    command_line: tuple[str, ...] = ()
    kv_events: Path | None = None

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


def aa_replica(variants: tuple[Variant, ...], baseline: Mapping[str, str] | None) -> Variant:
    """A replica of the baseline variant — the one holding the resolved baseline value on
    every axis it has (``VariantSet.resolve_baseline``; the first listed when none does) — with
    the extra axis ``replica = 2``: run beside it, the A/A pair measures the noise floor."""
    records = {v.name: v.axes() for v in variants}
    vs = VariantSet(tuple(records), tuple(AXES), records)
    base = vs.resolve_baseline(baseline)
    chosen = next(
        (
            v
            for v in variants
            if all(x is None or base.get(a, x) == x for a, x in records[v.name].items())
        ),
        variants[0],
    )
    return dataclasses.replace(chosen, extra=(*chosen.extra, (REPLICA, "2")))


@dataclass(frozen=True)
class CompareOutcome:
    """``run_dir``: the run folder written; ``report``: what ``write_report`` returned;
    ``meta``: the run record saved as ``config.json``; ``wall_s``: the whole run's wall time
    (s), the report included; ``metrics``: the serving-metrics table."""

    run_dir: Path
    report: dict[str, Any]
    equivalence: dict[str, Any]
    wall_s: float
    meta: RunMeta = field(default_factory=RunMeta)
    metrics: pd.DataFrame = field(default_factory=pd.DataFrame)


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(x) for x in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _sim(
    trace: Any,
    spec: CompareSpec,
    variant: Variant,
    device: torch.device,
    done: Callable[[], Any],
    log: KVEventLog | None,
) -> Any:
    """The steppable simulation of one variant: N instances behind its router when the
    scenario has a cluster, else one server."""
    cluster = spec.scenario.cluster
    if cluster is None:
        return VariantSim(trace, spec.sim, variant, device, done, kv_event_log=log)
    from radixbench.cluster.run import ClusterSim

    return ClusterSim(trace, spec.sim, variant, device, cluster, done, kv_event_log=log)


def _extra(extra_meta: dict[str, Any] | None, cluster: Any, log: KVEventLog | None) -> dict:
    """The run record's ``extra``: the caller's, the cluster spec, the KV-event file."""
    out = {k: v for k, v in (extra_meta or {}).items() if k != "spec"}  # a field of its own
    if cluster is not None:
        out["cluster"] = _jsonable(cluster) | {"router_options": dict(cluster.router_options)}
    if log is not None:
        out["kv_events_file"] = str(log.path)
    return out


def _run_tables(
    results: Sequence[VariantResult], parts: bool
) -> tuple[pd.DataFrame | PartedTable, pd.DataFrame | PartedTable]:
    """The per-op and per-step tables of ``results``: with ``parts`` (a cluster: millions of
    rows on a whole trace behind N instances) kept in parts, the servers' logs, which the
    routing report reads as it needs them and writes chunk by chunk, where the variants share
    their columns; else concatenated frames (one server's report draws its plots from
    them)."""
    if parts and len({tuple(r.op_table.columns) for r in results}) == 1:
        return (
            PartedTable.concat([r.op_table for r in results]),
            PartedTable.concat([r.step_table for r in results]),
        )
    return (
        pd.concat([r.ops for r in results], ignore_index=True),
        pd.concat([r.timeseries for r in results], ignore_index=True),
    )


def run_compare(
    spec: CompareSpec,
    progress: bool | None = None,
    run_name: str | None = None,
    extra_meta: dict[str, Any] | None = None,
    full_report: bool = True,
    on_answer: Callable[[CompareOutcome], None] | None = None,
) -> CompareOutcome:
    """Run every variant of ``spec`` and write the report into a new run folder (atomically).

    ``progress``: show a progress bar (None: a bar on a terminal, a line every 10 s in a
    log). ``run_name``: the run folder's name (default: a timestamp); ``extra_meta``: added
    to ``config.json`` and the report's meta (its ``spec``, e.g. ``profile``'s spec before
    staging, replaces the run's); ``full_report=False`` writes the tables and summaries only
    (no plots, no ``report.md`` / ``report.html``: ``write_report(render=False)``), as sweep
    cells do.
    ``on_answer``: called (one server) once the tables are written, before the plots are
    drawn, with the outcome so far (``run_dir``: the folder being written, ``wall_s``: so
    far; the report without plots): what a command prints comes before the plots.
    Raises ``ValueError`` / ``TraceError`` on bad input before anything is written.
    """
    started = time.perf_counter()
    device = resolve_device(spec.device)
    # One intra-op thread: small-tensor ops timed with perf_counter_ns otherwise stall on
    # thread hand-offs whenever another process competes for the cores.
    torch.set_num_threads(1)
    workload = load_requests(spec.scenario, spec.on_bad_line)
    trace = workload.requests
    check_fits(trace, spec.sim)
    # the A/A replica floors the verdicts: only where there is something to compare
    cluster = spec.scenario.cluster
    if cluster is not None and trace:
        cluster.check_run(max(r.arrival_s for r in trace))  # unhealthy windows within the run
    aa = spec.aa and len(spec.variants) > 1 and cluster is None
    variants = spec.variants + ((aa_replica(spec.variants, spec.baseline),) if aa else ())
    log = KVEventLog(spec.kv_events) if spec.kv_events is not None else None
    try:
        with progress_display(len(trace) * len(variants), "compare", "req", progress) as bar:
            sims = [_sim(trace, spec, v, device, lambda: bar.update(1), log) for v in variants]
            results = run_interleaved(sims, seed=spec.sim.seed)
    except BaseException:
        if log is not None:
            log.abort()
        raise
    impls = implementations(variants, [s.cache for s in sims])
    load = (
        pd.concat([s.load_frame() for s in sims], ignore_index=True)
        if cluster is not None
        else None
    )
    del sims  # the runs' state (trees, routers, servers): the tables hold only their logs
    gc.collect()
    trim_heap()
    requests = pd.concat([r.requests for r in results], ignore_index=True)
    ops, timeseries = _run_tables(results, parts=cluster is not None)
    metrics = pd.DataFrame([r.metrics for r in results])
    stems = list(dict.fromkeys(stem for r in results for stem in r.tables))
    tables = {
        stem: pd.concat([r.tables[stem] for r in results if stem in r.tables], ignore_index=True)
        for stem in stems
    }
    equivalence = check_equivalence(requests, exemption(spec.sim.clock, cluster))
    ceiling = served_ceiling(trace, requests)
    belady = served_belady(trace, requests, spec.sim) if cluster is None else None
    sim = spec.sim
    meta = RunMeta(
        command="compare",
        scenario=workload.label,
        requests=len(trace),
        device=str(device),
        **sim.run_record(),  # seed, scheduler, pool and clock settings, cost model
        baseline=dict(spec.baseline) if spec.baseline else None,
        reference=spec.scenario.reference,
        reference_note=spec.scenario.reference_note,
        expect_divergence=spec.expect_divergence,
        variants=[{"name": v.name, **v.axes()} for v in variants],
        implementations=impls,
        hit_rate_ceiling=ceiling,
        hit_rate_belady=belady,
        skipped_lines=len(workload.skipped),
        skipped_line_errors=[str(e) for e in workload.skipped[:5]],
        events={r.variant: r.events for r in results},
        sim_end_s={r.variant: r.sim_end_s for r in results},
        torch_threads=torch.get_num_threads(),
        environment=environment(),
        spec=(extra_meta or {}).get("spec", _jsonable(spec)),
        command_line=list(spec.command_line),
        extra=_extra(extra_meta, cluster, log),
    )
    with AtomicRunDir(spec.out, run_name) as run:
        meta = meta.replace(wall_s=round(time.perf_counter() - started, 2))
        write_meta(run.tmp, meta)
        report: Mapping[str, Any]

        def answered(result: Mapping[str, Any]) -> None:
            wall = time.perf_counter() - started
            assert on_answer is not None
            on_answer(CompareOutcome(run.tmp, dict(result), equivalence, wall, meta, metrics))

        if cluster is None:
            report = write_report(
                run.tmp,
                requests,
                as_frame(ops),
                meta,
                equivalence,
                timeseries=as_frame(timeseries),
                metrics=metrics,
                tables=tables,
                render=full_report,
                baseline=spec.baseline,
                progress=progress,
                on_answer=None if on_answer is None else answered,
            )
        else:
            assert load is not None
            report = dict(
                write_routing_report(
                    run.tmp,
                    requests,
                    ops,
                    timeseries,
                    metrics,
                    load,
                    meta,
                    equivalence,
                    spec.baseline,
                    render=full_report,
                )
            )
    if log is not None:
        log.close()
    assert run.final is not None
    return CompareOutcome(
        run.final, dict(report), equivalence, time.perf_counter() - started, meta, metrics
    )
