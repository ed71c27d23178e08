"""``radixbench bench cache|alloc|sim``: each benchmark parses (and ``--help`` lists) only its own
options, and ``bench sim`` prints each figure once."""

from __future__ import annotations

import pytest

from radixbench.bench import sim as bench_sim
from radixbench.harness.cli import main

SIM_ONLY = ("--variant", "--trace-reps", "--demo-run", "--skip", "--startup-reps")


@pytest.mark.parametrize("target", ["alloc", "cache"])
def test_bench_alloc_and_cache_help_list_no_sim_options(target: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["bench", target, "--help"])
    out = capsys.readouterr().out
    assert "--reps" in out and "(default: runs/bench)" in out, out
    assert not [o for o in SIM_ONLY if o in out], out


def test_bench_alloc_rejects_a_sim_option(capsys) -> None:
    assert main(["bench", "alloc", "--variant", "lru/galloping/numpy"]) == 2
    assert "--variant" in capsys.readouterr().err


def test_bench_sim_help_lists_its_options_and_defaults(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "sim", "--help"])
    out = capsys.readouterr().out
    assert all(o in out for o in SIM_ONLY), out
    assert "--out" not in out and "--reps " not in out
    assert "(default: 3)" in out


def test_bench_sim_prints_each_figure_once(monkeypatch, capsys) -> None:
    monkeypatch.setattr(bench_sim, "time_trace_runs", lambda n, v, reps: [(20, 0.5, 0.6, 99, 0.1)])
    monkeypatch.setattr(bench_sim, "time_help", lambda reps: [0.03])
    monkeypatch.setattr(bench_sim, "time_startup", lambda: 0.9)
    monkeypatch.setattr(bench_sim, "time_report", lambda run, n, simulate, eq: (1.5, 8, 6.0))
    assert main(["bench", "sim", "--quick"]) == 0
    out = capsys.readouterr().out
    figures = ("whole trace:", "of which timed", "start-up to first", "--help:", "report writing")
    for figure in figures:
        assert out.count(figure) == 1, out
    assert "report writing (demo run, 8 requests" in out
    assert "20.0% of the run (its simulation 6.0 s wall; target <= 20%: met)" in out
