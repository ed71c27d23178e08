from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import build_parser, main

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
            "mooncake-conversation",  # evicts at this KV capacity (the default scenario may not)
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
        "heapify/linear/numpy",
        "heapify/galloping/numpy",
        "persistent-heap/linear/numpy",
        "persistent-heap/galloping/numpy",
        "heapify/linear/numpy/replica=2",  # the baseline's A/A replica (the noise floor)
    }
    assert len(req) == 5 * 150
    ops = pd.read_parquet(run / "ops.parquet")
    assert (ops["op"] == "evict").any()
    metrics = pd.read_parquet(run / "metrics.parquet")
    assert len(metrics) == 5 and set(metrics["clock"]) == {"isolated"}
    assert (metrics["completed"] + metrics["failed"] == 150).all() and (
        metrics["request_throughput"] > 0
    ).all()
    ts = pd.read_parquet(run / "timeseries.parquet")
    assert set(ts["step"]) == {"prefill", "decode"} and (ts["queue_len"] >= 0).all()
    assert "serving metrics (simulated; clock isolated)" in stdout
    assert "equivalence: OK" in stdout
    assert "OK" in (run / "report.md").read_text() or "identical" in (run / "report.md").read_text()
    # the wall time printed is the one report.md states (issue 13)
    printed = re.search(r"^wall time ([\d.]+) s", stdout, re.M)
    reported = re.search(r"wall time\W*([\d.]+) s", (run / "report.md").read_text())
    assert printed and reported and printed.group(1) == reported.group(1)
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
    """--set page_size=16 is the same override (tests/harness/config/test_config_scenario.py)."""
    out = tmp_path / "runs"
    argv = ["compare", "--requests", "8", "--evictors", "heapify", "--matchers", "galloping"]
    code = main([*argv, "--page-size", "16", "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr()
    (run,) = list(out.iterdir())
    assert json.loads((run / "config.json").read_text())["page_size"] == 16
    assert "**page size**: 16 tokens" in (run / "report.md").read_text()
    req = pd.read_parquet(run / "requests.parquet")
    hits = req.loc[req["status"] == "finished", "prefix_hit_tokens"]
    assert (hits % 16 == 0).all()


# --- what a new user hit (issue 13, item 5) ----------------------------------------------


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("radixbench: error:"), err
    return lines[0]


def test_kv_capacity_below_every_request_names_the_option(tmp_path, capsys) -> None:
    out = tmp_path / "runs"
    argv = ["compare", "prefix-repetition", "--requests", "20", "--kv-capacity", "100"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 2
    line = _one_error_line(capsys)
    # prefix-repetition: 256 prefix + 256 suffix + 128 output tokens per request
    assert "--kv-capacity 100" in line and "smallest needs 640 KV slots" in line
    assert "--kv-capacity 641 or more" in line
    assert not out.exists() or not any(out.iterdir())


def test_bad_option_value_is_blamed_on_the_option_not_the_scenario(tmp_path, capsys) -> None:
    assert main(["compare", "--evictors", "nope", "--out", str(tmp_path)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("radixbench: error: --evictors: ") and "'nope'" in line
    assert ".toml" not in line
    assert main(["compare", "--set", "variants.matchers=['x']", "--out", str(tmp_path)]) == 2
    assert "--set variants.matchers=['x']: variants.matchers: " in _one_error_line(capsys)


def test_every_compare_and_profile_option_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("compare", "profile", "sweep"):
        for action in sub.choices[name]._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"


def test_top_level_help_is_plain_text(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "radix prefix cache" in out


def test_plot_on_a_file_says_it_is_not_a_run_folder(tmp_path, capsys) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# not a run\n")
    assert main(["plot", str(readme)]) == 2
    line = _one_error_line(capsys)
    assert "not a run folder (a file" in line and "no such directory" not in line


def test_closed_stdout_exits_quietly(tmp_path) -> None:
    # `radixbench scenarios | head -3`: the reader is gone before the listing is written.
    proc = subprocess.Popen(
        [sys.executable, "-m", "radixbench.harness", "scenarios"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert err == "", err  # no "Broken pipe" error, no "Exception ignored" at exit


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_compare_trace_takes_the_generic_formats(suffix, tmp_path, capsys) -> None:
    rows = [(0.0, 300, 4), (0.5, 300, 4), (1.0, 200, 4), (1.5, 310, 4)]
    trace = tmp_path / f"generic{suffix}"
    if suffix == ".csv":
        lines = ["arrival_s,input_length,output_length"] + [f"{t},{i},{o}" for t, i, o in rows]
    else:
        keys = ("arrival_s", "input_length", "output_length")
        lines = [json.dumps(dict(zip(keys, r))) for r in rows]
    trace.write_text("\n".join(lines) + "\n")
    out = tmp_path / "runs"
    argv = ["compare", "--trace", str(trace), "--evictors", "heapify", "--matchers", "linear"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0, capsys.readouterr().err
    (run,) = out.iterdir()
    req = pd.read_parquet(run / "requests.parquet")
    for _, one in req.groupby("variant"):  # the variant, sglang's served cache, the A/A replica
        assert sorted(one["input_len"]) == [200, 300, 300, 310]
    assert json.loads((run / "config.json").read_text())["spec"]["scenario"]["kind"] == "trace"


HEAVY = ("matplotlib", "pandas", "pyarrow", "dask", "distributed", "scalene", "torch")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_cli_import_and_top_level_help_load_no_heavy_module() -> None:
    """`radixbench --help` must answer in well under a second: neither importing the CLI nor
    printing the top-level help may load matplotlib, pandas, dask, scalene or torch."""
    loaded = _modules_after("import radixbench.harness.cli")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    code = (
        "import contextlib, io\nfrom radixbench.harness.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])"
    )
    loaded = _modules_after(code)
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_plot_and_report_imports_stay_light() -> None:
    """`radixbench plot --help` loads no heavy module; compare's start-up loads no matplotlib
    (imported when its report is rendered) and no dask or scalene."""
    code = (
        "import contextlib, io\nfrom radixbench.harness.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['plot', '--help'])"
    )
    assert not _modules_after(code) & set(HEAVY)
    loaded = _modules_after("import radixbench.harness.cli.compare")
    assert not loaded & {"matplotlib", "dask", "distributed", "scalene"}


def test_stub_help_lines_match_the_subcommands() -> None:
    """The help lines `radixbench --help` shows without importing the subcommand modules equal
    those each module registers."""
    from radixbench.harness.cli import COMMANDS

    def helps(parser: argparse.ArgumentParser) -> dict[str, str]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return {c.dest: str(c.help) for c in sub._choices_actions}

    stubs = helps(build_parser(""))
    assert stubs == dict(COMMANDS)
    assert helps(build_parser()) == stubs
