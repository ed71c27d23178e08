"""Reports for radixbench runs: tables, summaries, plots and ``report.md``.

Input is the simulator's two tables (docs/CONTRACTS.md): the per-request table (times in s,
lengths in tokens) and the per-op table (wall time ``ns`` per call in nanoseconds).
:func:`write_report` validates both, stores them and their summaries as Parquet + CSV, renders
the latency plots and writes the Markdown report into one run directory::

    run_dir/
      requests.{parquet,csv}  ops.{parquet,csv}
      summary_ops.{parquet,csv}  summary_variants.{parquet,csv}  speedups.{parquet,csv}
      plots/op_cdf.png  plots/evict_vs_leaves.png  plots/match_vs_len.png
      report.md

Every file is written atomically (temporary file in the same directory, then ``os.replace``).

Modules: :mod:`~radixbench.reports.tables` (schemas, validation, storage),
:mod:`~radixbench.reports.summary` (statistics and speed-ups),
:mod:`~radixbench.reports.plots` (PNG figures), :mod:`~radixbench.reports.markdown`
(``report.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypedDict

import pandas as pd

from radixbench.reports.markdown import write_report_md
from radixbench.reports.plots import plot_evict_vs_leaves, plot_match_vs_len, plot_op_cdf
from radixbench.reports.summary import op_summary, speedups, variant_summary
from radixbench.reports.tables import OP_COLUMNS, REQUEST_COLUMNS, validate_frame, write_table

__all__ = ["DEFAULT_BASELINE", "ReportResult", "write_report"]

#: Baseline axis values for the speed-up table: evictor for ``evict``, matcher for
#: ``match_prefix``.
DEFAULT_BASELINE: Mapping[str, str] = MappingProxyType({"evictor": "heapify", "matcher": "linear"})


class ReportResult(TypedDict):
    """What :func:`write_report` wrote and computed.

    ``report_md``: path of ``report.md``; ``tables``: stem -> ``(parquet, csv)`` paths for
    ``requests``, ``ops``, ``summary_ops``, ``summary_variants``, ``speedups``; ``plots``:
    name -> PNG path for ``op_cdf``, ``evict_vs_leaves``, ``match_vs_len``; ``op_summary``,
    ``variant_summary``, ``speedups``: the summary frames (see
    :mod:`radixbench.reports.summary`).
    """

    report_md: Path
    tables: dict[str, tuple[Path, Path]]
    plots: dict[str, Path]
    op_summary: pd.DataFrame
    variant_summary: pd.DataFrame
    speedups: pd.DataFrame


def write_report(
    run_dir: Path | str,
    requests: pd.DataFrame,
    ops: pd.DataFrame,
    meta: Mapping[str, Any],
    equivalence: Mapping[str, Any],
    baseline: Mapping[str, str] = DEFAULT_BASELINE,
) -> ReportResult:
    """Validate, store, summarize, plot and report one run into ``run_dir``.

    ``requests`` and ``ops`` must follow :data:`~radixbench.reports.tables.REQUEST_COLUMNS` and
    :data:`~radixbench.reports.tables.OP_COLUMNS`; both are validated before anything is
    written (:class:`ValueError` on a missing or mistyped column). ``meta`` and
    ``equivalence`` are as for :func:`~radixbench.reports.markdown.write_report_md`;
    ``baseline`` names the baseline ``evictor`` and ``matcher`` of the speed-up table.

    Returns a :class:`ReportResult` (a dict) with the written paths and the summary frames.
    """
    validate_frame(requests, REQUEST_COLUMNS, "requests")
    validate_frame(ops, OP_COLUMNS, "ops")
    run_dir = Path(run_dir)

    ops_sum = op_summary(ops)
    var_sum = variant_summary(requests)
    speed = speedups(ops_sum, baseline)

    tables = {
        "requests": write_table(requests, run_dir, "requests"),
        "ops": write_table(ops, run_dir, "ops"),
        "summary_ops": write_table(ops_sum, run_dir, "summary_ops"),
        "summary_variants": write_table(var_sum, run_dir, "summary_variants"),
        "speedups": write_table(speed, run_dir, "speedups"),
    }
    plot_dir = run_dir / "plots"
    plots = {
        "op_cdf": plot_op_cdf(ops, plot_dir / "op_cdf.png"),
        "evict_vs_leaves": plot_evict_vs_leaves(ops, plot_dir / "evict_vs_leaves.png"),
        "match_vs_len": plot_match_vs_len(ops, plot_dir / "match_vs_len.png"),
    }
    report_md = write_report_md(
        run_dir,
        meta=meta,
        op_summary=ops_sum,
        variant_summary=var_sum,
        speedups=speed,
        equivalence=equivalence,
        plots=plots,
        tables=tables,
    )
    return ReportResult(
        report_md=report_md,
        tables=tables,
        plots=plots,
        op_summary=ops_sum,
        variant_summary=var_sum,
        speedups=speed,
    )
