"""One-line errors that say what is wrong and where (issue 22): a ``--trace`` folder, a mistake
made on the command line blamed on its flag (not the bundled scenario file), and a KV pool too
small for every request worded without contradicting itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from radixbench.harness.cli import main


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("radixbench: error:"), err
    return lines[0]


@pytest.mark.parametrize("command", ["compare", "replay"])
def test_trace_folder_is_named_a_folder(command, tmp_path, capsys) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    out = tmp_path / "runs"
    assert main([command, "--trace", str(folder), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert line == f"radixbench: error: --trace: {folder} is a folder; give a trace file"
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "blamed"),
    [
        (["--evictors", "heapify,heapify"], "--evictors: variants.evictors: "),
        (["--matchers", "linear,galloping,linear"], "--matchers: variants.matchers: "),
        (["--flatten", "numpy,numpy"], "--flatten: variants.flatten: "),
        (["--set", "nosuch.key=1"], "--set nosuch.key=1: nosuch: unknown key"),
        (["--set", "nosuch.deeper.key=1"], "--set nosuch.deeper.key=1: nosuch: unknown key"),
    ],
)
def test_command_line_mistake_is_blamed_on_its_flag(argv, blamed, tmp_path, capsys) -> None:
    assert main(["compare", *argv, "--out", str(tmp_path)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"radixbench: error: {blamed}"), line
    assert ".toml" not in line


def test_repeated_variant_names_the_repeated_value(tmp_path, capsys) -> None:
    assert main(["compare", "--evictors", "heapify,persistent-heap,heapify", "--out",
                 str(tmp_path)]) == 2  # fmt: skip
    line = _one_error_line(capsys)
    assert line.endswith("'heapify' is listed twice")


def test_repeat_in_the_scenario_file_is_still_blamed_on_the_file(tmp_path, capsys) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'description = "d"\n[workload]\nkind = "prefix-repetition"\n'
        '[arrivals]\nprocess = "poisson"\nrate = 1.0\n'
        '[variants]\nevictors = ["heapify", "heapify"]\n'
    )
    assert main(["compare", str(scenario), "--out", str(tmp_path / "runs")]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"radixbench: error: {scenario}: variants.evictors: ")


def test_kv_capacity_below_every_request_is_worded_without_contradiction(
    tmp_path: Path, capsys
) -> None:
    out = tmp_path / "runs"
    argv = ["compare", "prefix-repetition", "--requests", "20", "--kv-capacity", "640"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 2
    line = _one_error_line(capsys)
    # prefix-repetition: 256 prefix + 256 suffix + 128 output tokens per request
    assert line == (
        "radixbench: error: --kv-capacity 640 (kv_capacity_tokens): every request would be "
        "rejected: the smallest request has 640 input + output tokens and the scheduler admits "
        "only requests with fewer tokens than the pool; use --kv-capacity 641 or more"
    )
    assert "needs" not in line


@pytest.mark.parametrize(
    ("argv", "head"),
    [
        (["--start", "1e9"], "radixbench: error: --start 1e+09: past the end of the trace (its "),
        (["--start", "10", "--window", "0.0001"],
         "radixbench: error: --window 0.0001: no request arrives in [10, 10.0001) s (its "),
    ],
)  # fmt: skip
def test_an_empty_selection_names_the_flag_and_the_traces_span(
    argv: list[str], head: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31, item 11: ``--start`` past the trace named neither ``--start`` nor the span."""
    out = tmp_path / "runs"
    assert main(["compare", "mooncake-conversation", *argv, "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(head), line
    assert re.search(r"its [\d,]+ requests arrive 0-[\d,]+\.\d s after the first\)$", line), line
    assert not out.exists()


def test_an_empty_selection_set_in_the_file_names_the_file(tmp_path: Path, capsys) -> None:
    from radixbench.harness.config.scenario import bundled_scenarios

    text = bundled_scenarios()["mooncake-conversation"].read_text()
    scenario = tmp_path / "s.toml"
    scenario.write_text(text.replace("[arrivals]\n", "[arrivals]\nstart_s = 1e9\n", 1))
    assert main(["compare", str(scenario), "--out", str(tmp_path / "runs")]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"radixbench: error: {scenario}: arrivals.start_s 1e+09: past the end")
