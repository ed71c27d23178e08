"""``radixbench replay [SCENARIO]``: each eviction policy's prefix hit rate on a trace, beside
LRU, Belady's bound and the infinite-cache ceiling — a sequential cache replay, no scheduler.

SCENARIO is a scenario TOML file or a bundled scenario name, as for ``compare`` (default: the
same as ``compare``'s); its workload, selection, KV capacity and page size are used
(``--all`` replays every request of the trace). Request by request in arrival order, one real
``RadixCache`` per policy: match the prompt (all but its last token), evict the shortfall of free
KV slots, insert the prompt and the output tokens as the simulator does (``--prompts-only``
leaves the outputs out). Belady's bound is optimal offline eviction in this same model at the
same capacity, at page granularity (``radixbench.sim.belady``).

Counting vs block-level simulators: here tokens (pages) over the whole selection; a prompt's
partial last hash block is cached and hit token by token, a hit is capped at ``input - 1``
tokens; block-level simulators count whole blocks only (a partial last block is never cached nor
hit) and often replay a time window from a cold cache. The report states both ceilings.

Writes ``replay.md``, ``summary.{parquet,csv}``, ``requests.{parquet,csv}`` and
``config.json`` into a new run folder under ``--out`` (atomically) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from radixbench.cache.policy import POLICIES
from radixbench.harness.cli.util import UsageError, csv_list, positive_float, positive_int
from radixbench.harness.config.scenario import DEFAULT_SCENARIO, load_scenario, parse_override
from radixbench.harness.experiments.compare import CompareSpec, load_requests
from radixbench.harness.experiments.rundir import AtomicRunDir, environment
from radixbench.reports.replay import text_table, write_replay_report
from radixbench.sim.replay import replay
from radixbench.workloads.trace import BAD_LINE_POLICIES

HELP = "hit rate of every eviction policy on a trace vs LRU, Belady's bound and the ceiling"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``replay`` to the subcommands."""
    c = sub.add_parser("replay", help=HELP, description=HELP[:1].upper() + HELP[1:] + ".")
    c.set_defaults(func=run)
    c.add_argument(
        "scenario",
        nargs="?",
        default=DEFAULT_SCENARIO,
        help=f"scenario TOML file or bundled name (default {DEFAULT_SCENARIO})",
    )
    c.add_argument("--trace", type=Path, help="trace file replacing the scenario's workload.path")
    sel = c.add_mutually_exclusive_group()
    sel.add_argument("--requests", type=positive_int, help="first N requests")
    sel.add_argument(
        "--window",
        type=positive_float,
        metavar="SECONDS",
        help="requests arriving in [--start, --start + SECONDS)",
    )
    sel.add_argument(
        "--all",
        action="store_true",
        help="every request of the trace (drops the scenario's request count and window)",
    )
    c.add_argument("--start", type=float, metavar="SECONDS", help="start of the selection (s)")
    c.add_argument(
        "--policies",
        type=csv_list,
        metavar="NAME[,NAME...]",
        help=f"eviction policies to replay (default all: {', '.join(POLICIES)})",
    )
    c.add_argument(
        "--kv-capacity",
        type=positive_int,
        metavar="TOKENS",
        help="KV pool (tokens; default the scenario's)",
    )
    c.add_argument(
        "--page-size",
        type=positive_int,
        metavar="TOKENS",
        help="tokens per KV page, a power of two (default the scenario's)",
    )
    c.add_argument(
        "--prompts-only",
        action="store_true",
        help="insert prompts only (default: prompt + output tokens, as the simulator)",
    )
    c.add_argument("--seed", type=int, help="seed of generated workloads and arrival times")
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
    c.add_argument("--out", type=Path, default=Path("runs"), help="parent of run folders")
    c.add_argument("--no-progress", action="store_true", help="no progress bar")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.trace is not None:
        if not args.trace.is_file():
            raise UsageError(f"--trace: no such file: {args.trace}")
        out["workload.path"] = str(args.trace.resolve())
    if args.requests is not None:
        out["arrivals.max_requests"] = args.requests
    if args.window is not None:
        out["arrivals.window_s"] = args.window
        out["arrivals.max_requests"] = None
    if args.all:
        out["arrivals.max_requests"] = None
        out["arrivals.window_s"] = None
    if args.start is not None:
        out["arrivals.start_s"] = args.start
    if args.kv_capacity is not None:
        out["sim.kv_capacity_tokens"] = args.kv_capacity
        out["sim.gpu_mem_gb"] = None  # an explicit capacity wins
    if args.page_size is not None:
        out["sim.page_size"] = args.page_size
    if args.seed is not None:
        out["seed"] = args.seed
    for text in args.set:
        try:
            key, value = parse_override(text)
        except ValueError as e:
            raise UsageError(str(e)) from None
        out[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Replay, write the run folder, print the table; exit 0 (2 on bad input)."""
    started = time.perf_counter()
    policies = args.policies or list(POLICIES)
    bad = [p for p in policies if p not in POLICIES]
    if bad:
        raise UsageError(f"--policies: unknown policy {bad[0]!r}; known: {', '.join(POLICIES)}")
    if len(set(policies)) != len(policies):
        raise UsageError(f"--policies: a policy is listed twice: {','.join(policies)}")
    scenario = load_scenario(args.scenario, _overrides(args))
    workload = load_requests(CompareSpec(scenario=scenario, on_bad_line=args.on_bad_line))
    reqs = workload.requests
    cap, page = scenario.sim.kv_capacity_tokens, scenario.sim.page_size
    with tqdm(
        total=len(reqs),
        unit="req",
        desc="replay",
        disable=True if args.no_progress else None,
    ) as bar:
        result = replay(
            reqs,
            cap,
            page,
            policies,
            include_outputs=not args.prompts_only,
            on_request=lambda: bar.update(1),
        )
    meta: dict[str, Any] = {
        "command": "replay",
        "scenario": workload.label,
        "requests": len(reqs),
        "input_tokens": int(result.requests["input_len"].sum()),
        "skipped_lines": len(workload.skipped),
        "kv_capacity_tokens": cap,
        "page_size": page,
        "include_outputs": not args.prompts_only,
        "policies": policies,
        "evictor": "persistent-heap",
        "matcher": "memcmp",
        "block_ceiling": result.block_ceiling,
        "tokens_s": round(result.tokens_s, 2),
        "seed": scenario.seed,
        "environment": environment(),
    }
    with AtomicRunDir(args.out, time.strftime("replay-%Y%m%d-%H%M%S")) as run_dir:
        meta["wall_s"] = round(time.perf_counter() - started, 2)
        summary = result.summary
        (run_dir.tmp / "config.json").write_text(json.dumps(meta, indent=2, default=str))
        write_replay_report(run_dir.tmp, summary, result.requests, meta)
    assert run_dir.final is not None
    print(text_table(summary, meta))
    if workload.skipped:
        print(f"skipped malformed trace lines: {len(workload.skipped)}")
    print(f"report: {run_dir.final / 'replay.md'}")
    return 0
