"""Reports for radixbench runs: tables, summaries, plots and ``report.md``.

Input is the simulator's two tables (docs/CONTRACTS.md): the per-request table (times in s,
lengths in tokens) and the per-op table (wall time ``ns`` per call in nanoseconds).
:func:`write_report` validates both, stores them and their summaries as Parquet + CSV, renders
the latency plots and writes the Markdown report into one run directory::

    run_dir/
      requests.{parquet,csv}  ops.{parquet,csv}
      summary_ops.{parquet,csv}  summary_variants.{parquet,csv}  speedups.{parquet,csv}
      verdicts.{parquet,csv}  [timeseries.{parquet,csv}]  [metrics.{parquet,csv}]
      plots/<name>.png [+ plots/<name>.svg with svg=True]  (latency CDFs, cost vs size, ...)
      report.md  report.html (self-contained: images embedded)

Every file is written atomically (temporary file in the same directory, then ``os.replace``).
Plots of large runs are drawn from summaries (CDF quantiles, thinned series and scatters, all
statistics computed on every row), so writing the report takes seconds whatever the run size;
matplotlib and the renderers are imported only when a report is rendered.

Modules: :mod:`~radixbench.reports.tables` (schemas, validation, storage),
:mod:`~radixbench.reports.summary` (statistics and speed-ups),
:mod:`~radixbench.reports.verdicts` (bootstrap CIs and verdicts),
:mod:`~radixbench.reports.plots` / :mod:`~radixbench.reports.plots_run` (PNG [+ SVG] figures),
:mod:`~radixbench.reports.runmeta` (run/environment block), :mod:`~radixbench.reports.markdown`
(``report.md``), :mod:`~radixbench.reports.html` (``report.html``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd
from tqdm import tqdm

from radixbench.reports.axes import VariantSet, references
from radixbench.reports.behaviour import behaviour_diff, behaviour_lines
from radixbench.reports.diagnostics import load_check
from radixbench.reports.headline import DIVERGED_CAVEAT, Answer, answer, withhold
from radixbench.reports.hicache import has_tiers, hicache_lines
from radixbench.reports.parted import TableParts, as_frame, read_rows
from radixbench.reports.pr_summary import summary_block
from radixbench.reports.record import RunMeta
from radixbench.reports.reference import reference_lines, reference_rows
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
    paths for ``requests``, ``ops``, ``summary_ops``, ``summary_variants``, ``speedups``,
    ``verdicts`` (and ``timeseries`` / ``metrics`` when given); ``plots``: name -> PNG path
    (an SVG lies beside each when written with ``svg=True``); ``op_summary``,
    ``variant_summary``, ``speedups``, ``verdicts``: the summary frames (see
    :mod:`radixbench.reports.summary`, :mod:`radixbench.reports.verdicts`).
    """

    report_md: Path | None
    report_html: Path | None
    tables: dict[str, tuple[Path, Path]]
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
    bar = tqdm(
        total=3 + (_N_RENDER_STEPS if render else 0),
        desc="report",
        unit="step",
        disable=None if progress is None else not progress,
        leave=False,
    )
    with bar:
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
        extra = dict(tables or {})
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
        if render:
            frames = (requests, as_frame(ops), timeseries, metrics)
            _render(result, run_dir, frames, meta, equivalence, svg, bar, extra)
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


#: Steps of :func:`_render` counted by the progress bar: 9 plots, report.md, report.html.
_N_RENDER_STEPS = 11


def _render(
    result: ReportResult,
    run_dir: Path,
    frames: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None, pd.DataFrame | None],
    meta: RunMeta,
    equivalence: Mapping[str, Any],
    svg: bool,
    bar: tqdm,
    extra: Mapping[str, pd.DataFrame] | None = None,
) -> None:
    """Plots, ``report.md`` and ``report.html`` of :func:`write_report` (fills ``result``'s
    ``plots``, ``report_md``, ``report_html``) from ``frames`` = (requests, ops, timeseries,
    metrics). matplotlib is imported here, not at start-up."""
    from radixbench.reports.drawing import draw_plots
    from radixbench.reports.html import write_report_html
    from radixbench.reports.markdown import write_report_md
    from radixbench.reports.plots import plot_evict_vs_leaves, plot_match_vs_len, plot_op_cdf
    from radixbench.reports.plots_run import (
        plot_cost_vs_tree,
        plot_hit_rate_over_time,
        plot_kv_queue_over_time,
        plot_match_vs_matched,
        plot_request_cdfs,
        plot_verdict_bars,
    )

    requests, ops, timeseries, metrics = frames
    plot_dir = run_dir / "plots"
    ceiling = meta.hit_rate_ceiling
    verdicts = result["verdicts"]
    claims = verdicts[verdicts["verdict"] != "not compared"]  # no plot claims either
    steps: dict[str, Callable[[Path], Path]] = {
        "verdict_bars": lambda p: plot_verdict_bars(claims, p, svg=svg),
        "op_cdf": lambda p: plot_op_cdf(ops, p, svg=svg),
        "evict_vs_leaves": lambda p: plot_evict_vs_leaves(ops, p, svg=svg),
        "cost_vs_tree": lambda p: plot_cost_vs_tree(ops, p, svg=svg),
        "match_vs_len": lambda p: plot_match_vs_len(ops, p, svg=svg),
        "match_vs_matched": lambda p: plot_match_vs_matched(ops, p, svg=svg),
        "request_cdfs": lambda p: plot_request_cdfs(requests, p, svg=svg),
        "hit_rate_over_time": lambda p: plot_hit_rate_over_time(
            requests, p, ceiling if isinstance(ceiling, Mapping) else None, svg=svg
        ),
    }
    if not (ops["op"] == "evict").any():
        del steps["evict_vs_leaves"]  # evict never ran: no empty plot
    if timeseries is not None:
        steps["kv_queue_over_time"] = lambda p: plot_kv_queue_over_time(timeseries, p, svg=svg)
    if has_tiers(requests):
        from radixbench.reports.plots_tiers import plot_links_over_time, plot_tier_hits_over_time

        steps["tier_hits_over_time"] = lambda p: plot_tier_hits_over_time(requests, p, svg=svg)
        transfers, tiers = (extra or {}).get("transfers"), (extra or {}).get("tiers")
        if transfers is not None and tiers is not None:
            steps["links_over_time"] = lambda p: plot_links_over_time(transfers, tiers, p, svg=svg)
    plots = result["plots"]
    bar.set_postfix_str("plots")
    for name, path in draw_plots(steps, plot_dir):  # in parallel where there are cores
        plots[name] = path
        bar.update()
    # in the order listed, whatever order they were drawn in
    result["plots"] = plots = {name: plots[name] for name in steps}
    bar.update(max(0, _N_RENDER_STEPS - 2 - len(steps)))  # the skipped plots
    bar.set_postfix_str("report.md")
    result["report_md"] = write_report_md(
        run_dir,
        meta=meta,
        op_summary=result["op_summary"],
        variant_summary=result["variant_summary"],
        speedups=result["speedups"],
        equivalence=equivalence,
        plots=plots,
        tables=result["tables"],
        verdicts=verdicts,
        metrics=metrics,
        answer=result["answer"],
        summary=result["summary"],
    )
    bar.update()
    bar.set_postfix_str("report.html")
    result["report_html"] = write_report_html(
        run_dir,
        meta=meta,
        equivalence=equivalence,
        frames={
            "Verdicts": verdicts,
            "Variants": result["variant_summary"],
            "Serving metrics": metrics,
            "Speed-ups": result["speedups"],
            "Per-op latency": result["op_summary"],
        },
        plots=plots,
        answer=result["answer"],
        summary=result["summary"],
    )
    bar.update()
