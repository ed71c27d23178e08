"""Tests for ``radixbench profile``: options, scalene hot-line parsing, torch profiler labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from radixbench.harness.cli import main
from radixbench.harness.profiling.scalene_profile import hottest_lines, simulation_lines
from radixbench.harness.profiling.target import labelled_batch_builder
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
@pytest.mark.e2e  # scalene
def test_profile_end_to_end(tmp_path, capsys) -> None:
    argv = ["profile", "--requests", "12", "--out", str(tmp_path), "--no-progress",
            "--torch-profiler", "--top", "5"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    (run,) = tmp_path.iterdir()
    prof = run / "profile"
    data = json.loads((prof / "scalene.json").read_text())
    every = hottest_lines(data, 10**9)
    own, _ = simulation_lines(every)  # what the table prints: report writing left out
    assert own and f":{own[0].lineno}" in out.split("hottest lines")[1]
    # the figures are drawn after the profile, outside scalene: none of it is in the profile,
    # and every figure reached the run folder (forked under scalene, one never did)
    assert not any(Path(h.file).name.startswith("plots") for h in every)
    assert (run / "plots" / "verdict_bars.png").is_file() and (run / "report.html").is_file()
    assert (prof / "scalene.html").stat().st_size > 1000
    trace = json.loads((prof / "torch_trace.json").read_text())
    assert any(e.get("name") == "batch_builder.build_extend" for e in trace["traceEvents"])
    assert (run / "report.md").is_file()


_FAKE_SCALENE = '''
"""Stands in for `scalene`: `run ... -o OUT PROG --- ARGS` runs PROG (mode "run") or only
stages a run folder (mode "empty"), then writes a profile with (run) or without samples."""
import json, os, subprocess, sys
from pathlib import Path

argv = sys.argv[1:]
if argv[0] != "run":
    sys.exit(1)  # `view`: no HTML
out = Path(argv[argv.index("-o") + 1])
prog_args = argv[argv.index("---") + 1 :]
prog = argv[argv.index("---") - 1]
mode = os.environ["FAKE_SCALENE_MODE"]
if mode == "run":
    subprocess.run([sys.executable, prog, *prog_args], check=True)
    line = {"lineno": 1, "line": "x", "n_cpu_percent_python": 50.0, "n_cpu_percent_c": 0.0}
    files = {os.environ["FAKE_SCALENE_FILE"]: {"lines": [line]}}
else:
    staged = Path(prog_args[1]) / "20990101-000000"
    staged.mkdir(parents=True)
    (staged / "report.md").write_text("half a run")
    result = {"run_dir": str(staged), "torch_trace": None, "ok": True}
    Path(prog_args[2]).write_text(json.dumps(result))
    files = {}
out.write_text(json.dumps({"elapsed_time_sec": 1.0, "files": files}))
'''


@pytest.fixture
def fake_scalene(tmp_path, monkeypatch):
    """Replace scalene by :data:`_FAKE_SCALENE`; returns a setter of its mode."""
    import sys

    from radixbench.harness.profiling import scalene_profile as profiling

    script = tmp_path / "fake_scalene.py"
    script.write_text(_FAKE_SCALENE)
    monkeypatch.setattr(profiling, "_scalene", lambda: [sys.executable, str(script)])
    monkeypatch.setenv("FAKE_SCALENE_FILE", str(profiling.SOURCE_ROOT / "cache" / "node.py"))
    return lambda mode: monkeypatch.setenv("FAKE_SCALENE_MODE", mode)


@pytest.mark.slow  # runs and renders a real compare in a subprocess
def test_profile_relative_out_lands_in_the_current_folder(
    fake_scalene, tmp_path, monkeypatch, capsys
) -> None:
    # The README's `radixbench profile --requests N`: the default --out is relative, and the
    # profiled program runs in a temporary folder.
    fake_scalene("run")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = ["profile", "--requests", "4", "--out", "runs", "--no-progress", "--no-html"]
    assert main(argv) == 0, capsys.readouterr().err
    (run,) = (work / "runs").iterdir()
    assert (run / "profile" / "scalene.json").is_file() and (run / "report.md").is_file()
    config = json.loads((run / "config.json").read_text())
    assert config["spec"]["out"] == str(work / "runs")  # the real folder, not the staging one
    assert f"run folder: {run}" in capsys.readouterr().out


def test_profile_without_samples_leaves_no_run_folder(fake_scalene, tmp_path, capsys) -> None:
    fake_scalene("empty")
    out = tmp_path / "runs"
    assert main(["profile", "--requests", "4", "--out", str(out), "--no-html"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no samples in the radixbench packages" in err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("editable", [True, False])
def test_scalene_filters_cover_the_package_wherever_installed(editable, tmp_path) -> None:
    # scalene skips files under the interpreter's library folders unless told otherwise, and a
    # non-editable install puts radixbench there: the filters must keep its files, and only them.
    import sysconfig

    import scalene
    from scalene.scalene_arguments import ScaleneArguments
    from scalene.scalene_tracing import ScaleneTracing

    from radixbench.harness.profiling.scalene_profile import scalene_filters

    purelib = Path(sysconfig.get_path("purelib"))
    root = tmp_path / "checkout" if editable else purelib / "radixbench"
    flags = scalene_filters(root)
    assert flags[0] == "--profile-all" and flags[1] == "--profile-only"
    args = ScaleneArguments(profile_all=True, profile_only=flags[2])
    tracing = ScaleneTracing(args, str(Path(scalene.__file__).parent), str(root))
    assert tracing.should_trace(str(root / "cache" / "radix_cache.py"), "match_prefix")
    assert tracing.should_trace(str(root / "sim" / "run.py"), "run")
    assert not tracing.should_trace(str(purelib / "torch" / "functional.py"), "f")
    venv_torch = root / ".venv" / "lib" / "site-packages" / "torch" / "functional.py"
    assert not tracing.should_trace(str(venv_torch), "f")


def test_profile_bad_input_in_the_run_is_one_line(fake_scalene, tmp_path, capsys) -> None:
    # the profiled program's own one-line error comes back as is, and nothing is written
    fake_scalene("run")
    out = tmp_path / "runs"
    argv = ["profile", "prefix-repetition", "--requests", "5", "--kv-capacity", "100"]
    assert main([*argv, "--out", str(out), "--no-progress", "--no-html"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("radixbench: error: --kv-capacity 100 (kv_capacity_tokens): every")
    assert not out.exists() or not any(out.iterdir())


def _hot_profile(root: Path) -> dict:
    """A scalene profile whose hottest lines are savefig (reports/) and an import, with scalene's
    escapes (``\\u003c``) in the code, as scalene 2.x writes them."""

    def line(no: int, cpu: float, code: str) -> dict:
        return {"lineno": no, "line": code, "n_cpu_percent_python": cpu, "n_cpu_percent_c": 0.0}

    return {
        "elapsed_time_sec": 9.0,
        "files": {
            str(root / "reports" / "plots.py"): {"lines": [line(40, 30.0, "fig.savefig(path)")]},
            str(root / "harness" / "experiments" / "compare.py"): {
                "lines": [line(3, 20.0, "import torch"), line(9, 2.0, "x = run(spec)")]
            },
            str(root / "cache" / "matcher.py"): {
                "lines": [line(12, 8.0, "while lo \\u003c hi \\u0026\\u0026 a[lo] \\u003e 0:")]
            },
        },
    }


def test_hottest_lines_undo_scalenes_escapes(tmp_path) -> None:
    (hot,) = [h for h in hottest_lines(_hot_profile(tmp_path)) if h.lineno == 12]
    assert hot.code == "while lo < hi && a[lo] > 0:"


def test_simulation_lines_leave_out_report_writing_and_imports() -> None:
    from radixbench.harness.profiling.scalene_profile import SOURCE_ROOT, simulation_lines

    own, left = simulation_lines(hottest_lines(_hot_profile(SOURCE_ROOT)))
    assert [(Path(h.file).name, h.lineno) for h in own] == [("matcher.py", 12), ("compare.py", 9)]
    assert [(n, cpu) for n, cpu in left.values()] == [(1, 30.0), (1, 20.0)]
    assert any("report writing" in why for why in left) and any("import" in why for why in left)


def test_profile_prints_the_simulations_hot_spots_and_says_what_it_left_out(
    tmp_path, monkeypatch, capsys
) -> None:
    import radixbench.harness.profiling.scalene_profile as scalene_profile
    from radixbench.harness.profiling.scalene_profile import SOURCE_ROOT, ProfileOutcome

    js = tmp_path / "scalene.json"
    js.write_text(json.dumps(_hot_profile(SOURCE_ROOT)))
    outcome = ProfileOutcome(tmp_path, js, None, None, True)
    # the command imports it when it runs (after its flags are checked)
    monkeypatch.setattr(scalene_profile, "profile_compare", lambda spec, torch, html: outcome)
    assert main(["profile", "--out", str(tmp_path), "--no-html"]) == 0
    out = capsys.readouterr().out
    top = out.split("hottest lines in the cache")[0]
    assert "fig.savefig(path)" not in top and "import torch" not in top, top
    assert "while lo < hi && a[lo] > 0:" in top and "\\u003c" not in out
    assert "report writing" in top and "1 lines, 30.0 % cpu" in top, top
