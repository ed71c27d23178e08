"""``radixbench bench sim``: runs on a tiny trace and prints every figure; its markdown section
replaces only what lies between its own markers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from radixbench.bench import sim as bench_sim
from radixbench.bench.benchmarks_md import END, START, write_section
from radixbench.bench.calibration import Calibration
from radixbench.harness.cli import main


def test_bench_sim_on_a_tiny_trace_prints_the_trace_and_help_figures(capsys) -> None:
    argv = ["bench", "sim", "--requests", "20", "--help-reps", "1", "--skip", "startup,report"]
    code = main([*argv, "--trace-reps", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    m = re.search(
        r"whole trace: 20 requests, .* cpu ([\d.]+) s \(= [\d.e+-]+ cal\) \(best of 2 fresh "
        r"processes: "
        r"([\d.]+), ([\d.]+) s\), .* ([\d,]+) events per cpu s",
        out,
    )
    assert m and float(m[1]) == min(float(m[2]), float(m[3])) > 0, out
    assert int(m[4].replace(",", "")) > 0, out
    assert re.search(r"radixbench --help: [\d.]+ s wall \(= [\d.e+-]+ cal\)", out)
    assert re.search(r"^calibration \(this run, .* = 1 cal;", out, re.M)
    assert "start-up" not in out and "report writing" not in out


@pytest.mark.slow
def test_bench_sim_prints_every_figure_and_writes_its_section(tmp_path: Path, capsys) -> None:
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Cache microbenchmarks\n\nkept\n", encoding="utf-8")
    code = main(
        [
            "bench", "sim", "--requests", "20", "--demo-requests", "8", "--help-reps", "1",
            "--startup-reps", "2", "--markdown", str(md),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    m = re.search(
        r"whole trace: 20 requests, .* cpu ([\d.]+) s \(= [\d.e+-]+ cal\) \(best of 3 fresh "
        r"processes: [\d., ]+ s\), "
        r"wall ([\d.]+) s, ([\d,]+) events",
        out,
    )
    assert m and float(m[1]) > 0 and int(m[3].replace(",", "")) > 0, out
    assert re.search(r"[\d,]+ events per cpu s", out)
    assert re.search(
        r"start-up to first simulated event: [\d.]+ s wall \(= [\d.,e+-]+ cal\) \(best of 2;", out
    )
    assert re.search(r"radixbench --help: [\d.]+ s wall", out)
    assert re.search(r"report writing \(demo run, 8 requests", out)
    text = md.read_text(encoding="utf-8")
    assert text.startswith("# Cache microbenchmarks\n\nkept\n")
    assert text.count(START) == 1 and "## Simulator speed" in text and "- cpu:" in text


def test_write_section_replaces_only_between_markers(tmp_path: Path) -> None:
    md = tmp_path / "B.md"
    md.write_text(f"head\n{START}\nold\n{END}\ntail\n", encoding="utf-8")
    write_section(md, f"{START}\nnew\n{END}\n")
    assert md.read_text(encoding="utf-8") == f"head\n{START}\nnew\n{END}\n\ntail\n"


def test_unknown_skip_is_a_usage_error(capsys) -> None:
    assert main(["bench", "sim", "--skip", "trace,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err


@pytest.mark.parametrize("fig", ["trace", "startup", "help", "report"])
def test_skip_leaves_a_figure_out(fig: str) -> None:
    b = bench_sim.SimBench(requests=3, trace_cpu_s=1.0, trace_wall_s=1.0, events=10)
    b.startup_s, b.help_s, b.report_s = [0.5], [0.2], 1.0
    assert len(bench_sim.lines(b)) == 5
    b.cal = Calibration(python_ns=5e6, numpy_ns=3e6, samples=1)
    lines = bench_sim.lines(b)
    assert len(lines) == 6 and lines[-1].startswith("calibration (this run")
    assert "cpu 1.00 s (= 200 cal)" in lines[0] and "0.50 s wall (= 100 cal)" in lines[2]
    assert "of the run" not in lines[4]  # no run wall time: no share
    b.report_run_wall_s = 3.0
    assert (
        "25.0% of the run (its simulation 3.0 s wall; target <= 20%: NOT met)"
        in (bench_sim.lines(b)[4])
    )
    b.report_s = None
    assert not any("report" in x for x in bench_sim.lines(b))


def test_bench_cache_markdown_keeps_the_simulator_speed_section(tmp_path: Path) -> None:
    from radixbench.bench.benchmarks_md import write_document

    md = tmp_path / "BENCHMARKS.md"
    sim = f"{START}\n## Simulator speed\nfigures\n{END}\n"
    md.write_text("# old cache report\n\n" + sim, encoding="utf-8")
    write_document(md, "# new cache report\n")
    assert md.read_text(encoding="utf-8") == "# new cache report\n\n" + sim
    bare = tmp_path / "bare.md"
    write_document(bare, "# only\n")
    assert bare.read_text(encoding="utf-8") == "# only\n"


def test_bench_cache_markdown_keeps_the_step_time_answers(tmp_path: Path) -> None:
    """The hand-written AIC-vs-roofline answers (issue 29) survive ``bench cache``'s rewrite."""
    from radixbench.bench.benchmarks_md import ANSWERS_END, ANSWERS_START, write_document

    md = tmp_path / "BENCHMARKS.md"
    answers = f"{ANSWERS_START}\n## Step times in the answers\nfigures\n{ANSWERS_END}\n"
    md.write_text("# old cache report\n\n" + answers, encoding="utf-8")
    write_document(md, "# new cache report\n")
    assert md.read_text(encoding="utf-8") == "# new cache report\n\n" + answers


def test_benchmark_files_get_the_mode_of_a_plain_write(tmp_path: Path) -> None:
    from radixbench.bench.benchmarks_md import write_document

    plain = tmp_path / "plain.md"
    plain.write_text("x\n", encoding="utf-8")
    mode = plain.stat().st_mode & 0o777
    sim, cache = tmp_path / "sim.md", tmp_path / "cache.md"
    write_section(sim, f"{START}\nnew\n{END}\n")
    write_document(cache, "# report\n")
    assert sim.stat().st_mode & 0o777 == mode == cache.stat().st_mode & 0o777  # not 0600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failing_trace_run_is_a_one_line_error(capsys) -> None:
    code = main(
        ["bench", "sim", "--variant", "nope/galloping/numpy", "--skip", "startup,help,report"]
    )
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: bench sim: whole-trace run exited"), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
