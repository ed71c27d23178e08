"""Reports for radixbench runs: tables, summaries, plots and ``report.md``.

Input is the simulator's two tables (docs/CONTRACTS.md): the per-request table (times in s,
lengths in tokens) and the per-op table (wall time ``ns`` per call in nanoseconds).
:func:`write_report` validates both, stores them and their summaries as Parquet + CSV, renders
the latency plots and writes the Markdown report into one run directory::

    run_dir/
      requests.{parquet,csv}  ops.{parquet,csv}
      summary_ops.{parquet,csv}  summary_variants.{parquet,csv}  speedups.{parquet,csv}
      verdicts.{parquet,csv}  [timeseries.{parquet,csv}]  [metrics.{parquet,csv}]
      plots/<name>.png + plots/<name>.svg  (latency CDFs, cost vs size, hit rate, KV/queue, ...)
      report.md  report.html (self-contained: images embedded)

Every file is written atomically (temporary file in the same directory, then ``os.replace``).

Modules: :mod:`~radixbench.reports.tables` (schemas, validation, storage),
:mod:`~radixbench.reports.summary` (statistics and speed-ups),
:mod:`~radixbench.reports.verdicts` (bootstrap CIs and verdicts),
:mod:`~radixbench.reports.plots` / :mod:`~radixbench.reports.plots_run` (PNG + SVG figures),
:mod:`~radixbench.reports.runmeta` (run/environment block), :mod:`~radixbench.reports.markdown`
(``report.md``), :mod:`~radixbench.reports.html` (``report.html``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypedDict

import pandas as pd

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
from radixbench.reports.summary import op_summary, speedups, variant_summary
from radixbench.reports.tables import (
    OP_COLUMNS,
    REQUEST_COLUMNS,
    TIMESERIES_COLUMNS,
    validate_frame,
    write_table,
)
from radixbench.reports.verdicts import verdict_table

__all__ = ["DEFAULT_BASELINE", "ReportResult", "write_report"]

#: Baseline axis values: evictor for ``evict``, matcher for ``match_prefix``, flatten for the
#: batch builds (SGLang's own ``sum(lists, [])``).
DEFAULT_BASELINE: Mapping[str, str] = MappingProxyType(
    {"evictor": "heapify", "matcher": "linear", "flatten": "sum"}
)


class ReportResult(TypedDict):
    """What :func:`write_report` wrote and computed.

    ``report_md`` / ``report_html``: paths of ``report.md`` and the self-contained
    ``report.html`` (``None`` when not rendered); ``tables``: stem -> ``(parquet, csv)``
    paths for ``requests``, ``ops``, ``summary_ops``, ``summary_variants``, ``speedups``,
    ``verdicts`` (and ``timeseries`` / ``metrics`` when given); ``plots``: name -> PNG path
    (an SVG lies beside each); ``op_summary``, ``variant_summary``, ``speedups``,
    ``verdicts``: the summary frames (see :mod:`radixbench.reports.summary`,
    :mod:`radixbench.reports.verdicts`).
    """

    report_md: Path | None
    report_html: Path | None
    tables: dict[str, tuple[Path, Path]]
    plots: dict[str, Path]
    op_summary: pd.DataFrame
    variant_summary: pd.DataFrame
    speedups: pd.DataFrame
    verdicts: pd.DataFrame


def write_report(
    run_dir: Path | str,
    requests: pd.DataFrame,
    ops: pd.DataFrame,
    meta: Mapping[str, Any],
    equivalence: Mapping[str, Any],
    baseline: Mapping[str, str] = DEFAULT_BASELINE,
    timeseries: pd.DataFrame | None = None,
    metrics: pd.DataFrame | None = None,
    *,
    n_resamples: int = 1000,
    render: bool = True,
) -> ReportResult:
    """Validate, store, summarize, plot and report one run into ``run_dir``.

    ``requests`` and ``ops`` must follow :data:`~radixbench.reports.tables.REQUEST_COLUMNS` and
    :data:`~radixbench.reports.tables.OP_COLUMNS`, ``timeseries`` (optional, absent in old runs)
    :data:`~radixbench.reports.tables.TIMESERIES_COLUMNS`; all are validated before anything is
    written (:class:`ValueError` on a missing or mistyped column). ``metrics`` (optional): the
    serving-metrics table, one row per variant, stored and shown as given. ``meta`` and
    ``equivalence`` are as for :func:`~radixbench.reports.markdown.write_report_md`;
    ``baseline`` names the baseline ``evictor``, ``matcher`` (and optionally ``flatten``) of the
    speed-up and verdict tables; ``n_resamples``: bootstrap resamples per verdict (seeded with
    ``meta["seed"]``, 0 when absent). ``render=False`` stops after the tables (validated and
    written as above): no plots, no ``report.md``, no ``report.html`` — for sweep cells, which
    ``radixbench plot`` can render later.

    Returns a :class:`ReportResult` (a dict) with the written paths and the summary frames.
    """
    validate_frame(requests, REQUEST_COLUMNS, "requests")
    validate_frame(ops, OP_COLUMNS, "ops")
    if timeseries is not None:
        validate_frame(timeseries, TIMESERIES_COLUMNS, "timeseries")
    if metrics is not None and not isinstance(metrics, pd.DataFrame):
        raise ValueError(
            f"metrics table: expected a pandas DataFrame, got {type(metrics).__name__}"
        )
    run_dir = Path(run_dir)
    seed = meta.get("seed")

    ops_sum = op_summary(ops)
    var_sum = variant_summary(requests)
    speed = speedups(ops_sum, baseline)
    verdicts = verdict_table(
        requests, ops, baseline, n_resamples=n_resamples, seed=seed if isinstance(seed, int) else 0
    )

    tables = {
        "requests": write_table(requests, run_dir, "requests"),
        "ops": write_table(ops, run_dir, "ops"),
        "summary_ops": write_table(ops_sum, run_dir, "summary_ops"),
        "summary_variants": write_table(var_sum, run_dir, "summary_variants"),
        "speedups": write_table(speed, run_dir, "speedups"),
        "verdicts": write_table(verdicts, run_dir, "verdicts"),
    }
    if timeseries is not None:
        tables["timeseries"] = write_table(timeseries, run_dir, "timeseries")
    if metrics is not None:
        tables["metrics"] = write_table(metrics, run_dir, "metrics")
    if not render:
        return ReportResult(
            report_md=None,
            report_html=None,
            tables=tables,
            plots={},
            op_summary=ops_sum,
            variant_summary=var_sum,
            speedups=speed,
            verdicts=verdicts,
        )
    plot_dir = run_dir / "plots"
    ceiling = meta.get("hit_rate_ceiling")
    plots = {
        "verdict_bars": plot_verdict_bars(verdicts, plot_dir / "verdict_bars.png"),
        "op_cdf": plot_op_cdf(ops, plot_dir / "op_cdf.png"),
        "evict_vs_leaves": plot_evict_vs_leaves(ops, plot_dir / "evict_vs_leaves.png"),
        "cost_vs_tree": plot_cost_vs_tree(ops, plot_dir / "cost_vs_tree.png"),
        "match_vs_len": plot_match_vs_len(ops, plot_dir / "match_vs_len.png"),
        "match_vs_matched": plot_match_vs_matched(ops, plot_dir / "match_vs_matched.png"),
        "request_cdfs": plot_request_cdfs(requests, plot_dir / "request_cdfs.png"),
        "hit_rate_over_time": plot_hit_rate_over_time(
            requests,
            plot_dir / "hit_rate_over_time.png",
            ceiling if isinstance(ceiling, Mapping) else None,
        ),
    }
    if timeseries is not None:
        plots["kv_queue_over_time"] = plot_kv_queue_over_time(
            timeseries, plot_dir / "kv_queue_over_time.png"
        )
    report_md = write_report_md(
        run_dir,
        meta=meta,
        op_summary=ops_sum,
        variant_summary=var_sum,
        speedups=speed,
        equivalence=equivalence,
        plots=plots,
        tables=tables,
        verdicts=verdicts,
        metrics=metrics,
    )
    report_html = write_report_html(
        run_dir,
        meta=meta,
        equivalence=equivalence,
        frames={
            "Verdicts": verdicts,
            "Variants": var_sum,
            "Serving metrics": metrics,
            "Speed-ups": speed,
            "Per-op latency": ops_sum,
        },
        plots=plots,
    )
    return ReportResult(
        report_md=report_md,
        report_html=report_html,
        tables=tables,
        plots=plots,
        op_summary=ops_sum,
        variant_summary=var_sum,
        speedups=speed,
        verdicts=verdicts,
    )
