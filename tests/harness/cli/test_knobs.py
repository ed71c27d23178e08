"""Tests for radixbench.harness.cli.knobs: every scenario flag declared once (issue 32 item 3).

The parsers of compare, profile and replay are built from :data:`KNOBS` alone, each knob's key
names a field of the config it sets, and the flag -> key map and SGLang's aliases are derived
from the same table."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from radixbench.harness.cli import build_parser
from radixbench.harness.cli.knobs import KNOBS, OVERRIDES, SGLANG_ALIASES, add_knobs
from radixbench.harness.cli.util import Parser


def _config_fields(section: str) -> set[str]:
    """The fields a scenario key's section sets (``sim.hicache.storage`` -> StorageConfig)."""
    from radixbench.cache.hicache.config import StorageConfig
    from radixbench.cluster.spec import ClusterSpec
    from radixbench.harness.config.scenario import _DEFAULT_VARIANTS
    from radixbench.sim.config import HiCacheSim, SimConfig
    from radixbench.workloads.arrivals import Arrivals

    classes = {"arrivals": Arrivals, "sim": SimConfig, "sim.hicache": HiCacheSim,
               "sim.hicache.storage": StorageConfig, "cluster": ClusterSpec}  # fmt: skip
    if section == "variants":
        return set(_DEFAULT_VARIANTS) | {"impls", "reference", "hicache"}
    if section == "cost":
        return {"model"}
    if section == "":
        return {"seed"}
    return {f.name for f in dataclasses.fields(classes[section])}


@pytest.mark.parametrize("knob", [k for k in KNOBS if k.key], ids=lambda k: k.flag)
def test_each_knob_key_names_a_config_field(knob) -> None:
    section, _, field = knob.key.rpartition(".")
    assert field in _config_fields(section), knob.key


def test_overrides_and_aliases_are_derived_from_the_knobs() -> None:
    assert OVERRIDES["max_running"] == "sim.max_running"
    assert OVERRIDES["impls"] == "variants.impls"  # --impl's parsed name
    assert SGLANG_ALIASES == {
        "policy": "--radix-eviction-policy",
        "kv_capacity": "--max-total-tokens",
        "max_running": "--max-running-requests",
        "sched_policy": "--schedule-policy",
    }
    assert len({k.flag for k in KNOBS}) == len(KNOBS) == len({k.dest for k in KNOBS})


def _options(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}


@pytest.mark.parametrize(
    ("command", "simulation", "baseline", "every"),
    [("compare", True, True, False), ("profile", True, True, False),
     ("replay", False, False, True)],
)  # fmt: skip
def test_commands_take_exactly_their_knobs(command, simulation, baseline, every) -> None:
    sub = build_parser(command)._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    alone = Parser(prog="x")
    add_knobs(alone, simulation=simulation, baseline=baseline, every=every)
    knob_flags = _options(alone) - {"-h", "--help"}
    assert knob_flags <= _options(sub)
    declared = {f for k in KNOBS for f in k.flags(True)}
    # what a command adds of its own (--out, --device, ...) is no scenario knob; replay's
    # --impl (the implementations each policy replays on) sets no scenario key
    own = {"--impl"} if command == "replay" else set()
    assert (_options(sub) - knob_flags) & declared == own


def test_sglang_alias_only_where_the_command_simulates() -> None:
    compare = build_parser("compare").parse_args(["compare", "--max-total-tokens", "64Ki"])
    assert compare.kv_capacity == 65536
    with pytest.raises(Exception, match="--max-total-tokens"):
        build_parser("replay").parse_args(["replay", "--max-total-tokens", "64Ki"])


def test_an_error_names_the_flag_as_declared() -> None:
    """A value's origin is the knob's flag, not its parsed name spelled as a flag (``--impl``
    is parsed as ``impls``), or SGLang's alias where the command line used it."""
    from radixbench.harness.cli.scenario_args import _flag

    words = ["compare", "--impl", "radixbench", "--max-running-requests", "8"]
    args = build_parser("compare").parse_args(words)
    args.command_line = ("radixbench", *words)
    assert _flag(args, "impls") == "--impl"
    assert _flag(args, "max_running") == "--max-running-requests"
    assert _flag(args, "kv_capacity") == "--kv-capacity"
    assert _flag(args, "batch_builder") == "--no-batch-builder"
