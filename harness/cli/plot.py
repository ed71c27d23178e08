"""``radixbench plot RUN_DIR``: re-render every table, plot and report of a finished run from
its saved Parquet tables, without re-running the simulation. Argument parsing and printing
only: the work is :func:`radixbench.harness.experiments.rerender.rerender`."""

from __future__ import annotations

import argparse
from pathlib import Path

from radixbench.harness.cli.util import UsageError

# The re-rendering (pandas, pyarrow, matplotlib) is imported when the command runs:
# `radixbench plot --help` loads none of them.


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


def run(args: argparse.Namespace) -> int:
    """Re-render the run; exit 0."""
    from radixbench.harness.experiments.rerender import rerender

    if args.resamples < 1:
        raise UsageError(f"--resamples must be >= 1, got {args.resamples}")
    progress = False if args.no_progress else None
    result = rerender(args.run_dir, args.resamples, svg=args.svg, progress=progress)
    print(f"re-rendered {len(result['tables'])} tables and {len(result['plots'])} plots")
    print(f"report: {result['report_md']}\nhtml:   {result['report_html']}")
    return 0
