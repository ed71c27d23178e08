"""``radixbench replay [SCENARIO]``: each eviction policy's prefix hit rate on a trace, beside
LRU, Belady's bound and the infinite-cache ceiling — a sequential cache replay, no scheduler.

SCENARIO and the workload flags are those of ``compare``
(:mod:`~radixbench.harness.cli.scenario_args`: ``--trace`` with its format detected,
``--requests``, ``--window``, ``--start``, ``--kv-capacity``, ``--page-size``, ``--seed``,
``--on-bad-line``, ``--set``...); ``--all`` replays every request of the trace, ``--policies``
picks the policies, ``--prompts-only`` leaves the outputs out. Argument parsing and printing
only: the replay is :func:`radixbench.harness.experiments.replay.run_replay`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from radixbench.harness.cli.scenario_args import add_scenario_arguments, scenario_from_args
from radixbench.harness.cli.util import UsageError, csv_list, lazy_help


def _policies() -> list[str]:
    from radixbench.cache.policy import POLICIES

    return list(POLICIES)


HELP = "hit rate of every eviction policy on a trace vs LRU, Belady's bound and the ceiling"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``replay`` to the subcommands."""
    c = sub.add_parser("replay", help=HELP, description=HELP[:1].upper() + HELP[1:] + ".")
    c.set_defaults(func=run)
    add_scenario_arguments(c, simulation=False, every=True)
    c.add_argument(
        "--policies",
        type=csv_list,
        metavar="NAME[,NAME...]",
        help=lazy_help(
            lambda: f"eviction policies to replay (default all: {', '.join(_policies())})"
        ),
    )
    c.add_argument(
        "--impl",
        metavar="SPEC[,SPEC...]",
        help="replay each policy on these cache implementations (e.g. an SGLang policy patch "
        "beside upstream: sglang-legacy,sglang-legacy:patch.py:CLASS); default radixbench's "
        "cache; with --impl the default policy is the scenario's",
    )
    c.add_argument(
        "--prompts-only",
        action="store_true",
        help="insert prompts only (default: prompt + output tokens, as the simulator)",
    )
    c.add_argument("--out", type=Path, default=Path("runs"), help="parent of run folders")
    c.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Replay, write the run folder, print the table; exit 0 (2 on bad input)."""
    from radixbench.harness.config.impl import ImplError
    from radixbench.harness.experiments.replay import run_replay
    from radixbench.reports.replay import text_table

    POLICIES = _policies()
    impls = [x.strip() for x in args.impl.split(",") if x.strip()] if args.impl else []
    policies = args.policies or ([scenario_from_args(args).sim.policy] if impls else list(POLICIES))
    bad = [p for p in policies if p not in POLICIES]
    if bad:
        raise UsageError(f"--policies: unknown policy {bad[0]!r}; known: {', '.join(POLICIES)}")
    if len(set(policies)) != len(policies):
        raise UsageError(f"--policies: a policy is listed twice: {','.join(policies)}")
    try:
        outcome = run_replay(
            scenario_from_args(args),
            policies,
            on_bad_line=args.on_bad_line,
            include_outputs=not args.prompts_only,
            out=args.out,
            progress=False if args.no_progress else None,
            impls=impls,
            command_line=getattr(args, "command_line", ()),
        )
    except ImplError as e:
        raise UsageError(f"--impl: {e}") from None
    print(text_table(outcome.summary, outcome.meta))
    if outcome.skipped:
        print(f"skipped malformed trace lines: {outcome.skipped}")
    print(f"report: {outcome.run_dir / 'replay.md'}")
    return 0
