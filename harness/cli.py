"""The ``radixbench`` command line.

Every error a user can cause ends in one line on stderr (``radixbench: error: ...``) and exit
status 2 — never a traceback; a failed run leaves no run folder behind.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pandas as pd

from radixbench.cache.evictor import EVICTORS
from radixbench.cache.matcher import MATCHERS
from radixbench.cache.policy import POLICIES
from radixbench.harness.compare import CompareSpec, parse_variants, run_compare
from radixbench.sim.config import FLATTENERS_NAMES, SimConfig

_DEFAULTS = SimConfig()


class UsageError(Exception):
    """Bad command-line input; reported in one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _csv(text: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="radixbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    c = sub.add_parser("compare", help="run one trace under several cache algorithm variants")
    c.add_argument("--trace", type=Path, help="Mooncake JSONL trace (default: bundled)")
    sel = c.add_mutually_exclusive_group()
    sel.add_argument("--requests", type=_positive_int, default=None,
                     help="first N requests (default 1000 unless --window is given)")
    sel.add_argument("--window", type=_positive_float, metavar="SECONDS",
                     help="requests arriving in [--start, --start + SECONDS)")
    c.add_argument("--start", type=float, default=0.0, metavar="SECONDS")
    c.add_argument("--time-scale", type=_positive_float, default=1.0,
                   help="multiply arrival times (2 = half the request rate)")
    c.add_argument("--evictors", type=_csv, default=["heapify", "persistent-heap"],
                   help=f"comma list of {', '.join(EVICTORS)}")
    c.add_argument("--matchers", type=_csv, default=["linear", "galloping"],
                   help=f"comma list of {', '.join(MATCHERS)}")
    c.add_argument("--flatten", type=_csv, default=["chain"],
                   help=f"batch-builder flatten variants: {', '.join(FLATTENERS_NAMES)}")
    c.add_argument("--policy", default="lru", choices=sorted(POLICIES))
    c.add_argument("--kv-capacity", type=_positive_int, default=_DEFAULTS.kv_capacity_tokens,
                   metavar="TOKENS", help="KV pool size in tokens")
    c.add_argument("--max-running", type=_positive_int, default=_DEFAULTS.max_running)
    c.add_argument("--max-prefill-tokens", type=_positive_int,
                   default=_DEFAULTS.max_prefill_tokens)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    c.add_argument("--out", type=Path, default=Path("runs"), help="parent of run folders")
    c.add_argument("--no-progress", action="store_true")
    return parser


def _cmd_compare(args: argparse.Namespace) -> int:
    if args.trace is not None and not args.trace.is_file():
        raise UsageError(f"--trace: no such file: {args.trace}")
    sim = SimConfig(kv_capacity_tokens=args.kv_capacity, max_running=args.max_running,
                    max_prefill_tokens=args.max_prefill_tokens, policy=args.policy,
                    seed=args.seed)
    spec = CompareSpec(
        trace=args.trace,
        max_requests=args.requests or (None if args.window is not None else 1000),
        window_s=args.window, start_s=args.start, time_scale=args.time_scale,
        variants=parse_variants(args.evictors, args.matchers, args.flatten), sim=sim,
        device=args.device, out=args.out,
    )
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
        print(f"\nequivalence: OK — all {len(eq['variants'])} variants saw identical prefix hits "
              f"for all {eq['n_requests']} requests")
    else:
        d = eq["first_diff"]
        print(f"\nequivalence: DIVERGED — first differing request rid={d['rid']}: {d['values']}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``radixbench`` console script; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        if args.command == "compare":
            return _cmd_compare(args)
        raise UsageError(f"unknown command {args.command!r}")
    except UsageError as e:
        print(f"radixbench: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"radixbench: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("radixbench: interrupted; no run folder was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
