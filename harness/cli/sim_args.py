"""The scheduler, clock and cost-model flags of the commands that simulate (``compare``,
``profile``), and the HiCache flags (:mod:`~radixbench.harness.cli.hicache_args`); each sets a
scenario key (``scenario_args.OVERRIDES``). Their choices and help texts are lazy: building the
parser imports none of the simulator."""

from __future__ import annotations

import argparse

from radixbench.harness.cli.hicache_args import add_hicache_arguments
from radixbench.harness.cli.util import (
    LazyChoices,
    lazy_help,
    lazy_names,
    positive_float,
    radixbench_module,
)

__all__ = ["add_simulation_arguments"]


def add_simulation_arguments(c: argparse.ArgumentParser) -> None:
    """The scheduler, clock and cost-model flags of the commands that simulate."""
    c.add_argument(
        "--chunked-prefill-size",
        type=int,
        metavar="TOKENS",
        help="tokens per prefill chunk; -1 disables chunking",
    )
    c.add_argument(
        "--sched-policy",
        "--schedule-policy",
        dest="sched_policy",
        choices=LazyChoices(lazy_names("sim.sched_policy", "SCHED_POLICIES")),
        metavar="POLICY",
        help="waiting-queue order: %(choices)s (SGLang's --schedule-policy)",
    )
    c.add_argument(
        "--clock",
        choices=LazyChoices(lazy_names("sim.config", "CLOCKS")),
        metavar="CLOCK",
        help="%(choices)s; isolated: measured CPU time recorded only (identical schedules); "
        "coupled: added to each step's simulated time",
    )
    c.add_argument(
        "--no-batch-builder",
        dest="batch_builder",
        action="store_const",
        const=False,
        help="skip the ScheduleBatch builder (its tensors and timed build_extend / "
        "build_decode ops; the req_to_token rows are still written); named in the report's "
        "run settings. Default: every step builds its batch, timed",
    )
    c.add_argument(
        "--cost-model",
        metavar="NAME|PATH.toml|aic[:...]",
        help=lazy_help(
            lambda: (
                "step-time model: a preset "
                f"({', '.join(radixbench_module('sim.cost').preset_names())}: AIConfigurator's "
                "measured kernels where it has data, H100/H200; the roofline otherwise), "
                "roofline:PRESET, aic[:PRESET|MODEL@[TPx]SYSTEM/FRAMEWORK-VERSION], linear or "
                "a TOML file"
            )
        ),
    )
    c.add_argument(
        "--gpu-mem-gb",
        type=positive_float,
        metavar="GB",
        help="derive the KV pool from this memory per GPU minus weights (overrides --kv-capacity)",
    )
    add_hicache_arguments(c)
