"""``radixbench study eviction|matching|hicache|routing|FILE``: where a change matters.

Runs the study's points (the quantity the algorithm's cost scales with: evictable leaves, or
matched length) on Dask under the coupled clock, and writes a run folder with the plot, the
points table and ``study.md`` (verdict, crossover). Study files:
:mod:`radixbench.harness.config.study`; the run: :mod:`radixbench.harness.experiments.study`.
A study file of family ``hicache`` (``study hicache``: host pool ratio, write policy, storage
bandwidth, prefetch policy against the device-only cache; where an L3 hit becomes slower than
recompute) runs :mod:`radixbench.harness.experiments.study_hicache` instead; one of family
``routing`` (``study routing``: the instance count and the load per instance, routers against
round-robin) :mod:`radixbench.harness.experiments.study_routing` (``config.study_routing``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

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
    """Run the study, print its verdict lines and the paths; exit 0 (2 on bad input)."""
    from radixbench.harness.cli.scenario_args import set_overrides
    from radixbench.harness.cli.util import UsageError, check_scheduler
    from radixbench.harness.config.study import load_study
    from radixbench.harness.config.study_hicache import is_hicache_study
    from radixbench.harness.experiments.study import run_study

    check_scheduler(args.scheduler)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers: must be > 0, got {args.workers}")
    extra = set_overrides(args.set)
    if "variants.impls" in extra:
        raise UsageError("--set variants.impls: compare implementations with --impl")
    if is_hicache_study(args.study):
        return _run_hicache(args, extra)
    from radixbench.harness.config.study_routing import is_routing_study

    if is_routing_study(args.study):
        if args.impl:
            raise UsageError("--impl: the routing study runs radixbench's cache")
        return _run_routing(args, extra)
    spec = load_study(args.study, quick=args.quick)
    if args.impl:
        from radixbench.harness.config.impl import ImplError

        try:
            spec = spec.with_impls([x.strip() for x in args.impl.split(",") if x.strip()])
        except ImplError as e:
            raise UsageError(f"--impl: {e}") from None
    if extra:  # validate the overrides on every point before starting the cluster
        spec.check_overrides(extra)
    outcome = run_study(
        spec,
        args.out,
        args.scheduler,
        args.workers,
        progress=False if args.no_progress else None,
        extra=extra or None,
    )
    _print(outcome)
    return 0


def _run_hicache(args: argparse.Namespace, extra: dict) -> int:
    """``study hicache`` (a study file of family ``hicache``): its sweeps, no ``--impl``."""
    from radixbench.harness.cli.util import UsageError
    from radixbench.harness.config.study_hicache import load_hicache_study
    from radixbench.harness.experiments.study_hicache import run_hicache_study

    if args.impl:
        raise UsageError("--impl: a hicache study compares HiCache settings, not implementations")
    study = load_hicache_study(args.study, quick=args.quick)
    if extra:
        study.check_overrides(extra)
    progress = False if args.no_progress else None
    _print(run_hicache_study(study, args.out, args.scheduler, args.workers, progress, extra))
    return 0


def _print(outcome: Any) -> None:
    """The verdict lines and the paths of a finished study."""
    for line in outcome.summary["verdicts"]:
        print(line.replace("**", ""))
    print(f"\nstudy: {outcome.summary['study_md']}")
    print(f"plot: {outcome.summary['plot']}")
    print(f"points: {outcome.run_dir / 'points.csv'}  ({outcome.wall_s:.0f} s)")


def _run_routing(args: argparse.Namespace, extra: dict) -> int:
    """A routing study (``family = "routing"``): points of instances x load."""
    from radixbench.harness.config.study_routing import load_routing_study
    from radixbench.harness.experiments.study_routing import run_routing_study

    spec = load_routing_study(args.study, quick=args.quick)
    if extra:
        spec.check_overrides(extra)
    outcome = run_routing_study(
        spec,
        args.out,
        args.scheduler,
        args.workers,
        progress=False if args.no_progress else None,
        extra=extra or None,
    )
    cols = ["load", "instances", "router", "ttft_p90_s", "output_throughput", "prefix_hit_rate",
            "ttft_p90_ratio", "throughput_ratio", "overloaded_instances"]  # fmt: skip
    print(text_table(outcome.points, cols))
    print()
    for line in outcome.summary["lines"]:
        print(line)
    print(f"\nstudy: {outcome.summary['study_md']}")
    print(f"plot: {outcome.summary['plot']}")
    print(f"points: {outcome.run_dir / 'points.csv'}  ({outcome.wall_s:.0f} s)")
    return 0
