"""``radixbench study eviction|matching|hicache|routing|FILE``: where a change matters.

Runs the study's points (the quantity the algorithm's cost scales with: evictable leaves, or
matched length; HiCache's settings; the instance count and load per instance) on Dask, and
writes a run folder with the plot, the points table and ``study.md`` (verdict, crossover). The
study file's ``family`` picks the registered family that loads, runs and renders it
(:mod:`radixbench.harness.experiments.study_family`: ``eviction`` / ``matching``, ``hicache``,
``routing``); the run: :func:`radixbench.harness.experiments.study.run_study`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from radixbench.harness.cli.scenario_args import add_set_argument
from radixbench.harness.cli.tables import text_table


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``study`` to the subcommands."""
    p = sub.add_parser(
        "study",
        help="serving effect of an algorithm family vs the quantity its cost scales with",
        description=__doc__.splitlines()[0].replace("``", ""),
    )
    p.set_defaults(func=run)
    p.add_argument(
        "study",
        help="bundled study (eviction, matching, hicache, routing) or a study TOML file",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="fewer and smaller points (a few minutes on 2 cores) instead of the full range",
    )
    p.add_argument("--out", type=Path, default=Path("runs"), help="parent folder (default runs)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="use an existing Dask cluster")
    p.add_argument("--workers", type=int, help="LocalCluster worker processes (default: cores)")
    add_set_argument(
        p, help="override a scenario key at every point (TOML value), e.g. arrivals.rate=30"
    )
    p.add_argument(
        "--impl",
        metavar="SPEC,SPEC[,...]",
        help="compare these cache implementations at every point instead of the study's "
        "algorithms, the first as the baseline (e.g. sglang,sglang:patch.py:CLASS)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Run the study (its family from the study file, :mod:`~radixbench.harness.experiments.
    study_family`), print its verdict lines and the paths; exit 0 (2 on bad input)."""
    from radixbench.harness.cli.scenario_args import set_overrides
    from radixbench.harness.cli.util import UsageError, check_scheduler
    from radixbench.harness.experiments.study import run_study
    from radixbench.harness.experiments.study_family import family_of

    check_scheduler(args.scheduler)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers: must be > 0, got {args.workers}")
    extra = set_overrides(args.set)
    if "variants.impls" in extra:
        raise UsageError("--set variants.impls: compare implementations with --impl")
    family = family_of(args.study)
    if args.impl and family.with_impls is None:
        raise UsageError(f"--impl: {family.no_impls}")
    spec = family.load(args.study, args.quick)
    if args.impl and family.with_impls is not None:
        from radixbench.harness.config.impl import ImplError

        try:
            spec = family.with_impls(spec, [x.strip() for x in args.impl.split(",") if x.strip()])
        except ImplError as e:
            raise UsageError(f"--impl: {e}") from None
    if extra:  # validate the overrides on every point before starting the cluster
        spec.check_overrides(extra)
    progress = False if args.no_progress else None
    outcome = run_study(spec, args.out, args.scheduler, args.workers, progress, extra or None)
    if family.columns:
        print(text_table(outcome.points, list(family.columns)))
        print()
    for line in outcome.summary["lines"]:
        print(line.replace("**", ""))
    print(f"\nstudy: {outcome.summary['study_md']}")
    print(f"plot: {outcome.summary['plot']}")
    print(f"points: {outcome.run_dir / 'points.csv'}  ({outcome.wall_s:.0f} s)")
    return 0
