"""Tests for ``radixbench profile``: options, scalene hot-line parsing, torch profiler labels."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from radixbench.harness.cli import main
from radixbench.harness.profile_target import labelled_batch_builder
from radixbench.harness.profiling import hottest_lines
from radixbench.sim.batch import BatchBuilder


def _profile_json() -> dict:
    def line(no: int, py: float, c: float, sys: float = 0.0) -> dict:
        return {"lineno": no, "line": f"  code_{no}()\n", "n_cpu_percent_python": py,
                "n_cpu_percent_c": c, "n_sys_percent": sys}  # fmt: skip

    return {
        "elapsed_time_sec": 3.0,
        "files": {
            "/src/a.py": {"lines": [line(1, 0.0, 0.0), line(2, 10.0, 5.0), line(3, 1.0, 0.0)]},
            "/src/b.py": {"lines": [line(7, 20.0, 0.0, 1.0), line(8, 0.5, 0.5)]},
        },
    }


def test_hottest_lines_ranks_by_total_cpu() -> None:
    hot = hottest_lines(_profile_json(), top=3)
    assert [(h.file, h.lineno) for h in hot] == [("/src/b.py", 7), ("/src/a.py", 2),
                                                  ("/src/a.py", 3)]  # fmt: skip
    assert hot[0].cpu_percent == pytest.approx(21.0)
    assert hot[1].python_percent == 10.0 and hot[1].native_percent == 5.0
    assert hot[1].code == "code_2()"
    assert len(hottest_lines(_profile_json(), top=10)) == 4  # the idle line is left out
    with pytest.raises(ValueError, match="files"):
        hottest_lines({"not": "scalene"})


def test_profile_takes_the_compare_options(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    out = capsys.readouterr().out
    for option in ("--evictors", "--matchers", "--requests", "--torch-profiler", "--top"):
        assert option in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [(["--evictors", "bogus"], "bogus"), (["--top", "0"], "--top"), (["--x"], "unrecognized")],
)
def test_profile_bad_options_one_line(argv, needle, tmp_path, capsys) -> None:
    assert main(["profile", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not any(tmp_path.iterdir())


def test_batch_builder_calls_are_labelled_and_restored(monkeypatch) -> None:
    def fake_build(self, reqs, out_cache_loc):
        return torch.arange(8).sum()

    monkeypatch.setattr(BatchBuilder, "build_extend", fake_build)
    with labelled_batch_builder(), profile(activities=[ProfilerActivity.CPU]) as prof:
        assert BatchBuilder.build_extend is not fake_build
        assert int(BatchBuilder.build_extend(None, [], None)) == 28
    assert BatchBuilder.build_extend is fake_build
    names = {e.name for e in prof.events()}
    assert "batch_builder.build_extend" in names


@pytest.mark.slow
def test_profile_end_to_end(tmp_path, capsys) -> None:
    argv = ["profile", "--requests", "12", "--out", str(tmp_path), "--no-progress",
            "--torch-profiler", "--top", "5"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    (run,) = tmp_path.iterdir()
    prof = run / "profile"
    data = json.loads((prof / "scalene.json").read_text())
    hot = hottest_lines(data, 5)
    assert hot and f":{hot[0].lineno}" in out.split("hottest lines")[1]
    assert (prof / "scalene.html").stat().st_size > 1000
    trace = json.loads((prof / "torch_trace.json").read_text())
    assert any(e.get("name") == "batch_builder.build_extend" for e in trace["traceEvents"])
    assert (run / "report.md").is_file()
