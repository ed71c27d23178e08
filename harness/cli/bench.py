"""``radixbench bench cache|alloc|sim|served|cluster|cost|peers``: microbenchmarks of matchers,
evictors, insert, the KV allocators, the simulator itself, radixbench against SGLang's served
cache and (``peers``, parsed and printed by :mod:`.bench_peers`) against Dynamo's mocker.

``bench cache`` prints the tables and the ratios against the issue's targets, writes
``bench_cache.csv``, ``bench_alloc.csv`` and two plots into ``--out``, and with ``--markdown
FILE`` writes the whole report (machine details and the KV-allocator section of ``bench alloc``
included) atomically to ``FILE`` (``make bench`` regenerates ``BENCHMARKS.md`` this way).
``bench alloc`` runs only the KV-allocator benchmark (radixbench's allocators against sglang's)
and prints (``--markdown``: writes) its section with the machine details. ``bench sim`` times the
simulator and prints each figure as it comes (``--markdown``: its section of the file).
``bench cost`` sets AIC's step times against the roofline's over a grid of shapes per
preset (table, plot, ``--markdown``: its section).
``bench served`` times radixbench's evictors and matchers against sglang 0.5.23's Rust and
Python tree cores and legacy ``RadixCache`` in one process and prints one table and the status
of issue 21's targets (its rows also in ``--out``/``bench_served.csv``; ``--markdown``: its
section of the file). Every target measures the calibration figure of
:mod:`radixbench.bench.calibration` in the same run, prints it (``cache`` / ``alloc``: in their
report's Machine section) and gives its figures also as multiples of it.
Argument parsing and printing only: the benchmarks are :mod:`radixbench.bench`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from radixbench.harness.cli import bench_peers
from radixbench.harness.cli.util import (
    DefaultsFormatter,
    Parser,
    UsageError,
    csv_list,
    positive_int,
)

if TYPE_CHECKING:
    from radixbench.bench.calibration import Calibration

# The benchmarks (torch, pandas, matplotlib) are imported when the command runs.


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``bench`` to the subcommands, each benchmark a subcommand of its own with only the
    options it reads (``bench alloc --help`` lists no ``bench sim`` option)."""
    from radixbench.bench.sim import DEFAULT_VARIANT

    b = sub.add_parser("bench", help="microbenchmarks of cache algorithm variants")
    targets = b.add_subparsers(
        dest="target",
        metavar="{cache,alloc,sim,served,cluster,peers,cost}",
        required=True,
        parser_class=Parser,
    )
    fmt = DefaultsFormatter
    cache = targets.add_parser(
        "cache", formatter_class=fmt, help="matchers, evictors, insert and the KV allocators"
    )
    alloc = targets.add_parser(
        "alloc", formatter_class=fmt, help="the KV allocators: radixbench's vs sglang's"
    )
    served = targets.add_parser(
        "served",
        formatter_class=fmt,
        help="radixbench's evictors and matchers vs sglang 0.5.23's Rust core, Python core and "
        "legacy RadixCache, one process",
    )
    for p in (cache, alloc, served):
        p.set_defaults(func=run)
        p.add_argument("--quick", action="store_true", help="small sizes: a smoke test (seconds)")
        p.add_argument(
            "--reps",
            type=positive_int,
            help="interleaved repetitions per point (default: the spec's own)",
        )
        p.add_argument("--out", type=Path, default=Path("runs/bench"), help="folder for csv/plots")
        p.add_argument("--markdown", type=Path, metavar="FILE", help="also write the report here")
    g = targets.add_parser("sim", formatter_class=fmt, help="how fast the simulator itself is")
    g.set_defaults(func=run)
    g.add_argument(
        "--quick", action="store_true", help="500 requests, one run of each figure: a smoke test"
    )
    g.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="also write the Simulator speed section of FILE",
    )
    g.add_argument("--requests", type=positive_int, help="first N trace requests (default: all)")
    g.add_argument("--variant", default=DEFAULT_VARIANT, help="evictor/matcher/flatten")
    g.add_argument("--demo-run", type=Path, help="time the report of this run folder")
    g.add_argument(
        "--demo-requests",
        type=positive_int,
        help="demo run size (default: the default scenario's own, as make demo)",
    )
    g.add_argument(
        "--trace-reps",
        type=positive_int,
        help="whole-trace runs, each in a fresh process; the best is reported (default: 3)",
    )
    g.add_argument("--help-reps", type=positive_int, default=3, help="--help timings")
    g.add_argument("--startup-reps", type=positive_int, default=3, help="start-up timings")
    g.add_argument(
        "--skip",
        default="",
        help="comma list of figures to leave out: trace, startup, help, report",
    )
    c = targets.add_parser(
        "cluster",
        formatter_class=fmt,
        help="the whole trace on one server, then on N behind a router: CPU, RSS, decisions",
    )
    c.set_defaults(func=run)
    c.add_argument("--requests", type=positive_int, help="first N trace requests (default: all)")
    c.add_argument(
        "--instances",
        type=csv_list,
        default=["1", "2", "4", "8"],
        metavar="N[,N...]",
        help="instance counts, each a run of the whole trace",
    )
    c.add_argument("--router", default="cache-aware", help="the routing policy")
    bench_peers.add_parser(targets, fmt, run)

    k = targets.add_parser(
        "cost",
        formatter_class=fmt,
        help="step times: AIConfigurator's measured kernels vs the roofline, per preset, on a "
        "grid of prefill and decode shapes",
    )
    k.set_defaults(func=run)
    k.add_argument("--quick", action="store_true", help="the grid's corners only")
    k.add_argument("--presets", type=csv_list, metavar="P[,P...]", help="default: every AIC one")
    k.add_argument("--out", type=Path, default=Path("runs/bench"), help="folder for csv/plot")
    k.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="also write the Step times section of FILE (its plot into docs/ beside FILE)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args.target`` names; exit 0 (``bench sim``: 1 when a run failed, 2
    on an unknown ``--skip`` figure)."""
    if args.target == "sim":
        return _run_sim(args)
    if args.target == "cluster":
        return _run_cluster(args)
    if args.target == "peers":
        return bench_peers.run(args, _calibrate)
    if args.target == "alloc":
        return _run_alloc(args)
    if args.target == "served":
        return _run_served(args)
    if args.target == "cost":
        return _run_cost(args)
    return _run_cache(args)


def _calibrate(echo: bool = True) -> Calibration:
    """Measure the run's calibration figure; print it when ``echo`` (``bench cache`` and
    ``bench alloc`` print it in their report's Machine section instead)."""
    from radixbench.bench.calibration import calibrate

    cal = calibrate()
    if echo:
        print(cal.line(), flush=True)
    return cal


def _run_served(args: argparse.Namespace) -> int:
    """``radixbench bench served``: the table and the targets' status, printed (``--markdown``:
    also written into its section of the file)."""
    from radixbench.bench.benchmarks_md import SERVED_END, SERVED_START, write_section
    from radixbench.bench.served import ServedSpec, run_served
    from radixbench.bench.served_report import markdown, table, target_lines, write_rows
    from radixbench.harness.experiments.rundir import environment

    spec = ServedSpec.quick() if args.quick else ServedSpec()
    if args.reps:
        spec = dataclasses.replace(spec, reps=args.reps)
    env = environment()
    print(f"machine: {env.get('cpu')}, {os.cpu_count()} cores", flush=True)
    cal = _calibrate()
    rows, skipped = run_served(spec)
    write_rows(rows, args.out)
    for impl, why in skipped.items():
        print(f"not loaded: {impl}: {why}")
    print(table(rows, cal))
    print()
    print("\n".join(f"target: {t}" for t in target_lines(rows)))
    if args.markdown:
        cmd = "make bench" if not args.quick else "radixbench bench served --quick"
        write_section(
            args.markdown, markdown(rows, skipped, cal, env, cmd), SERVED_START, SERVED_END
        )
        print(f"wrote the SGLang as served section of {args.markdown}")
    return 0


def _alloc_section(args: argparse.Namespace, cal: Calibration) -> str:
    """``bench alloc`` (quick with ``--quick``, ``--reps`` rounds) into ``--out``; its section."""
    from radixbench.bench.alloc import AllocBenchSpec, write_alloc_section

    spec = AllocBenchSpec.quick() if args.quick else AllocBenchSpec()
    if args.reps:
        spec = dataclasses.replace(spec, rounds=args.reps)
    return write_alloc_section(spec, args.out, cal)


def _run_alloc(args: argparse.Namespace) -> int:
    from radixbench.bench.alloc import alloc_document
    from radixbench.bench.benchmarks_md import write_document
    from radixbench.harness.experiments.rundir import environment

    cal = _calibrate(echo=False)
    section = _alloc_section(args, cal)
    cmd = "radixbench bench alloc" + (" --quick" if args.quick else "")
    text = alloc_document(section, cmd, environment(), cal)
    print(text)
    if args.markdown:
        write_document(args.markdown, text + "\n")
    return 0


def _run_cache(args: argparse.Namespace) -> int:
    import numpy as np

    from radixbench.bench.benchmarks_md import write_document
    from radixbench.bench.cache import BenchSpec
    from radixbench.bench.cache_report import report, run_cache_bench
    from radixbench.harness.experiments.rundir import environment

    spec = BenchSpec.quick() if args.quick else BenchSpec()
    if args.reps:
        spec = dataclasses.replace(spec, reps=args.reps)
    cal = _calibrate(echo=False)
    df = run_cache_bench(spec, args.out)
    alloc_md = _alloc_section(args, cal)
    cmd = "make bench" if not args.quick else "radixbench bench cache --quick"
    text = report(df.replace({np.nan: None}), environment(), cmd, alloc_md, cal)
    print(text)
    if args.markdown:
        write_document(args.markdown, text + "\n")
    return 0


def _run_sim(args: argparse.Namespace) -> int:
    """``radixbench bench sim``: measure, print each figure as it comes, and with
    ``--markdown`` record them."""
    from radixbench.bench import sim
    from radixbench.bench.benchmarks_md import markdown, write_section
    from radixbench.harness.experiments.bench_inputs import demo_run
    from radixbench.harness.experiments.equivalence import check_equivalence
    from radixbench.harness.experiments.rundir import environment

    skip = {s.strip() for s in (args.skip or "").split(",") if s.strip()}
    unknown = skip - {"trace", "startup", "help", "report"}
    if unknown:
        print(f"error: --skip: unknown figure(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    quick = bool(getattr(args, "quick", False))
    requests = args.requests or (500 if quick else None)
    b = sim.SimBench(variant=args.variant, env=environment())
    print(f"machine: {b.env.get('cpu')}, {os.cpu_count()} cores", flush=True)
    b.cal = _calibrate()
    if "trace" not in skip:
        reps = args.trace_reps or (1 if quick else 3)
        try:
            runs = sim.time_trace_runs(requests, args.variant, reps)
        except RuntimeError as exc:
            print(f"error: bench sim: {exc}", file=sys.stderr)
            return 1
        best = min(runs, key=lambda r: r[1])
        b.requests, b.trace_cpu_s, b.trace_wall_s, b.events, b.measured_s = best
        b.trace_runs_cpu_s = [r[1] for r in runs]
        print("\n".join(sim.lines(b)[:2]), flush=True)
    if "startup" not in skip:
        b.startup_s = [sim.time_startup() for _ in range(1 if quick else args.startup_reps)]
        print(f"start-up to first simulated event: {sim.best_of(b.startup_s, b.cal)}", flush=True)
    if "help" not in skip:
        b.help_s = sim.time_help(1 if quick else args.help_reps)
        print(f"radixbench --help: {sim.best_of(b.help_s, b.cal)}", flush=True)
    if "report" not in skip:
        demo = 100 if quick and args.demo_requests is None else args.demo_requests
        b.report_s, b.report_requests, b.report_run_wall_s = sim.time_report(
            args.demo_run, demo, demo_run, check_equivalence
        )
        report = next(ln for ln in sim.lines(b) if ln.startswith("report writing"))
        print(report, flush=True)  # each figure printed once, as it comes
    if args.markdown:
        cmd = "make bench-sim" if not quick else "radixbench bench sim --quick"
        write_section(args.markdown, markdown(b, cmd))
        print(f"wrote the Simulator speed section of {args.markdown}")
    return 0


def _run_cluster(args: argparse.Namespace) -> int:
    """``bench cluster``: the whole trace on one server, then on N servers behind a router."""
    from radixbench.bench.cluster import run_cluster_bench
    from radixbench.cluster.routers import ROUTERS
    from radixbench.harness.experiments.bench_inputs import SCENARIO_REQUESTS

    if args.router not in ROUTERS:
        raise UsageError(f"--router: unknown router {args.router!r}; known: {', '.join(ROUTERS)}")
    try:
        counts = [int(x) for x in args.instances]
    except ValueError:
        raise UsageError(f"--instances: expected counts, got {','.join(args.instances)}") from None
    if not counts or min(counts) < 1:
        raise UsageError(f"--instances: counts must be >= 1, got {','.join(args.instances)}")
    result = run_cluster_bench(args.requests, counts, args.router, SCENARIO_REQUESTS)
    print(result.table())
    return 0


def _run_cost(args: argparse.Namespace) -> int:
    """``bench cost``: the grid's rows to ``--out``/bench_cost.csv, the summary table and the
    plot; ``--markdown``: its section of the file (and the plot in ``docs/`` beside it)."""
    import pandas as pd

    from radixbench.bench.benchmarks_md import COST_END, COST_START, write_section
    from radixbench.bench.cost import CostGrid, cost_rows, markdown, plot, summary, uncovered

    grid = CostGrid.quick() if args.quick else CostGrid()
    try:
        rows = cost_rows(grid, args.presets)
    except ValueError as e:
        raise UsageError(f"--presets: {e}" if args.presets else str(e)) from None
    args.out.mkdir(parents=True, exist_ok=True)
    rows.to_csv(args.out / "bench_cost.csv", index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary(rows).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"not covered by AIC (roofline): {', '.join(uncovered()) or 'none'}")
    png = plot(rows, args.out / "bench_cost.png")
    print(f"grid rows: {args.out / 'bench_cost.csv'}; plot: {png}")
    if args.markdown:
        rel = "docs/bench-cost.png"
        plot(rows, args.markdown.parent / rel)
        cmd = "radixbench bench cost" + (" --quick" if args.quick else "")
        write_section(args.markdown, markdown(rows, cmd, rel), COST_START, COST_END)
        print(f"wrote the Step times section of {args.markdown}")
    return 0
