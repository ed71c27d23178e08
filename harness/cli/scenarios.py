"""``radixbench scenarios``: the bundled scenarios, one line each, optionally with hit ceilings."""

from __future__ import annotations

import argparse

from radixbench.harness.config.scenario import bundled_scenarios, load_scenario
from radixbench.harness.experiments.workload import scenario_ceiling


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``scenarios`` to the subcommands."""
    c = sub.add_parser("scenarios", help="list the bundled scenarios (run one with compare NAME)")
    c.set_defaults(func=run)
    c.add_argument(
        "--ceiling",
        action="store_true",
        help="also load each workload and print its infinite-cache prefix-hit ceiling",
    )


def run(args: argparse.Namespace) -> int:
    """Print ``name  description`` per bundled scenario (and ceilings with ``--ceiling``)."""
    found = bundled_scenarios()
    width = max(map(len, found), default=0)
    if args.ceiling:
        print(f"{'scenario':<{width}}  requests  ceiling  last-half  description")
    for name in found:
        sc = load_scenario(name)
        if args.ceiling:
            n, c = scenario_ceiling(name)
            print(
                f"{name:<{width}}  {n:>8}  {c['all']:>7.3f}  {c['last_half']:>9.3f}  "
                f"{sc.description}"
            )
        else:
            print(f"{name:<{width}}  {sc.description}")
    return 0
