"""``radixbench replay``: the run folder, the printed table, overrides and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.sim.replay import EVICTOR, MATCHER


def only_run(out: Path) -> Path:
    runs = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert len(runs) == 1, runs
    return runs[0]


def test_replay_writes_the_report_and_prints_the_table(tmp_path: Path, capsys) -> None:
    out = tmp_path / "runs"
    argv = ["replay", "eviction-pressure", "--requests", "300", "--policies", "lru,mru"]
    code = main([*argv, "--kv-capacity", "3000", "--out", str(out), "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0
    run = only_run(out)
    names = {p.name for p in run.iterdir()}
    assert {"replay.md", "config.json", "summary.parquet", "summary.csv"} <= names
    assert {"requests.parquet", "requests.csv"} <= names
    summary = pd.read_parquet(run / "summary.parquet")
    assert summary["policy"].tolist() == ["lru", "mru", "belady", "ceiling"]
    rates = summary.set_index("policy")["hit_rate"]
    assert rates["lru"] <= rates["belady"] <= rates["ceiling"]
    assert rates["mru"] <= rates["belady"]
    meta = json.loads((run / "config.json").read_text())
    assert meta["requests"] == 300 and meta["kv_capacity_tokens"] == 3000
    assert meta["include_outputs"] is True
    md = (run / "replay.md").read_text()
    assert "| belady |" in md and "Block-level simulators" in md
    for word in ("lru", "mru", "belady", "ceiling", "KV capacity: 3000 tokens"):
        assert word in printed
    assert str(run / "replay.md") in printed


def test_all_replays_the_whole_trace_file(tmp_path: Path, capsys) -> None:
    trace = tmp_path / "t.jsonl"
    rows = [
        {"timestamp": 10 * i, "input_length": 700, "output_length": 3, "hash_ids": [7, 8]}
        for i in range(5)
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "runs"
    argv = ["replay", "mooncake-conversation", "--trace", str(trace), "--all", "--prompts-only"]
    assert main([*argv, "--policies", "lru", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    run = only_run(out)
    meta = json.loads((run / "config.json").read_text())
    assert meta["requests"] == 5 and meta["include_outputs"] is False
    table = pd.read_parquet(run / "requests.parquet")
    assert table["lru"].tolist() == [0, 699, 699, 699, 699]  # the same prompt, capped at n - 1


def _generic_trace(tmp_path: Path) -> Path:
    """A trace in the generic JSONL format (``arrival_s``, no Mooncake ``timestamp``)."""
    good = tmp_path / "good.jsonl"
    rows = [
        {"arrival_s": 0.5 * i, "input_length": 30, "output_length": 4, "hash_ids": [1, 2 + i % 2]}
        for i in range(6)
    ]
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return good


@pytest.mark.parametrize("scenario", [[], ["mooncake-conversation"]])
def test_trace_replaces_the_workload_with_its_format_detected_as_compare_does(
    scenario: list[str], tmp_path: Path, capsys
) -> None:
    """``replay [SCENARIO] --trace FILE`` takes the trace as ``compare --trace`` does (issue 22
    defect 6: a generator scenario failed with "workload.path: unknown key", a Mooncake one with
    "missing key 'timestamp'")."""
    good, out = _generic_trace(tmp_path), tmp_path / "runs"
    argv = ["replay", *scenario, "--trace", str(good), "--policies", "lru"]
    code = main([*argv, "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    meta = json.loads((only_run(out) / "config.json").read_text())
    assert meta["requests"] == 6 and meta["skipped_lines"] == 0
    assert meta["evictor"] == EVICTOR and meta["matcher"] == MATCHER  # what sim.replay runs
    requests = pd.read_parquet(only_run(out) / "requests.parquet")
    assert requests["input_len"].tolist() == [30] * 6


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--policies", "lru,nope"], "--policies: unknown policy 'nope'"),
        (["--policies", "lru,lru"], "listed twice"),
        (["--requests", "0"], "--requests"),
        (["--requests", "5", "--all"], "not allowed"),
        (["--kv-capacity", "-3"], "--kv-capacity"),
        (["--trace", "/no/such.jsonl"], "no such file"),
        (["no-such-scenario"], "no such scenario"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    argv: list[str], needle: str, tmp_path: Path, capsys
) -> None:
    code = main(["replay", *argv, "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("radixbench: error:"), err
    assert needle in lines[0]
    assert not any(tmp_path.iterdir())


def test_compare_meta_and_report_text_carry_the_belady_bound() -> None:
    """``compare`` stores Belady's bound over the finished requests at the run's capacity
    (harness/experiments/workload.py ``served_belady``) and the report's hit-rate line states it."""
    from radixbench.harness.experiments.workload import served_belady
    from radixbench.reports.record import RunMeta
    from radixbench.reports.runmeta import hit_rate_text
    from radixbench.sim.config import SimConfig
    from radixbench.workloads.tokens import HashBlocks
    from radixbench.workloads.trace import TraceRequest

    trace = [TraceRequest(i, float(i), 8, 2, HashBlocks((1, 2), 4)) for i in range(3)]
    requests = pd.DataFrame(
        {"variant": ["v"] * 3, "rid": [0, 1, 2], "status": ["finished", "finished", "rejected"]}
    )
    bound = served_belady(trace, requests, SimConfig(kv_capacity_tokens=64))
    assert bound == {"all": 7 / 16, "last_half": 7 / 8, "kv_capacity_tokens": 64, "page_size": 1}
    meta = RunMeta(hit_rate_ceiling={"all": 7 / 16, "requests": 2}, hit_rate_belady=bound)
    text = hit_rate_text(0.25, meta)
    assert text is not None and "Belady bound at 64 KV tokens 43.8 %" in text


def test_all_says_how_many_requests_it_replayed_and_times_the_ceiling(
    tmp_path: Path, capsys
) -> None:
    """The scenario line names the requests replayed (not the scenario's "first 1,000
    requests"), and the ceiling row has a time, not NaN."""
    trace = tmp_path / "t.jsonl"
    rows = [
        {"timestamp": 10 * i, "input_length": 700, "output_length": 3, "hash_ids": [7, i % 2]}
        for i in range(7)
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["replay", "mooncake-conversation", "--trace", str(trace), "--all", "--policies"]
    assert main([*argv, "lru", "--out", str(tmp_path / "runs"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    scenario = next(line for line in printed.splitlines() if line.startswith("scenario:"))
    assert "1,000" not in scenario and "all 7 requests" in scenario, scenario
    ceiling = next(line for line in printed.splitlines() if line.split()[:1] == ["ceiling"])
    assert "nan" not in ceiling.lower(), ceiling
    summary = pd.read_parquet(only_run(tmp_path / "runs") / "summary.parquet")
    assert summary["wall_s"].notna().all(), summary
