"""The scenario arguments are one set (``harness/cli/scenario_args.py``): every command that takes
a flag reads it into the same scenario, and ``study`` takes ``--set`` alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radixbench.harness.cli import build_parser
from radixbench.harness.cli.scenario_args import OVERRIDES, scenario_from_args
from radixbench.harness.cli.util import UsageError
from radixbench.harness.config.scenario import Scenario


def _scenario(command: str, argv: list[str]) -> Scenario:
    return scenario_from_args(build_parser(command).parse_args([command, *argv]))


def _what_replay_uses(sc: Scenario) -> tuple[object, ...]:
    sim = sc.sim
    return (sc.name, sc.kind, sc.workload, sc.arrivals, sc.seed, sc.on_bad_line,
            sim.kv_capacity_tokens, sim.page_size, sim.gpu_mem_gb)  # fmt: skip


def _trace(tmp_path: Path) -> str:
    good = tmp_path / "good.jsonl"
    rows = [{"arrival_s": float(i), "input_length": 20, "output_length": 2} for i in range(4)]
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(good)


@pytest.mark.parametrize(
    "argv",
    [
        ["--requests", "40"],
        ["eviction-pressure", "--window", "30", "--start", "5", "--time-scale", "2"],
        ["mooncake-conversation", "--kv-capacity", "48000", "--page-size", "16", "--seed", "3"],
        ["--rate-scale", "1.5", "--on-bad-line", "skip", "--set", "workload.groups=4"],
        ["--set", "gpu_mem_gb=80", "--kv-capacity", "48000"],
        ["--trace", "TRACE"],
        ["mooncake-conversation", "--trace", "TRACE", "--requests", "3"],
    ],
)
def test_a_flag_means_the_same_in_compare_profile_and_replay(argv: list[str], tmp_path) -> None:
    argv = [_trace(tmp_path) if a == "TRACE" else a for a in argv]
    got = {c: _what_replay_uses(_scenario(c, argv)) for c in ("compare", "profile", "replay")}
    assert got["compare"] == got["profile"] == got["replay"]


def test_replay_all_drops_the_selection_and_takes_no_simulation_flags() -> None:
    sc = _scenario("replay", ["eviction-pressure", "--all"])
    assert sc.arrivals.max_requests is None and sc.arrivals.window_s is None
    replay = build_parser("replay")
    with pytest.raises(UsageError, match="unrecognized arguments: --evictors"):
        replay.parse_args(["replay", "--evictors", "heapify"])


def test_every_override_flag_exists_on_compare() -> None:
    """:data:`OVERRIDES` names compare's flags; a flag another command lacks is left alone."""
    args = build_parser("compare").parse_args(["compare"])
    assert all(hasattr(args, dest) for dest in OVERRIDES)
    study = build_parser("study").parse_args(["study", "eviction", "--set", "seed=1"])
    assert study.set == ["seed=1"] and not hasattr(study, "requests")


def test_no_batch_builder_sets_the_scenario_and_refuses_flatten_variants() -> None:
    """``--no-batch-builder`` turns the builder off (default on, ``--set`` too); with
    ``--flatten`` variants, which differ only in the builds, it is a one-line error naming it."""
    from radixbench.harness.config.scenario import ScenarioError

    assert _scenario("compare", []).sim.batch_builder is True
    assert _scenario("compare", ["--no-batch-builder"]).sim.batch_builder is False
    assert _scenario("compare", ["--set", "batch_builder=false"]).sim.batch_builder is False
    with pytest.raises(ScenarioError, match=r"--flatten: .*--no-batch-builder") as exc:
        _scenario("compare", ["--no-batch-builder", "--flatten", "chain,numpy"])
    assert "\n" not in str(exc.value)
