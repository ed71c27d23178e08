"""CLI tests: ``radixbench scenarios`` and ``radixbench compare SCENARIO`` on every bundled
scenario (small sizes), bad-line skipping and scenario errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.harness.config.scenario import bundled_scenarios
from radixbench.harness.experiments.workload import scenario_ceiling

SMALL = ["--requests", "12", "--evictors", "heapify,persistent-heap", "--matchers", "linear"]
SHRINK = {  # keep each run to seconds: long-context documents would otherwise reach 1M tokens
    "long-context": [
        "--set",
        "workload.max_document_tokens=20000",
        "--set",
        "workload.min_document_tokens=5000",
    ],
}


def run_dir(out: Path) -> Path:
    (d,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    return d


def test_scenarios_lists_each_bundled_scenario_once(capsys) -> None:
    assert main(["scenarios"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    names = list(bundled_scenarios())
    assert len(lines) == len(names)
    for name, line in zip(names, lines):
        assert line.split()[0] == name and len(line.split()) > 2


@pytest.mark.parametrize("name", list(bundled_scenarios()))
def test_every_bundled_scenario_runs_through_compare(name: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "runs"
    code = main(
        ["compare", name, *SMALL, *SHRINK.get(name, []), "--out", str(out), "--no-progress"]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    d = run_dir(out)
    meta = json.loads((d / "config.json").read_text())
    ceiling = meta["hit_rate_ceiling"]
    assert 0.0 <= ceiling["all"] <= 1.0 and 0.0 <= ceiling["last_half"] <= 1.0
    assert meta["skipped_lines"] == 0 and meta["requests"] == 12
    assert meta["scenario"].startswith(name)
    reqs = pd.read_csv(d / "requests.csv")
    for _, g in reqs.groupby("variant"):
        achieved = g["prefix_hit_tokens"].sum() / g["input_len"].sum()
        assert achieved <= ceiling["all"] + 1e-12  # no policy beats the infinite cache
    assert f"infinite-cache ceiling {ceiling['all']:.3f}" in printed


def test_on_bad_line_skip_counts_lines(tmp_path: Path, capsys) -> None:
    good = {"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [0, 1]}
    lines = [json.dumps({**good, "timestamp": 10 * i}) for i in range(6)]
    lines[2] = '{"timestamp": 20, "input_length": 600}'
    lines[4] = "not json"
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    out = tmp_path / "runs"
    base = ["compare", "--trace", str(trace), "--out", str(out), "--no-progress"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert f"{trace}:3: missing key 'output_length'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())
    assert main([*base, "--on-bad-line", "skip", "--evictors", "heapify"]) == 0
    printed = capsys.readouterr().out
    meta = json.loads((run_dir(out) / "config.json").read_text())
    assert meta["skipped_lines"] == 2 and meta["requests"] == 4
    assert "skipped malformed trace lines: 2" in printed and f"{trace}:5" in printed


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["compare", "no-such-scenario"], "no such scenario file or bundled scenario"),
        (["compare", "few-shot", "--set", "workload.shots=99"], "workload.shots: shots (99)"),
        (["compare", "few-shot", "--set", "workload.colour=1"], "workload.colour: unknown key"),
        (["compare", "few-shot", "--set", "oops"], "KEY=VALUE"),
        # a file in no trace format: the Mooncake loader (the default) names file:line
        (["compare", "few-shot", "--trace", __file__], "test_cli_scenarios.py:1: invalid"),
        (["compare", "few-shot", "--on-bad-line", "ignore"], "--on-bad-line"),
        (
            ["compare", "few-shot", "--window", "0.001", "--start", "1e9"],
            "--start 1e+09: past the end of the trace",
        ),
    ],
)
def test_scenario_errors_are_one_line(argv, needle, tmp_path: Path, capsys) -> None:
    assert main([*argv, "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert not any(tmp_path.iterdir())


def test_scenario_file_with_relative_generic_trace(tmp_path: Path, capsys) -> None:
    (tmp_path / "my.csv").write_text(
        "arrival_s,input_length,output_length\n" + "".join(f"{i},{200 + i},3\n" for i in range(8))
    )
    (tmp_path / "s.toml").write_text(
        'description = "own trace"\nseed = 1\n[workload]\nkind = "trace"\npath = "my.csv"\n'
        "prefixes = 2\nprefix_tokens = 128\n[arrivals]\nrate_scale = 2.0\n"
        '[variants]\nevictors = ["heapify"]\nmatchers = ["linear"]\n'
    )
    out = tmp_path / "runs"
    assert main(["compare", str(tmp_path / "s.toml"), "--out", str(out), "--no-progress"]) == 0
    reqs = pd.read_csv(run_dir(out) / "requests.csv")
    assert list(reqs["arrival_s"]) == pytest.approx([i / 2 for i in range(8)])
    assert reqs["prefix_hit_tokens"].sum() > 0


def test_scenarios_ceiling_column_matches_the_analytic_value(capsys) -> None:
    assert scenario_ceiling("prefix-repetition") == (
        1000,
        {"all": pytest.approx(990 * 256 / (1000 * 512)), "last_half": pytest.approx(0.5)},
    )
    assert main(["scenarios", "--ceiling"]) == 0
    rows = {ln.split()[0]: ln.split() for ln in capsys.readouterr().out.splitlines()[1:]}
    assert set(rows) == set(bundled_scenarios())
    assert rows["prefix-repetition"][1:4] == ["1000", "0.495", "0.500"]
