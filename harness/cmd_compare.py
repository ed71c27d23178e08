"""``radixbench compare``: one trace, several cache algorithm variants, one report."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from radixbench.cache.evictor import EVICTORS
from radixbench.cache.matcher import MATCHERS
from radixbench.cache.policy import POLICIES
from radixbench.harness.cliutil import UsageError, csv_list, positive_float, positive_int
from radixbench.harness.compare import CompareSpec, parse_variants, run_compare
from radixbench.sim.config import FLATTENERS_NAMES, SimConfig

_DEFAULTS = SimConfig()


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``compare`` to the subcommands."""
    c = sub.add_parser("compare", help="run one trace under several cache algorithm variants")
    c.set_defaults(func=run)
    add_compare_arguments(c)


def add_compare_arguments(c: argparse.ArgumentParser) -> None:
    """Add every option of ``compare`` to ``c`` (shared with ``profile``); read them back with
    :func:`spec_from_args`."""
    c.add_argument("--trace", type=Path, help="Mooncake JSONL trace (default: bundled)")
    sel = c.add_mutually_exclusive_group()
    sel.add_argument(
        "--requests",
        type=positive_int,
        default=None,
        help="first N requests (default 1000 unless --window is given)",
    )
    sel.add_argument(
        "--window",
        type=positive_float,
        metavar="SECONDS",
        help="requests arriving in [--start, --start + SECONDS)",
    )
    c.add_argument("--start", type=float, default=0.0, metavar="SECONDS")
    c.add_argument(
        "--time-scale",
        type=positive_float,
        default=1.0,
        help="multiply arrival times (2 = half the request rate)",
    )
    c.add_argument(
        "--evictors",
        type=csv_list,
        default=["heapify", "persistent-heap"],
        help=f"comma list of {', '.join(EVICTORS)}",
    )
    c.add_argument(
        "--matchers",
        type=csv_list,
        default=["linear", "galloping"],
        help=f"comma list of {', '.join(MATCHERS)}",
    )
    c.add_argument(
        "--flatten",
        type=csv_list,
        default=["chain"],
        help=f"batch-builder flatten variants: {', '.join(FLATTENERS_NAMES)}",
    )
    c.add_argument("--policy", default="lru", choices=sorted(POLICIES))
    c.add_argument(
        "--kv-capacity",
        type=positive_int,
        default=_DEFAULTS.kv_capacity_tokens,
        metavar="TOKENS",
        help="KV pool size in tokens",
    )
    c.add_argument("--max-running", type=positive_int, default=_DEFAULTS.max_running)
    c.add_argument("--max-prefill-tokens", type=positive_int, default=_DEFAULTS.max_prefill_tokens)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    c.add_argument("--out", type=Path, default=Path("runs"), help="parent of run folders")
    c.add_argument("--no-progress", action="store_true")


def spec_from_args(args: argparse.Namespace) -> CompareSpec:
    """The :class:`CompareSpec` the options of :func:`add_compare_arguments` describe.

    Raises :class:`UsageError` / :class:`ValueError` (one line) on bad input.
    """
    if args.trace is not None and not args.trace.is_file():
        raise UsageError(f"--trace: no such file: {args.trace}")
    sim = SimConfig(
        kv_capacity_tokens=args.kv_capacity,
        max_running=args.max_running,
        max_prefill_tokens=args.max_prefill_tokens,
        policy=args.policy,
        seed=args.seed,
    )
    spec = CompareSpec(
        trace=args.trace,
        max_requests=args.requests or (None if args.window is not None else 1000),
        window_s=args.window,
        start_s=args.start,
        time_scale=args.time_scale,
        variants=parse_variants(args.evictors, args.matchers, args.flatten),
        sim=sim,
        device=args.device,
        out=args.out,
    )
    return spec


def run(args: argparse.Namespace) -> int:
    """Run the comparison; exit 0 if equivalent, 1 if variants diverged."""
    spec = spec_from_args(args)
    outcome = run_compare(spec, progress=False if args.no_progress else None)
    _print_summary(outcome.report, outcome.equivalence)
    print(f"\nwall time {outcome.wall_s:.1f} s; report: {outcome.run_dir / 'report.md'}")
    return 0 if outcome.equivalence["ok"] else 1


def _print_summary(report: dict, eq: dict) -> None:
    ops: pd.DataFrame = report["op_summary"]
    keep = ops[ops["op"].isin(["match_prefix", "insert", "evict", "build_extend"])]
    cols = ["op", "variant", "count", "p50_ns", "p99_ns", "total_ms"]
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(keep[cols].to_string(index=False))
        print()
        print(report["variant_summary"].to_string(index=False))
        if len(report["speedups"]):
            print()
            print(report["speedups"].to_string(index=False))
    if eq["ok"]:
        print(
            f"\nequivalence: OK — all {len(eq['variants'])} variants saw identical prefix hits "
            f"for all {eq['n_requests']} requests"
        )
    else:
        d = eq["first_diff"]
        print(f"\nequivalence: DIVERGED — first differing request rid={d['rid']}: {d['values']}")
