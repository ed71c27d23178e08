"""``radixbench compare [SCENARIO]``: one scenario, several cache algorithm variants, one report.

SCENARIO is a scenario TOML file or a bundled scenario name (``radixbench scenarios`` lists
them; default ``mooncake-conversation``). Flags given explicitly override the scenario's values.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.cache.evictor import EVICTORS
from radixbench.cache.matcher import MATCHERS
from radixbench.cache.policy import POLICIES
from radixbench.harness.cli.util import UsageError, csv_list, positive_float, positive_int
from radixbench.harness.config.impl import IMPL_HELP, impl_arg
from radixbench.harness.config.scenario import DEFAULT_SCENARIO, load_scenario, parse_override
from radixbench.harness.experiments.compare import CompareSpec, run_compare
from radixbench.sim.config import CLOCKS, FLATTENERS_NAMES, Variant
from radixbench.sim.cost import preset_names
from radixbench.sim.sched_policy import SCHED_POLICIES
from radixbench.workloads.trace import BAD_LINE_POLICIES

# flag dest -> scenario key it overrides ("sim." = whichever of [cache]/[scheduler] has it)
_OVERRIDES = {
    "requests": "arrivals.max_requests",
    "window": "arrivals.window_s",
    "start": "arrivals.start_s",
    "time_scale": "arrivals.time_scale",
    "rate_scale": "arrivals.rate_scale",
    "evictors": "variants.evictors",
    "matchers": "variants.matchers",
    "flatten": "variants.flatten",
    "impls": "variants.impls",
    "policy": "sim.policy",
    "kv_capacity": "sim.kv_capacity_tokens",
    "page_size": "sim.page_size",
    "max_running": "sim.max_running",
    "max_prefill_tokens": "sim.max_prefill_tokens",
    "chunked_prefill_size": "sim.chunked_prefill_size",
    "sched_policy": "sim.sched_policy",
    "clock": "sim.clock",
    "gpu_mem_gb": "sim.gpu_mem_gb",
    "cost_model": "cost.model",
    "seed": "seed",
}


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``compare`` to the subcommands."""
    c = sub.add_parser("compare", help="run one scenario under several cache algorithm variants")
    c.set_defaults(func=run)
    add_compare_arguments(c)


def add_compare_arguments(c: argparse.ArgumentParser) -> None:
    """Add every argument of ``compare`` (the scenario and its overrides) to ``c``; shared with
    ``profile``. Read them back with :func:`spec_from_args`."""
    c.add_argument(
        "scenario",
        nargs="?",
        default=DEFAULT_SCENARIO,
        help=f"scenario TOML file or bundled name (default {DEFAULT_SCENARIO})",
    )
    c.add_argument(
        "--trace",
        type=Path,
        help="trace file replacing the scenario's workload, replayed at its own timestamps: "
        "Mooncake JSONL, Azure 2023 CSV or the generic JSONL/CSV (format detected)",
    )
    sel = c.add_mutually_exclusive_group()
    sel.add_argument("--requests", type=positive_int, help="first N requests")
    sel.add_argument(
        "--window",
        type=positive_float,
        metavar="SECONDS",
        help="requests arriving in [--start, --start + SECONDS)",
    )
    c.add_argument(
        "--start",
        type=float,
        metavar="SECONDS",
        help="skip requests arriving before SECONDS after the first one (default 0)",
    )
    c.add_argument(
        "--time-scale", type=positive_float, help="multiply arrival times (2 = half the rate)"
    )
    c.add_argument("--rate-scale", type=positive_float, help="multiply the request rate")
    c.add_argument("--evictors", type=csv_list, help=f"comma list of {', '.join(EVICTORS)}")
    c.add_argument("--matchers", type=csv_list, help=f"comma list of {', '.join(MATCHERS)}")
    c.add_argument(
        "--flatten", type=csv_list, help=f"batch-builder flattens: {', '.join(FLATTENERS_NAMES)}"
    )
    c.add_argument("--impl", dest="impls", type=impl_arg, metavar="SPEC[,SPEC...]", help=IMPL_HELP)
    c.add_argument(
        "--baseline",
        metavar="[AXIS=]VALUE[,...]",
        help="what each axis's verdicts compare against, e.g. heapify or evictor=heapify,"
        "matcher=linear (default: the first evictor / matcher / flatten listed)",
    )
    c.add_argument(
        "--policy",
        choices=sorted(POLICIES),
        help="radix cache eviction order (SGLang --radix-eviction-policy; default lru)",
    )
    c.add_argument("--kv-capacity", type=positive_int, metavar="TOKENS", help="KV pool (tokens)")
    c.add_argument(
        "--page-size",
        type=positive_int,
        metavar="TOKENS",
        help="tokens per KV page, a power of two (SGLang --page-size; default 1)",
    )
    c.add_argument(
        "--max-running",
        type=positive_int,
        metavar="N",
        help="most requests running at once (SGLang --max-running-requests)",
    )
    c.add_argument(
        "--max-prefill-tokens",
        type=positive_int,
        metavar="TOKENS",
        help="token budget of one prefill batch (SGLang --max-prefill-tokens)",
    )
    c.add_argument(
        "--seed", type=int, help="seed of every random draw (workload, arrivals); default 0"
    )
    c.add_argument(
        "--on-bad-line",
        choices=BAD_LINE_POLICIES,
        help="malformed trace line: stop with file:line (error) or skip and count it",
    )
    c.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set workload.groups=4 (TOML value)",
    )
    c.add_argument(
        "--chunked-prefill-size",
        type=int,
        metavar="TOKENS",
        help="tokens per prefill chunk; -1 disables chunking",
    )
    c.add_argument(
        "--sched-policy",
        choices=list(SCHED_POLICIES),
        help="waiting-queue order (SGLang --schedule-policy)",
    )
    c.add_argument(
        "--clock",
        choices=list(CLOCKS),
        help="isolated: measured CPU time recorded only (identical schedules); coupled: added "
        "to each step's simulated time",
    )
    c.add_argument(
        "--cost-model",
        metavar="NAME|PATH.toml",
        help=f"step-time model: linear, a preset ({', '.join(preset_names())}) or a TOML file",
    )
    c.add_argument(
        "--gpu-mem-gb",
        type=positive_float,
        metavar="GB",
        help="derive the KV pool from this memory per GPU minus weights (overrides --kv-capacity)",
    )
    c.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="where the KV pool and batch tensors live (auto: cuda when present)",
    )
    c.add_argument("--out", type=Path, default=Path("runs"), help="parent of run folders")
    c.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    chunk = args.chunked_prefill_size
    if chunk is not None and (chunk == 0 or chunk < -1):
        raise UsageError(f"--chunked-prefill-size: positive or -1, got {chunk}")
    if args.trace is not None and not args.trace.is_file():
        raise UsageError(f"--trace: no such file: {args.trace}")
    for dest, key in _OVERRIDES.items():
        value = getattr(args, dest)
        if value is not None:
            out[key] = value
    if chunk == -1:
        out["sim.chunked_prefill_size"] = None  # no chunking
    if args.window is not None:
        out["arrivals.max_requests"] = None  # a window replaces the scenario's request count
    for text in args.set:
        try:
            key, value = parse_override(text)
        except ValueError as e:
            raise UsageError(str(e)) from None
        out[key] = value
    return out


def spec_from_args(args: argparse.Namespace) -> CompareSpec:
    """The :class:`CompareSpec` the arguments of :func:`add_compare_arguments` describe.

    Raises :class:`UsageError` / :class:`ValueError` (one line) on bad input.
    """
    trace = args.trace.resolve() if args.trace is not None else None
    # errors in a value given on the command line name the option, not the scenario file
    origins = {
        k: f"--{d.replace('_', '-')}" for d, k in _OVERRIDES.items() if getattr(args, d) is not None
    }
    origins.update({t.partition("=")[0].strip(): f"--set {t}" for t in args.set})
    scenario = load_scenario(args.scenario, _overrides(args), trace=trace, origins=origins)
    return CompareSpec(
        scenario=scenario,
        on_bad_line=args.on_bad_line,
        device=args.device,
        out=args.out,
        baseline=parse_baseline(getattr(args, "baseline", None), scenario.variants),
    )


def parse_baseline(text: str | None, variants: Sequence[Variant]) -> dict[str, str] | None:
    """``--baseline``: comma list of ``AXIS=VALUE`` or bare ``VALUE`` (its axis found among the
    run's variants) -> ``{axis: value}``; None for no text. Raises :class:`UsageError` (one
    line) for an unknown axis or a value no variant of the run has on that axis."""
    if not text:
        return None
    have = {
        "evictor": {v.evictor for v in variants if v.impl == "radixbench"},
        "matcher": {v.matcher for v in variants if v.impl == "radixbench"},
        "flatten": {v.flatten for v in variants},
    }
    out: dict[str, str] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        axis, sep, value = item.partition("=")
        if not sep:
            axis, value = "", item
            axes = [a for a, vals in have.items() if value in vals]
            if not axes:
                known = sorted(set().union(*have.values()))
                raise UsageError(
                    f"--baseline: {value!r} is no evictor, matcher or flatten of this run's "
                    f"variants ({', '.join(known)})"
                )
            axis = axes[0]
        if axis not in have:
            raise UsageError(f"--baseline: unknown axis {axis!r} (evictor, matcher, flatten)")
        if value not in have[axis]:
            raise UsageError(
                f"--baseline: {axis} {value!r} is not run (this run's {axis} values: "
                f"{', '.join(sorted(have[axis])) or 'none'})"
            )
        out[axis] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Run the comparison; exit 0 if equivalent (or clock coupled), 1 if variants diverged."""
    spec = spec_from_args(args)
    outcome = run_compare(spec, progress=False if args.no_progress else None)
    _print_summary(outcome.report, outcome.equivalence, outcome.meta)
    _print_metrics(outcome.metrics)
    # report.md's "wall time" is meta["wall_s"] (up to the report); print that same value
    wall = float(outcome.meta.get("wall_s", outcome.wall_s))
    print(
        f"\nwall time {wall:.1f} s (+ {outcome.wall_s - wall:.1f} s writing the report); "
        f"report: {outcome.run_dir / 'report.md'}"
    )
    _print_answer(outcome.report)
    if spec.sim.clock == "coupled":
        # Measured CPU time feeds back into the schedule, so variants may legitimately diverge.
        print("clock coupled: schedules depend on measured CPU time; equivalence not required")
        return 0
    return 0 if outcome.equivalence["ok"] else 1


def _print_answer(report: dict) -> None:
    """The report's answer, last: overload flags and load, one headline line per compared
    axis, the serving effect (:func:`radixbench.reports.headline.answer`)."""
    ans = report.get("answer")
    if ans is None:
        return
    print("\nanswer:")
    for line in ans.lines:
        print(f"  {line}")


def _print_summary(report: dict, eq: dict, meta: dict | None = None) -> None:
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
    if meta is not None:
        achieved = report["variant_summary"]["prefix_hit_rate"]
        ceil = meta.get("hit_rate_ceiling") or {}
        a = float(achieved.median()) if len(achieved) else float("nan")
        covered = f" over the {ceil['requests']:,} finished requests" if "requests" in ceil else ""
        if ceil.get("rejected"):
            covered += f" ({ceil['rejected']:,} rejected, left out of both)"
        print(
            f"\nscenario: {meta['scenario']}\nprefix hit rate: achieved {a:.3f} | "
            f"infinite-cache ceiling {ceil.get('all', float('nan')):.3f} (last half "
            f"{ceil.get('last_half', float('nan')):.3f}){covered}"
        )
        belady = meta.get("hit_rate_belady")
        if isinstance(belady, dict) and isinstance(belady.get("all"), float):
            print(
                f"Belady bound (optimal eviction) at {belady.get('kv_capacity_tokens', 0):,} KV "
                f"tokens: {belady['all']:.3f} over the same requests"
            )
        skipped = meta["skipped_lines"]
        print(f"skipped malformed trace lines: {skipped}")
        for err in meta.get("skipped_line_errors", [])[:3]:
            print(f"  {err}")
        impls = meta.get("implementations", [])
        if any(e["spec"] != "radixbench" for e in impls):
            print("implementations (files sha256 in the report):")
            for e in impls:
                print(f"  {e['impl']}: {e['version']} at {e['origin']} ({e['class']})")
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
