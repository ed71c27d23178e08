"""``radixbench diff RUN_A RUN_B``: two saved runs side by side (before/after a patch, two
machines): per-op and serving ratios with CIs, hit rates, the settings and environment that
differ, each run's equivalence. Argument parsing and printing only: the work is
:func:`radixbench.harness.experiments.diff.run_diff`."""

from __future__ import annotations

import argparse
from pathlib import Path

from radixbench.harness.cli.util import UsageError, positive_int

HELP = "two saved runs side by side: op and serving ratios with CIs, settings that differ"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``diff`` to the subcommands."""
    p = sub.add_parser("diff", help=HELP, description=HELP[:1].upper() + HELP[1:] + ".")
    p.set_defaults(func=run)
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="a run folder (the before)")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="a run folder (the after)")
    p.add_argument(
        "--out", type=Path, default=Path("runs"), help="parent of the diff folder (default runs)"
    )
    p.add_argument(
        "--resamples",
        type=positive_int,
        default=1000,
        help="bootstrap resamples per ratio (default 1000)",
    )


def run(args: argparse.Namespace) -> int:
    """Compare the runs, write the folder, print the Markdown; exit 0."""
    from radixbench.harness.experiments.diff import run_diff

    if args.run_a.resolve() == args.run_b.resolve():
        raise UsageError("diff: RUN_A and RUN_B are the same folder")
    outcome = run_diff(args.run_a, args.run_b, args.out, args.resamples)
    print(outcome.markdown)
    print(f"\ndiff: {outcome.folder / 'diff.md'}\nhtml: {outcome.folder / 'diff.html'}")
    return 0
