"""``radixbench sweep GRID.toml``: a parameter sweep, locally or on a Dask cluster, resumable."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from radixbench.harness.cli import Terminated
from radixbench.harness.cli.tables import text_table
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
    try:
        outcome = run_sweep(
            grid, out, args.scheduler, args.workers, progress=False if args.no_progress else None
        )
    except (KeyboardInterrupt, Terminated) as e:  # main prints the note: what was kept
        cells = out / "cells"
        done = sum((cells / c.key / "config.json").exists() for c in grid.cells)
        e.add_note(
            f"{done} of {len(grid.cells)} cells finished and kept in {cells}: run the same "
            "command again to resume (finished cells are not rerun)"
            if done
            else f"no cell of {len(grid.cells)} finished; nothing kept in {cells}"
        )
        raise
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
            "overloaded",
        ]
        print(text_table(res, cols))
        ratios = [c for c in res.columns if c.endswith("_ratio")]
        if ratios:
            print("\nratios against each candidate's baseline partner [95% CI]:")
            for _, r in res[res["baseline_variant"].notna()].iterrows():
                point = ", ".join(f"{p}={r[p]}" for p in grid.params)
                parts = [
                    f"{c.removesuffix('_ratio')} {r[c]:.3g} "
                    f"[{r[c.removesuffix('ratio') + 'ci_low']:.3g}–"
                    f"{r[c.removesuffix('ratio') + 'ci_high']:.3g}] "
                    f"{r[c.removesuffix('ratio') + 'verdict']}"
                    for c in ratios
                    if pd.notna(r[c])
                ]
                print(f"  {point}, seed {r['seed']}: {r['variant']} vs {r['baseline_variant']}: "
                      + "; ".join(parts))  # fmt: skip
        skipped = res[res["not_compared"] != ""] if "not_compared" in res else res.iloc[0:0]
        if len(skipped):  # a verdict "not compared" says why (the cell's report says so too)
            print("\nnot compared:")
            for _, r in skipped.drop_duplicates("cell").iterrows():
                point = ", ".join(f"{p}={r[p]}" for p in grid.params)
                print(f"  {point}, seed {r['seed']}: {r['not_compared']}")
        flagged = res[res["overloaded"]] if "overloaded" in res.columns else res.iloc[0:0]
        if len(flagged):
            points = sorted({", ".join(f"{p}={r[p]}" for p in grid.params)
                             for _, r in flagged.iterrows()})  # fmt: skip
            print(
                f"\nOVERLOADED at {len(points)} point(s): {'; '.join(points)} — latencies there "
                "measure the queue, not the cache (lower the rate: arrivals.time_scale)"
            )
    print(
        f"\n{len(grid.cells)} cells: {outcome.ran} run now, {outcome.cached} already finished, "
        f"{len(outcome.failed)} failed"
    )
    for key, reason in outcome.failed:
        print(f"  failed cell {key}: {reason}")
    print(f"results: {out / 'results.csv'}; plots: {out / 'plots'}")
    return 1 if outcome.failed else 0
