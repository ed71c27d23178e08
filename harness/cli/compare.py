"""``radixbench compare [SCENARIO]``: one scenario, several cache algorithm variants, one report.

SCENARIO is a scenario TOML file or a bundled scenario name (``radixbench scenarios`` lists
them; default ``shared-prefix-serving``). Flags given explicitly override the scenario's values
(:mod:`~radixbench.harness.cli.scenario_args`). Argument parsing and printing only: the run is
:func:`radixbench.harness.experiments.compare.run_compare`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from radixbench.harness.cli.hicache_args import hicache_flag
from radixbench.harness.cli.scenario_args import add_scenario_arguments, scenario_from_args
from radixbench.harness.cli.tables import text_table
from radixbench.harness.cli.util import DefaultsFormatter, UsageError

if TYPE_CHECKING:  # pandas, torch: imported once the arguments are parsed and checked
    import pandas as pd

    from radixbench.harness.experiments.compare import CompareOutcome, CompareSpec
    from radixbench.reports.record import RunMeta
    from radixbench.sim.config import Variant


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``compare`` to the subcommands."""
    c = sub.add_parser(
        "compare",
        help="run one scenario under several cache algorithm variants",
        formatter_class=DefaultsFormatter,
    )
    c.set_defaults(func=run)
    add_compare_arguments(c)


def add_compare_arguments(c: argparse.ArgumentParser) -> None:
    """Add every argument of ``compare`` to ``c``: the scenario arguments
    (:func:`~radixbench.harness.cli.scenario_args.add_scenario_arguments`, with ``--baseline``),
    ``--device``, ``--out`` and ``--no-progress``; shared with ``profile``. Read them back with
    :func:`spec_from_args`."""
    add_scenario_arguments(c, simulation=True, baseline=True)
    c.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="where the KV pool and batch tensors live (auto: cuda when present)",
    )
    c.add_argument("--out", type=Path, default=Path("runs"), help="parent of run folders")
    c.add_argument(
        "--kv-events",
        type=Path,
        metavar="FILE",
        help="write every variant's KV events (BlockStored / BlockRemoved / AllBlocksCleared) "
        "to FILE, one JSON line per published batch with variant, instance and simulated time",
    )
    c.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (on a terminal) nor progress line every 10 s (in a log)",
    )
    c.add_argument(
        "--summary-only",
        action="store_true",
        help="print only the summary block (a PR comment's worth: ops, ratios, CIs, "
        "equivalence, machine, the command to reproduce); the run folder is written as usual",
    )
    c.add_argument(
        "--no-aa",
        action="store_true",
        help="skip the A/A replica of the baseline variant (no noise floor: verdicts then "
        "only have to clear 3%% either side of 1)",
    )
    c.add_argument(
        "--expect-divergence",
        action="store_true",
        help="the variants are expected to hit differently (a policy patch): report the "
        "behaviour change (hit-rate and TTFT deltas with CIs) and exit 0; when none diverged, "
        "say so and exit 0 too",
    )


def spec_from_args(args: argparse.Namespace) -> CompareSpec:
    """The :class:`CompareSpec` the arguments of :func:`add_compare_arguments` describe.

    Raises :class:`UsageError` / :class:`ValueError` (one line) on bad input.
    """
    scenario = scenario_from_args(args)
    kv_events = getattr(args, "kv_events", None)
    if kv_events is not None and scenario.sim.hicache is not None:
        # the rule of harness.config.cluster_table.check_cluster: HiCache emits no events
        on = hicache_flag(args) or f"{scenario.file}: [cache.hicache]"
        raise UsageError(
            f"--kv-events with {on}: HiCache emits no KV events yet; leave out one of them"
        )
    from radixbench.harness.experiments.compare import CompareSpec

    return CompareSpec(
        scenario=scenario,
        on_bad_line=args.on_bad_line,
        device=args.device,
        out=args.out,
        baseline=parse_baseline(getattr(args, "baseline", None), scenario.variants),
        aa=not getattr(args, "no_aa", False),
        expect_divergence=getattr(args, "expect_divergence", False),
        command_line=tuple(getattr(args, "command_line", ())),
        kv_events=kv_events,
    )


#: Axes ``--baseline`` can name.
_BASELINE_AXES = ("impl", "evictor", "matcher", "flatten", "router")


def parse_baseline(text: str | None, variants: Sequence[Variant]) -> dict[str, str] | None:
    """``--baseline``: comma list of ``AXIS=VALUE`` or bare ``VALUE`` (its axis found among the
    run's variants' axes) -> ``{axis: value}``; None for no text. Raises :class:`UsageError`
    (one line) for an unknown axis or a value no variant of the run has on that axis."""
    if not text:
        return None
    have: dict[str, set[str]] = {a: set() for a in _BASELINE_AXES}
    for v in variants:
        for axis, value in v.axes().items():
            if axis in have and value is not None:
                have[axis].add(value)
    out: dict[str, str] = {}
    names = ", ".join(_BASELINE_AXES)
    for item in filter(None, (t.strip() for t in text.split(","))):
        axis, sep, value = item.partition("=")
        if not sep:
            axis, value = "", item
            axes = [a for a, vals in have.items() if value in vals]
            if not axes:
                known = sorted(set().union(*have.values()))
                raise UsageError(
                    f"--baseline: {value!r} is no {names} value of this run's variants "
                    f"({', '.join(known)})"
                )
            axis = axes[0]
        if axis not in have:
            raise UsageError(f"--baseline: unknown axis {axis!r} ({names})")
        if value not in have[axis]:
            raise UsageError(
                f"--baseline: {axis} {value!r} is not run (this run's {axis} values: "
                f"{', '.join(sorted(have[axis])) or 'none'})"
            )
        out[axis] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Run the comparison; exit 0 if equivalent (or clock coupled, or a divergence was
    expected: ``--expect-divergence``), 1 if variants diverged."""
    spec = spec_from_args(args)
    from radixbench.harness.experiments.compare import run_compare

    summary_only = getattr(args, "summary_only", False)

    def answered(so_far: CompareOutcome) -> None:
        # printed once the tables are written, before the plots are drawn
        if summary_only:
            print("\n".join(so_far.report["summary"]))
            _print_expectation(spec, so_far.equivalence)
            return
        _print_summary(so_far.report, so_far.equivalence, so_far.meta)
        _print_metrics(so_far.metrics)
        _print_answer(so_far.report)
        if spec.sim.clock == "coupled":
            # Measured CPU time feeds back into the schedule: variants may legitimately diverge.
            print("clock coupled: schedules depend on measured CPU time; equivalence not required")
        else:
            _print_expectation(spec, so_far.equivalence)
        sys.stdout.flush()

    outcome = run_compare(spec, progress=False if args.no_progress else None, on_answer=answered)
    if spec.scenario.cluster is not None:
        _print_cluster(outcome)
        return _status(spec, outcome.equivalence)
    if not summary_only:
        # report.md's "wall time" is meta["wall_s"] (up to the report); print that same value
        wall = outcome.meta.wall_s if outcome.meta.wall_s is not None else outcome.wall_s
        print(
            f"\nwall time {wall:.1f} s (+ {outcome.wall_s - wall:.1f} s writing the report); "
            f"report: {outcome.run_dir / 'report.md'}"
        )
    return _status(spec, outcome.equivalence)


def _print_expectation(spec: CompareSpec, eq: dict) -> None:
    """What ``--expect-divergence`` met: the behaviour change, or none (the exit status is 0
    either way, README "Exit status"; the line says which)."""
    if not spec.expect_divergence or spec.sim.clock == "coupled":
        return
    if not eq["ok"]:
        print("--expect-divergence: the behaviour change is reported above; exit status 0")
        return
    print(
        f"--expect-divergence: no divergence: all {len(eq['variants'])} variants saw identical "
        f"prefix hits for all {eq['n_requests']} requests, so the change did not alter cache "
        "behaviour on this workload; exit status 0"
    )


def _status(spec: CompareSpec, equivalence: dict) -> int:
    """0 if the variants were equivalent (in a cluster: within each router), a divergence was
    allowed (the check's ``exempt``: coupled clock or router time) or expected; else 1."""
    if spec.sim.clock == "coupled" or spec.expect_divergence or equivalence.get("exempt"):
        return 0
    return 0 if equivalence["ok"] else 1


def _print_cluster(outcome: CompareOutcome) -> None:
    """A cluster run's router table, the equivalence (within each router: routers legitimately
    differ in prefix hits) and the answer."""
    report = outcome.report
    cols = [
        "router", "ttft_p50_s", "ttft_p90_s", "tpot_mean_s", "output_throughput",
        "prefix_hit_rate", "load_imbalance", "route_p50_us", "route_p99_us",
        "overloaded_instances",
    ]  # fmt: skip
    routers = report["routers"]
    # each row named as the reports name it: "cache-aware, 8 gateways" beside "..., 1 gateway"
    print(text_table(routers.assign(router=routers["label"]), cols))
    print(f"\nscenario: {outcome.meta.scenario}")
    ceil = outcome.meta.hit_rate_ceiling or {}
    best = float(routers["prefix_hit_rate"].max()) if len(routers) else float("nan")
    print(
        f"prefix hit rate: best router {best:.3f} | infinite-cache ceiling "
        f"{ceil.get('all', float('nan')):.3f} (last half {ceil.get('last_half', float('nan')):.3f})"
    )
    if outcome.meta.extra.get("kv_events_file"):
        print(f"KV events: {outcome.meta.extra['kv_events_file']}")
    wall = outcome.meta.wall_s if outcome.meta.wall_s is not None else outcome.wall_s
    print(f"\nwall time {wall:.1f} s; report: {outcome.run_dir / 'report.md'}")
    from radixbench.reports.equivalence import equivalence_line

    print(equivalence_line(outcome.equivalence))
    _print_answer(report)


def _print_answer(report: dict) -> None:
    """The report's answer, last: overload flags and load, one headline line per compared
    axis, the serving effect (:func:`radixbench.reports.headline.answer`)."""
    ans = report.get("answer")
    if ans is None:
        return
    print("\nanswer:")
    for line in ans.lines:
        print(f"  {line}")


def _print_summary(report: dict, eq: dict, meta: RunMeta | None = None) -> None:
    from radixbench.reports.axes import AXES

    ops = report["op_summary"]
    keep = ops[ops["op"].isin(["match_prefix", "insert", "evict", "build_extend"])]
    print(text_table(keep, ["op", "variant", "count", "p50_ns", "p99_ns", "total_ms"]))
    print()
    summary = report["variant_summary"]
    print(text_table(summary, [c for c in summary.columns if c not in AXES]))
    if len(report["speedups"]):
        print()
        print(text_table(report["speedups"]))
    if meta is not None:
        achieved = report["variant_summary"]["prefix_hit_rate"]
        ceil = meta.hit_rate_ceiling or {}
        a = float(achieved.median()) if len(achieved) else float("nan")
        covered = f" over the {ceil['requests']:,} finished requests" if "requests" in ceil else ""
        if ceil.get("rejected"):
            covered += f" ({ceil['rejected']:,} rejected, left out of both)"
        print(
            f"\nscenario: {meta.scenario}\nprefix hit rate: achieved {a:.3f} | "
            f"infinite-cache ceiling {ceil.get('all', float('nan')):.3f} (last half "
            f"{ceil.get('last_half', float('nan')):.3f}){covered}"
        )
        belady = meta.hit_rate_belady
        if isinstance(belady, dict) and isinstance(belady.get("all"), float):
            print(
                f"Belady bound (optimal eviction) at {belady.get('kv_capacity_tokens', 0):,} KV "
                f"tokens: {belady['all']:.3f} over the same requests"
            )
        if meta.cost_model:  # what the simulated step times come from
            from radixbench.reports.runmeta import cost_source_text

            src = f" — {cost_source_text(meta.cost_source)}" if meta.cost_source else ""
            print(f"step times: {meta.cost_model}{src}")
        print(f"skipped malformed trace lines: {meta.skipped_lines}")
        for err in meta.skipped_line_errors[:3]:
            print(f"  {err}")
        impls = meta.implementations
        if any(e["spec"] != "radixbench" for e in impls):
            print("implementations (files sha256 in the report):")
            for e in impls:
                core = f", {e['tree_core']} tree core" if e.get("tree_core") else ""
                print(f"  {e['impl']}: {e['version']} at {e['origin']} ({e['class']}{core})")
    from radixbench.reports.equivalence import equivalence_line

    print(f"\n{equivalence_line(eq)}")


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
    print(f"\nserving metrics (simulated; clock {clock}): request_throughput in req/s, "
          "output_throughput in tok/s")  # fmt: skip
    print(text_table(metrics, _METRIC_COLS))
