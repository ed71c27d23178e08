"""Reports for radixbench runs: tables, summaries, plots and ``report.md``.

Input is the simulator's two tables (docs/CONTRACTS.md): the per-request table (times in s,
lengths in tokens) and the per-op table (wall time ``ns`` per call in nanoseconds).
:func:`write_report` validates both, stores them and their summaries as Parquet + CSV (Parquet
only for a table of more rows than a spreadsheet holds, ``reports.tables.CSV_MAX_ROWS``: the
ops log and timeseries of long runs), renders the latency plots and writes the Markdown report
into one run directory::

    run_dir/
      requests.{parquet,csv}  ops.{parquet,csv}
      summary_ops.{parquet,csv}  summary_variants.{parquet,csv}  speedups.{parquet,csv}
      verdicts.{parquet,csv}  [timeseries.{parquet,csv}]  [metrics.{parquet,csv}]
      plots/<name>.png [+ plots/<name>.svg with svg=True]  (latency CDFs, cost vs size, ...)
      report.md  report.html (self-contained: images embedded)

Every file is written atomically (temporary file in the same directory, then ``os.replace``).
Plots of large runs are drawn from summaries (CDF quantiles, thinned series and scatters, all
statistics computed on every row), so writing the report takes seconds whatever the run size;
they are drawn in parallel by forked processes (:mod:`~radixbench.reports.render`,
:mod:`~radixbench.reports.drawing`), which import matplotlib while the summaries and tables
are computed: this process does only when it draws them itself (one core, no ``fork``).

Modules: :mod:`~radixbench.reports.tables` (schemas, validation, storage),
:mod:`~radixbench.reports.summary` (statistics and speed-ups),
:mod:`~radixbench.reports.verdicts` (bootstrap CIs and verdicts),
:mod:`~radixbench.reports.plots` / :mod:`~radixbench.reports.plots_run` (PNG [+ SVG] figures),
:mod:`~radixbench.reports.runmeta` (run/environment block), :mod:`~radixbench.reports.markdown`
(``report.md``), :mod:`~radixbench.reports.html` (``report.html``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd
from tqdm import tqdm

from radixbench.reports.axes import VariantSet, references
from radixbench.reports.behaviour import behaviour_diff, behaviour_lines
from radixbench.reports.diagnostics import load_check
from radixbench.reports.drawing import Drawing
from radixbench.reports.headline import DIVERGED_CAVEAT, Answer, answer, withhold
from radixbench.reports.hicache import hicache_lines
from radixbench.reports.parted import TableParts, as_frame, read_rows
from radixbench.reports.pr_summary import summary_block
from radixbench.reports.record import RunMeta
from radixbench.reports.reference import reference_lines, reference_rows
from radixbench.reports.render import N_RENDER_STEPS, finish_render, start_plots
from radixbench.reports.summary import op_summary, speedups, variant_summary
from radixbench.reports.tables import (
    OP_COLUMNS,
    REQUEST_COLUMNS,
    TIMESERIES_COLUMNS,
    validate_frame,
    write_table,
)
from radixbench.reports.verdicts import verdict_table

__all__ = ["ReportResult", "write_report"]


class ReportResult(TypedDict):
    """What :func:`write_report` wrote and computed.

    ``report_md`` / ``report_html``: paths of ``report.md`` and the self-contained
    ``report.html`` (``None`` when not rendered); ``tables``: stem -> ``(parquet, csv)``
    paths (csv None: not written, more rows than a spreadsheet holds) for ``requests``,
    ``ops``, ``summary_ops``, ``summary_variants``, ``speedups``, ``verdicts`` (and
    ``timeseries`` / ``metrics`` when given); ``plots``: name -> PNG path (an SVG lies beside
    each when written with ``svg=True``); ``op_summary``, ``variant_summary``, ``speedups``,
    ``verdicts``: the summary frames (see :mod:`radixbench.reports.summary`,
    :mod:`radixbench.reports.verdicts`).
    """

    report_md: Path | None
    report_html: Path | None
    tables: dict[str, tuple[Path, Path | None]]
    plots: dict[str, Path]
    op_summary: pd.DataFrame
    variant_summary: pd.DataFrame
    speedups: pd.DataFrame
    verdicts: pd.DataFrame
    answer: Answer
    summary: list[str]


def write_report(
    run_dir: Path | str,
    requests: pd.DataFrame,
    ops: pd.DataFrame | TableParts,
    meta: RunMeta | Mapping[str, Any],
    equivalence: Mapping[str, Any],
    baseline: Mapping[str, str] | None = None,
    timeseries: pd.DataFrame | None = None,
    metrics: pd.DataFrame | None = None,
    *,
    tables: Mapping[str, pd.DataFrame] | None = None,
    n_resamples: int = 1000,
    render: bool = True,
    svg: bool = False,
    progress: bool | None = None,
    on_answer: Callable[[ReportResult], None] | None = None,
) -> ReportResult:
    """Validate, store, summarize, plot and report one run into ``run_dir``.

    ``requests`` and ``ops`` must follow :data:`~radixbench.reports.tables.REQUEST_COLUMNS` and
    :data:`~radixbench.reports.tables.OP_COLUMNS` (``ops`` a frame, or a table in parts,
    ``reports.parted.TableParts``: summarised group by group, written chunk by chunk, its rows
    read only where a table needs them, ``read_rows``, and as one frame only for the plots),
    ``timeseries`` (optional, absent in old runs)
    :data:`~radixbench.reports.tables.TIMESERIES_COLUMNS`; all are validated before anything is
    written (:class:`ValueError` on a missing or mistyped column). ``metrics`` (optional): the
    serving-metrics table, one row per variant, stored and shown as given. ``meta`` and
    ``equivalence`` are as for :func:`~radixbench.reports.markdown.write_report_md`;
    ``baseline`` names the baseline ``evictor``, ``matcher`` and/or ``flatten`` of the
    speed-up and verdict tables (an axis not named, or named with a value no variant has,
    takes the first variant listed: ``resolve_baseline``); ``tables``: further tables by stem,
    stored as given (with HiCache ``transfers`` and ``tiers``: its plots, its headline lines
    and the report's HiCache section, :mod:`radixbench.reports.hicache`); serving-metric
    verdicts only under
    the coupled clock; ``result["answer"]`` holds the headline lines; ``n_resamples``:
    bootstrap resamples per verdict (seeded with ``meta.seed``, 0 when absent).
    ``render=False`` stops after the tables (validated and written as above): no plots, no
    ``report.md``, no ``report.html`` — for sweep cells, which ``radixbench plot`` can render
    later. ``svg=True`` also writes each plot as SVG beside its
    PNG. ``progress``: a tqdm bar over the report steps on stderr (None = only on a terminal,
    False = never). ``on_answer``: called with the result once the tables are written,
    before any plot is drawn (its ``plots``, ``report_md``, ``report_html`` still empty), so
    a command prints the answer before the slowest part of the report.

    Returns a :class:`ReportResult` (a dict) with the written paths and the summary frames.
    """
    validate_frame(requests, REQUEST_COLUMNS, "requests")
    # a cluster's per-op table comes in parts (reports.parted): read the rows needed
    validate_frame(ops if isinstance(ops, pd.DataFrame) else ops.empty(), OP_COLUMNS, "ops")
    if timeseries is not None:
        validate_frame(timeseries, TIMESERIES_COLUMNS, "timeseries")
    if metrics is not None and not isinstance(metrics, pd.DataFrame):
        raise ValueError(
            f"metrics table: expected a pandas DataFrame, got {type(metrics).__name__}"
        )
    run_dir = Path(run_dir)
    meta = RunMeta.coerce(meta)
    seed = meta.seed
    # the plots read whole frames: a table in parts (a cluster's) is read whole only to draw
    frames = (requests, as_frame(ops), timeseries, metrics) if render else None
    extra = dict(tables or {})
    bar = tqdm(
        total=3 + (N_RENDER_STEPS if render else 0),
        desc="report",
        unit="step",
        disable=None if progress is None else not progress,
        leave=False,
    )
    # the drawing processes import matplotlib now, beside the summaries and tables
    drawing = start_plots(run_dir, frames, meta, extra, svg) if frames else nullcontext()
    with drawing, bar:
        bar.set_postfix_str("summaries")
        # variants in the order listed (the harness concatenates them in spec order)
        op_variants = ops if isinstance(ops, pd.DataFrame) else ops.variants()
        refs = references(meta.implementations)
        vs = VariantSet.from_frames(requests, op_variants, reference=refs)
        ops_sum = vs.attach(op_summary(ops))
        var_sum = vs.attach(variant_summary(requests))
        base = vs.resolve_baseline(baseline)
        rows = ops if isinstance(ops, pd.DataFrame) else read_rows(ops, vs, base)
        speed = speedups(ops_sum, base, vs, rows)
        bar.update()
        bar.set_postfix_str("verdicts (bootstrap)")
        clock = meta.clock
        verdicts = verdict_table(
            requests,
            rows,
            base,
            variants=vs,
            n_resamples=n_resamples,
            seed=seed if isinstance(seed, int) else 0,
            request_metrics=clock == "coupled",
        )
        others = {vs.value(n, "impl") for n in vs.names} - {"radixbench", None}
        reference_only = bool(meta.reference) and others == {meta.reference}
        if reference_only:
            # the reference alone on the impl axis: its reference rows pair it with every
            # algorithm; an impl pairing with one of them would say the same thing once more
            verdicts = verdicts[verdicts["axis"] != "impl"].reset_index(drop=True)
        diverged = (
            not equivalence.get("ok", True) and not equivalence.get("exempt") and clock != "coupled"
        )
        diffs = behaviour_diff(requests, vs, base, n_resamples=n_resamples) if diverged else []
        ans = answer(
            verdicts,
            rows,
            base,
            vs,
            loads=load_check(requests, timeseries, meta),
            metrics=metrics,
            clock=clock,
            behaviour=behaviour_lines(diffs, meta.expect_divergence),
            diverged=diverged,
            reference_only=reference_only,
        )
        verdicts = withhold(verdicts, ans.checks)
        tier_head, tier_serving = hicache_lines(
            requests, metrics, vs, base, seed if isinstance(seed, int) else 0, n_resamples
        )
        if tier_head or tier_serving:
            ans = Answer(
                ans.load,
                [*ans.headline, *tier_head],
                [*tier_serving, *ans.serving],
                ans.checks,
                ans.stated,
            )
        ref_lines: list[str] = []  # the answer's reference lines, in the PR summary too
        if meta.reference:
            ref_rows = reference_rows(
                rows, vs, base, meta.reference, noise=verdicts, n_resamples=n_resamples,
                seed=seed or 0,
            )  # fmt: skip
            caveat = DIVERGED_CAVEAT if diverged else ""
            ref_lines = reference_lines(ref_rows, _reference_label(meta), caveat)
            ans.headline[:0] = ref_lines
            verdicts = (
                pd.concat([verdicts, ref_rows], ignore_index=True) if len(ref_rows) else verdicts
            )
        if meta.reference_note:
            ref_lines = [f"Reference: {meta.reference_note}.", *ref_lines]
            ans.headline.insert(0, ref_lines[0])
        summary = summary_block(
            verdicts,
            ans.checks,
            ans.serving,
            equivalence,
            meta,
            withhold(ans.stated, ans.checks),
            reference=ref_lines,
        )
        bar.update()
        bar.set_postfix_str("tables")
        written = {
            "requests": write_table(requests, run_dir, "requests"),
            "ops": write_table(ops, run_dir, "ops"),
            "summary_ops": write_table(ops_sum, run_dir, "summary_ops"),
            "summary_variants": write_table(var_sum, run_dir, "summary_variants"),
            "speedups": write_table(speed, run_dir, "speedups"),
            "verdicts": write_table(verdicts, run_dir, "verdicts"),
        }
        if timeseries is not None:
            written["timeseries"] = write_table(timeseries, run_dir, "timeseries")
        if metrics is not None:
            written["metrics"] = write_table(metrics, run_dir, "metrics")
        for stem, df in extra.items():
            written[stem] = write_table(df, run_dir, stem)
        bar.update()
        result = ReportResult(
            report_md=None,
            report_html=None,
            tables=written,
            plots={},
            op_summary=ops_sum,
            variant_summary=var_sum,
            speedups=speed,
            verdicts=verdicts,
            answer=ans,
            summary=summary,
        )
        if on_answer is not None:
            on_answer(result)
        if isinstance(drawing, Drawing) and frames is not None:
            finish_render(result, run_dir, frames, meta, equivalence, svg, bar, drawing)
    return result


def _reference_label(meta: RunMeta) -> str:
    """``sglang 0.5.23 as served (rust tree core)``: how the answer names the reference."""
    entry: dict[str, Any] = next(
        (e for e in meta.implementations if e.get("impl") == meta.reference), {}
    )
    version = f" {entry['version']}" if entry.get("version") else ""
    served = " as served" if str(entry.get("spec", "")).partition(":")[0] == "sglang" else ""
    core = f" ({entry['tree_core']} tree core)" if entry.get("tree_core") else ""
    return f"{meta.reference}{version}{served}{core}"
