"""``radixbench sweep GRID.toml``: a parameter sweep, locally or on a Dask cluster, resumable."""

from __future__ import annotations

import argparse
from pathlib import Path

from radixbench.harness.cli.util import check_scheduler, positive_int
from radixbench.harness.config.grid import load_grid
from radixbench.harness.experiments.sweep import run_sweep


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``sweep`` to the subcommands."""
    p = sub.add_parser("sweep", help="run a grid of scenario parameters x variants x seeds")
    p.set_defaults(func=run)
    p.add_argument("grid", type=Path, help="grid TOML file")
    p.add_argument("--out", type=Path, help="sweep folder (default runs/sweep-<grid name>)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="use an existing Dask cluster")
    p.add_argument("--workers", type=positive_int, help="LocalCluster workers (default: cores)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """Run the sweep; exit 0 when every cell finished, 1 when some failed."""
    check_scheduler(args.scheduler)
    grid = load_grid(args.grid)
    out = args.out or Path("runs") / f"sweep-{args.grid.stem}"
    outcome = run_sweep(
        grid, out, args.scheduler, args.workers, progress=False if args.no_progress else None
    )
    res = outcome.results
    if len(res):
        cols = [
            *grid.params,
            "variant",
            "seed",
            "evict_p50_ns",
            "evict_p99_ns",
            "match_prefix_p99_ns",
            "prefix_hit_rate",
            "ttft_p99_s",
        ]
        print(res[[c for c in cols if c in res.columns]].to_string(index=False))
    print(
        f"\n{len(grid.cells)} cells: {outcome.ran} run now, {outcome.cached} already finished, "
        f"{len(outcome.failed)} failed"
    )
    for key, reason in outcome.failed:
        print(f"  failed cell {key}: {reason}")
    print(f"results: {out / 'results.csv'}; plots: {out / 'plots'}")
    return 1 if outcome.failed else 0
