"""``radixbench bench cache|alloc|sim``: microbenchmarks of matchers, evictors, insert, the KV
allocators and the simulator itself.

``bench cache`` prints the tables and the ratios against the issue's targets, writes
``bench_cache.csv``, ``bench_alloc.csv`` and two plots into ``--out``, and with ``--markdown
FILE`` writes the whole report (machine details and the KV-allocator section of ``bench alloc``
included) atomically to ``FILE`` (``make bench`` regenerates ``BENCHMARKS.md`` this way).
``bench alloc`` runs only the KV-allocator benchmark (radixbench's allocators against sglang's)
and prints (``--markdown``: writes) its section with the machine details. ``bench sim`` times the
simulator and prints each figure as it comes (``--markdown``: its section of the file).
Argument parsing and printing only: the benchmarks are :mod:`radixbench.bench`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from radixbench.harness.cli.util import UsageError, csv_list, positive_int

# The benchmarks (torch, pandas, matplotlib) are imported when the command runs.


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``bench`` to the subcommands (``bench sim``'s options in a group of their own)."""
    from radixbench.bench.sim import DEFAULT_VARIANT

    b = sub.add_parser("bench", help="microbenchmarks of cache algorithm variants")
    b.set_defaults(func=run)
    b.add_argument("target", choices=["cache", "alloc", "sim", "cluster"], help="what to benchmark")
    b.add_argument("--quick", action="store_true", help="small sizes: a smoke test (seconds)")
    b.add_argument("--reps", type=positive_int, help="interleaved repetitions per point")
    b.add_argument("--out", type=Path, default=Path("runs/bench"), help="folder for csv/plots")
    b.add_argument("--markdown", type=Path, metavar="FILE", help="also write the report here")
    g = b.add_argument_group("bench sim")
    g.add_argument("--requests", type=positive_int, help="sim: first N trace requests (all)")
    g.add_argument("--variant", default=DEFAULT_VARIANT, help="sim: evictor/matcher/flatten")
    g.add_argument("--demo-run", type=Path, help="sim: time the report of this run folder")
    g.add_argument(
        "--demo-requests",
        type=positive_int,
        help="sim: demo run size (default: the default scenario's own, as make demo)",
    )
    g.add_argument(
        "--trace-reps",
        type=positive_int,
        help="sim: whole-trace runs, each in a fresh process; the best is reported (3)",
    )
    g.add_argument("--help-reps", type=positive_int, default=3, help="sim: --help timings (3)")
    g.add_argument("--startup-reps", type=positive_int, default=3, help="sim: start-up timings (3)")
    g.add_argument(
        "--skip",
        default="",
        help="sim: comma list of figures to leave out: trace, startup, help, report",
    )
    c = b.add_argument_group("bench cluster (also takes --requests)")
    c.add_argument(
        "--instances",
        type=csv_list,
        default=["1", "2", "4", "8"],
        metavar="N[,N...]",
        help="cluster: instance counts, each a run of the whole trace (1,2,4,8)",
    )
    c.add_argument("--router", default="cache-aware", help="cluster: the routing policy")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args.target`` names; exit 0 (``bench sim``: 1 when a run failed, 2
    on an unknown ``--skip`` figure)."""
    if args.target == "sim":
        return _run_sim(args)
    if args.target == "cluster":
        return _run_cluster(args)
    if args.target == "alloc":
        return _run_alloc(args)
    return _run_cache(args)


def _alloc_section(args: argparse.Namespace) -> str:
    """``bench alloc`` (quick with ``--quick``, ``--reps`` rounds) into ``--out``; its section."""
    from radixbench.bench.alloc import AllocBenchSpec, write_alloc_section

    spec = AllocBenchSpec.quick() if args.quick else AllocBenchSpec()
    if args.reps:
        spec = dataclasses.replace(spec, rounds=args.reps)
    return write_alloc_section(spec, args.out)


def _run_alloc(args: argparse.Namespace) -> int:
    from radixbench.bench.alloc import alloc_document
    from radixbench.bench.benchmarks_md import write_document
    from radixbench.harness.experiments.rundir import environment

    section = _alloc_section(args)
    cmd = "radixbench bench alloc" + (" --quick" if args.quick else "")
    text = alloc_document(section, cmd, environment())
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
    df = run_cache_bench(spec, args.out)
    alloc_md = _alloc_section(args)
    cmd = "make bench" if not args.quick else "radixbench bench cache --quick"
    text = report(df.replace({np.nan: None}), environment(), cmd, alloc_md)
    print(text)
    if args.markdown:
        write_document(args.markdown, text + "\n")
    return 0


def _run_sim(args: argparse.Namespace) -> int:
    """``radixbench bench sim``: measure, print each figure as it comes, and with
    ``--markdown`` record them."""
    from radixbench.bench import sim
    from radixbench.bench.benchmarks_md import markdown, write_section
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
        print(f"start-up to first simulated event: {sim.best_of(b.startup_s)}", flush=True)
    if "help" not in skip:
        b.help_s = sim.time_help(1 if quick else args.help_reps)
        print(f"radixbench --help: {sim.best_of(b.help_s)}", flush=True)
    if "report" not in skip:
        demo = 100 if quick and args.demo_requests is None else args.demo_requests
        b.report_s, b.report_requests = sim.time_report(args.demo_run, demo)
        print(f"report writing: {b.report_s:.2f} s wall", flush=True)
    print()
    print("\n".join(sim.lines(b)))
    if args.markdown:
        cmd = "make bench-sim" if not quick else "radixbench bench sim --quick"
        write_section(args.markdown, markdown(b, cmd))
        print(f"wrote the Simulator speed section of {args.markdown}")
    return 0


def _run_cluster(args: argparse.Namespace) -> int:
    """``bench cluster``: the whole trace on one server, then on N servers behind a router."""
    from radixbench.bench.cluster import run_cluster_bench
    from radixbench.cluster.routers import ROUTERS

    if args.router not in ROUTERS:
        raise UsageError(f"--router: unknown router {args.router!r}; known: {', '.join(ROUTERS)}")
    try:
        counts = [int(x) for x in args.instances]
    except ValueError:
        raise UsageError(f"--instances: expected counts, got {','.join(args.instances)}") from None
    if not counts or min(counts) < 1:
        raise UsageError(f"--instances: counts must be >= 1, got {','.join(args.instances)}")
    result = run_cluster_bench(args.requests, counts, args.router)
    print(result.table())
    return 0
