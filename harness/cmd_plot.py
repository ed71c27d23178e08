"""``radixbench plot RUN_DIR``: re-render every table, plot and report of a finished run from
its saved Parquet tables, without re-running the simulation."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from radixbench.harness.cliutil import UsageError

# pandas, pyarrow and matplotlib are imported inside the functions: `radixbench --help` and a bad
# RUN_DIR answer without loading them.


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``plot`` to the subcommands."""
    p = sub.add_parser("plot", help="re-render tables, plots and reports of a saved run")
    p.set_defaults(func=run)
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder of compare")
    p.add_argument(
        "--resamples",
        type=int,
        default=1000,
        help="bootstrap resamples per verdict (default 1000)",
    )
    p.add_argument("--svg", action="store_true", help="also write each plot as SVG beside its PNG")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def rerender(
    run_dir: Path, n_resamples: int = 1000, *, svg: bool = False, progress: bool | None = None
) -> dict[str, Any]:
    """Re-run :func:`~radixbench.reports.write_report` on the tables saved in ``run_dir``
    with everything the run was made with (its record, ``config.json``: the ``--baseline``,
    the variants' axes, the scheduler settings), files replaced atomically one by one; the
    equivalence verdict is recomputed from the per-request table. ``svg``: also write SVG
    plots; ``progress``: a bar over the report steps on stderr (None = only on a terminal).
    Returns the :class:`~radixbench.reports.ReportResult`. Raises :class:`UsageError` (one
    line naming the folder or file) for a folder that is not a readable run."""
    from radixbench.harness.equivalence import check_equivalence
    from radixbench.reports import write_report
    from radixbench.reports.record import RecordError, read_run

    try:
        tables, meta = read_run(run_dir)
    except RecordError as e:
        raise UsageError(str(e)) from None
    requests, ops = tables["requests"], tables["ops"]
    assert requests is not None and ops is not None  # read_run requires both
    try:
        return dict(
            write_report(
                run_dir,
                requests,
                ops,
                meta,
                check_equivalence(requests),
                baseline=meta.baseline,
                timeseries=tables["timeseries"],
                metrics=tables["metrics"],
                n_resamples=n_resamples,
                svg=svg,
                progress=progress,
            )
        )
    except (KeyError, ValueError) as e:
        raise UsageError(f"{run_dir}: {str(e).splitlines()[0]}") from None


def run(args: argparse.Namespace) -> int:
    """Re-render the run; exit 0."""
    if args.resamples < 1:
        raise UsageError(f"--resamples must be >= 1, got {args.resamples}")
    progress = False if args.no_progress else None
    result = rerender(args.run_dir, args.resamples, svg=args.svg, progress=progress)
    print(f"re-rendered {len(result['tables'])} tables and {len(result['plots'])} plots")
    print(f"report: {result['report_md']}\nhtml:   {result['report_html']}")
    return 0
