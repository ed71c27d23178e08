from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main

BAD_ARGS = [
    (["compare", "--requests", "0"], "--requests"),
    (["compare", "--requests", "abc"], "--requests"),
    (["compare", "--evictors", "bogus"], "bogus"),
    (["compare", "--matchers", "linear,nope"], "nope"),
    (["compare", "--flatten", "zip"], "zip"),
    (["compare", "--device", "tpu"], "--device"),
    (["compare", "--policy", "random"], "--policy"),
    (["compare", "--kv-capacity", "-5"], "--kv-capacity"),
    (["compare", "--time-scale", "0"], "--time-scale"),
    (["compare", "--requests", "5", "--window", "10"], "not allowed"),
    (["compare", "--trace", "/no/such/trace.jsonl"], "no such file"),
    (["compare", "--unknown-flag"], "unrecognized"),
    (["compare", "--clock", "wall"], "--clock"),
    (["compare", "--sched-policy", "sjf"], "--sched-policy"),
    (["compare", "--cost-model", "gpt-9"], "unknown cost model"),
    (["compare", "--chunked-prefill-size", "0"], "--chunked-prefill-size"),
    (["compare", "--page-size", "0"], "--page-size"),
    (["compare", "--page-size", "12"], "page_size must be a positive power of two, got 12"),
    (["compare", "--set", "page_size=3"], "cache.page_size: page_size must be a positive power"),
    (["compare", "--page-size", "16", "--chunked-prefill-size", "1000"], "multiple of page"),
    (["compare", "--gpu-mem-gb", "5"], "do not fit"),
    (["compare", "--gpu-mem-gb", "40", "--cost-model", "linear"], "roofline"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
]


@pytest.mark.parametrize(("argv", "needle"), BAD_ARGS)
def test_bad_arguments_give_one_line_error(argv, needle, capsys, tmp_path) -> None:
    code = main([*argv, "--out", str(tmp_path)] if argv and argv[0] == "compare" else argv)
    err = capsys.readouterr().err
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("radixbench: error:")
    assert needle in lines[0]
    assert "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing written


def test_malformed_trace_line_names_file_and_line(tmp_path, capsys) -> None:
    trace = tmp_path / "t.jsonl"
    good = {"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}
    trace.write_text(json.dumps(good) + "\n{not json\n")
    out = tmp_path / "runs"
    code = main(["compare", "--trace", str(trace), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "t.jsonl:2" in err and len(err.splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())


def test_cuda_without_gpu_is_a_one_line_error(capsys, tmp_path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["compare", "--device", "cuda", "--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_compare_end_to_end_on_trace(tmp_path: Path, capsys) -> None:
    out = tmp_path / "runs"
    code = main(
        [
            "compare",
            "--requests",
            "150",
            "--time-scale",
            "0.25",
            "--kv-capacity",
            "120000",
            "--max-running",
            "16",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    runs = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert len(runs) == 1 and not any(p.name.startswith(".tmp") for p in out.iterdir())
    run = runs[0]
    for name in (
        "report.md",
        "requests.parquet",
        "requests.csv",
        "ops.parquet",
        "ops.csv",
        "summary_ops.csv",
        "config.json",
        "plots/op_cdf.png",
        "plots/evict_vs_leaves.png",
    ):
        assert (run / name).stat().st_size > 0, name
    req = pd.read_parquet(run / "requests.parquet")
    assert set(req["variant"]) == {
        "heapify/linear/chain",
        "heapify/galloping/chain",
        "persistent-heap/linear/chain",
        "persistent-heap/galloping/chain",
    }
    assert len(req) == 4 * 150
    ops = pd.read_parquet(run / "ops.parquet")
    assert (ops["op"] == "evict").any()
    metrics = pd.read_parquet(run / "metrics.parquet")
    assert len(metrics) == 4 and set(metrics["clock"]) == {"isolated"}
    assert (metrics["completed"] + metrics["failed"] == 150).all() and (
        metrics["request_throughput"] > 0
    ).all()
    ts = pd.read_parquet(run / "timeseries.parquet")
    assert set(ts["step"]) == {"prefill", "decode"} and (ts["queue_len"] >= 0).all()
    assert "serving metrics (simulated; clock isolated)" in stdout
    assert "equivalence: OK" in stdout
    assert "OK" in (run / "report.md").read_text() or "identical" in (run / "report.md").read_text()
    # A second run never clobbers the first.
    assert (
        main(
            [
                "compare",
                "--requests",
                "20",
                "--evictors",
                "heapify",
                "--matchers",
                "linear",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert (run / "report.md").exists()
    assert len([p for p in out.iterdir() if not p.name.startswith(".")]) == 2


def test_page_size_reaches_the_run_and_its_report(tmp_path: Path, capsys) -> None:
    """--set page_size=16 is the same override (tests/harness/test_harness_scenario.py)."""
    out = tmp_path / "runs"
    argv = ["compare", "--requests", "8", "--evictors", "heapify", "--matchers", "galloping"]
    code = main([*argv, "--page-size", "16", "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr()
    (run,) = list(out.iterdir())
    assert json.loads((run / "config.json").read_text())["page_size"] == 16
    assert "**page_size**: 16" in (run / "report.md").read_text()
    req = pd.read_parquet(run / "requests.parquet")
    hits = req.loc[req["status"] == "finished", "prefix_hit_tokens"]
    assert (hits % 16 == 0).all()
