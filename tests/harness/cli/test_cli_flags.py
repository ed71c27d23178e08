"""Flags checked before anything heavy is loaded, SGLang's server-argument names, and the rules
that span flags (issue 31, items 9, 11 and 12)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from radixbench.harness.cli import build_parser, main
from radixbench.harness.cli.compare import spec_from_args

#: ``main(argv)`` in a fresh interpreter: its exit status, stderr and the heavy modules loaded.
_PROBE = """
import json, sys
from radixbench.harness.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("torch", "pandas", "numpy", "sglang", "scipy") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}))
"""


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["compare", "--nosuch"], "unrecognized arguments: --nosuch"),
        (["compare", "--requests", "abc"], "--requests"),
        (["compare", "--requests", "5", "--window", "2"], "not allowed with argument"),
        (["compare", "--kv-capacity", "-5"], "--kv-capacity"),
        (["compare", "--set", "workload.groups=["], "--set workload.groups: not a TOML value"),
        (["compare", "--router-option", "nodot=1"], "--router-option"),
        (["compare", "--impl", "sglang", "--requets", "10"], "unrecognized arguments"),
        (["replay", "--nosuch"], "unrecognized arguments"),
        (["profile", "--top", "0"], "--top"),
    ],
)
def test_a_bad_flag_fails_before_torch_pandas_or_sglang_load(
    argv: list[str], needle: str, tmp_path: Path
) -> None:
    """Issue 31, item 11: a mistyped flag took 17-75 s under load (torch, pandas and SGLang
    were loaded first); it is answered now before any of them is imported."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv, "--out", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert probe["code"] == 2 and len(err) == 1, proc.stderr
    assert err[0].startswith("radixbench: error:") and needle in err[0], err
    assert probe["heavy"] == [], probe
    assert not (tmp_path / "runs").exists()


def test_token_count_reads_sglang_suffixes() -> None:
    from radixbench.harness.cli.util import token_count

    assert token_count("96000") == 96_000
    assert token_count("96k") == 96_000 and token_count("25.6k") == 25_600
    assert token_count("64Ki") == 65_536 and token_count("1M") == 1_000_000
    for bad in ("0", "-3", "1.5Ki", "12kb", "lots"):
        with pytest.raises(argparse.ArgumentTypeError):
            token_count(bad)


def _parse(*argv: str) -> argparse.Namespace:
    args = build_parser("compare").parse_args(["compare", *argv])
    args.command_line = ("radixbench", "compare", *argv)
    return args


def test_sglang_server_argument_names_are_aliases() -> None:
    """Issue 31, item 12: SGLang's names (sglang 0.5.23 ``arg_groups/fields/schedule.py``,
    ``memory.py``) set what radixbench's own flags set."""
    ours = spec_from_args(
        _parse("--max-running", "8", "--sched-policy", "lpm", "--policy", "lfu",
               "--kv-capacity", "50000", "--reference", "none")
    ).sim  # fmt: skip
    theirs = spec_from_args(
        _parse("--max-running-requests", "8", "--schedule-policy", "lpm",
               "--radix-eviction-policy", "lfu", "--max-total-tokens", "50k",
               "--reference", "none")
    ).sim  # fmt: skip
    assert theirs == ours
    assert (ours.max_running, ours.sched_policy, ours.policy) == (8, "lpm", "lfu")
    assert ours.kv_capacity_tokens == 50_000


def test_help_shows_both_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = capsys.readouterr().out
    for ours, theirs in (
        ("--max-running", "--max-running-requests"),
        ("--sched-policy", "--schedule-policy"),
        ("--policy", "--radix-eviction-policy"),
        ("--kv-capacity", "--max-total-tokens"),
    ):
        assert f"{ours} " in out and f", {theirs} " in out, (ours, theirs)


def test_an_error_in_an_alias_names_the_alias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare", "--schedule-policy", "lof", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "--schedule-policy: invalid choice: 'lof'" in err, err


# ---------------------------------------------------------------- rules that span flags


def _one_line(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main([*argv, "--out", str(tmp_path / "runs"), "--no-progress"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1, err
    assert not (tmp_path / "runs").exists()
    return err[0]


def test_routers_without_instances_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31, item 9: ``--routers X`` alone ran one instance and ranked identical rows."""
    line = _one_line(["compare", "--routers", "round-robin,cache-aware"], tmp_path, capsys)
    assert line.startswith("radixbench: error: --routers: routing needs 2 or more instances")
    line = _one_line(["compare", "--instances", "1", "--routers", "random"], tmp_path, capsys)
    assert "--routers" in line and "this run has 1" in line


def test_routers_with_a_scenarios_instances_run() -> None:
    """A scenario with ``[cluster] instances = 8`` takes ``--routers`` alone."""
    spec = spec_from_args(_parse("multi-tenant-prefix", "--routers", "random"))
    assert spec.scenario.cluster.instances == 8
    assert spec.scenario.cluster.routers == ("random",)


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--enable-hierarchical-cache", "--instances", "2"],
         ("--enable-hierarchical-cache with --instances", "--no-kv-events")),
        (["--hicache-ratio", "4", "--instances", "2", "--routers", "round-robin"],
         ("--hicache-ratio with --instances",)),
        (["--enable-hierarchical-cache", "--kv-events", "EVENTS"],
         ("--kv-events with --enable-hierarchical-cache",)),
    ],
)  # fmt: skip
def test_hicache_and_kv_events_are_refused_by_one_rule(
    argv: list[str], needles: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31, item 9: HiCache with ``--kv-events`` was refused, with ``--instances 2`` it ran
    (recording kv_events True); both name the two flags now."""
    argv = [a.replace("EVENTS", str(tmp_path / "ev.jsonl")) for a in argv]
    line = _one_line(["compare", *argv], tmp_path, capsys)
    for needle in needles:
        assert needle in line, line
    assert "HiCache emits no KV events" in line
    assert not (tmp_path / "ev.jsonl").exists()


def test_hicache_in_a_cluster_without_events_loads() -> None:
    spec = spec_from_args(
        _parse("--enable-hierarchical-cache", "--instances", "2", "--no-kv-events",
               "--routers", "round-robin")
    )  # fmt: skip
    assert spec.scenario.cluster.kv_events is False and spec.sim.hicache is not None


def test_hicache_and_a_cluster_in_one_scenario_file_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'description = "d"\n[workload]\nkind = "multi-turn"\n'
        '[arrivals]\nprocess = "poisson"\nrate = 4.0\n'
        "[cache.hicache]\nenabled = true\n[cluster]\ninstances = 2\n"
    )
    line = _one_line(["compare", str(scenario)], tmp_path, capsys)
    assert f"{scenario}: [cache.hicache] with {scenario}: [cluster]" in line


@pytest.mark.sglang
def test_a_relative_patch_path_names_the_folder_it_was_read_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """Issue 31, item 11: the README's patch example works only from the checkout; run from
    elsewhere, the error says where the relative path was looked for."""
    monkeypatch.chdir(tmp_path)
    spec = (
        "sglang-python:examples/sglang_unified_persistent_heap.py:PersistentHeapUnifiedRadixCache"
    )
    line = _one_line(["compare", "eviction-pressure", "--impl", f"sglang-python,{spec}"],
                     tmp_path, capsys)  # fmt: skip
    assert f"no such file {tmp_path}/examples/sglang_unified_persistent_heap.py" in line
    assert f"a relative path is read from the current folder, {tmp_path}" in line
