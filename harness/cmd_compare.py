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
from radixbench.sim.config import CLOCKS, DEFAULT_COST_MODEL, FLATTENERS_NAMES, SimConfig
from radixbench.sim.cost import load_cost_model, preset_names
from radixbench.sim.sched_policy import SCHED_POLICIES

_DEFAULTS = SimConfig()


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``compare`` to the subcommands."""
    c = sub.add_parser("compare", help="run one trace under several cache algorithm variants")
    c.set_defaults(func=run)
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
    c.add_argument(
        "--chunked-prefill-size",
        type=int,
        default=_DEFAULTS.chunked_prefill_size,
        metavar="TOKENS",
        help="tokens per prefill chunk; -1 disables chunking (default %(default)s)",
    )
    c.add_argument(
        "--sched-policy",
        default=_DEFAULTS.sched_policy,
        choices=list(SCHED_POLICIES),
        help="waiting-queue order (SGLang --schedule-policy)",
    )
    c.add_argument(
        "--clock",
        default=_DEFAULTS.clock,
        choices=list(CLOCKS),
        help="isolated: measured CPU time recorded only (identical schedules); coupled: added "
        "to each step's simulated time",
    )
    c.add_argument(
        "--cost-model",
        default=DEFAULT_COST_MODEL,
        metavar="NAME|PATH.toml",
        help=f"step-time model: linear, a preset ({', '.join(preset_names())}) or a TOML file",
    )
    c.add_argument(
        "--gpu-mem-gb",
        type=positive_float,
        default=None,
        metavar="GB",
        help="derive the KV pool from this memory per GPU minus weights (overrides --kv-capacity)",
    )
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    c.add_argument("--out", type=Path, default=Path("runs"), help="parent of run folders")
    c.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Run the comparison; exit 0 if equivalent (or clock coupled), 1 if variants diverged."""
    if args.trace is not None and not args.trace.is_file():
        raise UsageError(f"--trace: no such file: {args.trace}")
    chunk = args.chunked_prefill_size
    if chunk == 0 or chunk < -1:
        raise UsageError(f"--chunked-prefill-size: positive or -1, got {chunk}")
    try:
        sim = SimConfig(
            kv_capacity_tokens=args.kv_capacity,
            max_running=args.max_running,
            max_prefill_tokens=args.max_prefill_tokens,
            chunked_prefill_size=None if chunk == -1 else chunk,
            policy=args.policy,
            sched_policy=args.sched_policy,
            clock=args.clock,
            seed=args.seed,
            gpu_mem_gb=args.gpu_mem_gb,
            cost=load_cost_model(args.cost_model),
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
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
    outcome = run_compare(spec, progress=False if args.no_progress else None)
    _print_summary(outcome.report, outcome.equivalence)
    _print_metrics(outcome.metrics)
    print(f"\nwall time {outcome.wall_s:.1f} s; report: {outcome.run_dir / 'report.md'}")
    if args.clock == "coupled":
        # Measured CPU time feeds back into the schedule, so variants may legitimately diverge.
        print("clock coupled: schedules depend on measured CPU time; equivalence not required")
        return 0
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


_METRIC_COLS = [
    "variant",
    "request_throughput",
    "output_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "prefix_hit_rate",
    "retractions",
    "mean_kv_util",
]


def _print_metrics(metrics: pd.DataFrame) -> None:
    """Serving metrics per variant (vllm bench serve names), stating the clock mode."""
    if not len(metrics):
        return
    clock = ", ".join(sorted(set(metrics["clock"])))
    print(f"\nserving metrics (simulated; clock {clock}):")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(metrics[_METRIC_COLS].round(4).to_string(index=False))
