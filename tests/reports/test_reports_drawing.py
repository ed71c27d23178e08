"""Plots drawn by forked workers (``reports/drawing.py``) are the plots drawn serially."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.drawing import Drawing, PlotJob, draw_plots, plot_workers
from radixbench.reports.plots import plot_op_cdf


def _ops() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 400
    return pd.DataFrame(
        {
            "variant": ["a"] * n + ["b"] * n,
            "op": (["match_prefix", "insert"] * n),
            "ns": rng.integers(100, 10_000, 2 * n),
        }
    )


def _steps(ops: pd.DataFrame) -> dict:
    return {
        "op_cdf": lambda p: plot_op_cdf(ops, p),
        "op_cdf_b": lambda p: plot_op_cdf(ops[ops["variant"] == "b"], p),
        "other": lambda p: plot_op_cdf(ops[ops["op"] == "insert"], p),
    }


def test_forked_workers_write_the_serial_figures_byte_for_byte(tmp_path: Path) -> None:
    ops = _steps(_ops())
    serial = dict(draw_plots(ops, tmp_path / "serial", workers=0))
    forked = dict(draw_plots(ops, tmp_path / "forked", workers=2))
    assert list(serial) == list(ops) and sorted(forked) == sorted(ops)
    for name in ops:
        assert forked[name] == tmp_path / "forked" / f"{name}.png"
        assert forked[name].read_bytes() == serial[name].read_bytes(), name


def test_an_error_in_a_worker_is_raised_here(tmp_path: Path) -> None:
    def broken(_path: Path) -> Path:
        raise ValueError("no such column: ttft_s")

    steps = {"fine": lambda p: plot_op_cdf(_ops(), p), "broken": broken}
    with pytest.raises(ValueError, match="no such column"):
        list(draw_plots(steps, tmp_path, workers=2))


def test_workers_follow_the_cores_and_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RADIXBENCH_PLOT_WORKERS", "0")
    assert plot_workers(9) == 0
    monkeypatch.setenv("RADIXBENCH_PLOT_WORKERS", "3")
    assert plot_workers(9) == 3 and plot_workers(2) == 2 and plot_workers(1) == 0


def _freeze_count(path: Path) -> Path:
    """A figure stand-in: writes how many objects the process drawing it has frozen."""
    import gc

    path.write_text(str(gc.get_freeze_count()))
    return path


def _plot_job(ops: pd.DataFrame, variant: str) -> PlotJob:
    return PlotJob("radixbench.reports.plots", "plot_op_cdf", (ops[ops["variant"] == variant],))


def test_late_figures_are_drawn_by_the_workers_as_serially(tmp_path: Path) -> None:
    import gc

    gc.unfreeze()  # a CLI test run in this process before may have frozen its heap (preload)
    ops = _ops()
    jobs = {"a": _plot_job(ops, "a"), "frozen": PlotJob(__name__, "_freeze_count")}
    drawn = {}
    for where, workers in (("serial", 0), ("forked", 2)):
        with Drawing(jobs, tmp_path / where, workers=workers, late=1) as drawing:
            drawing.add("b", _plot_job(ops, "b"))  # sent to the drawing process, pickled
            drawn[where] = dict(drawing.results())
            assert drawing.names == ["a", "frozen", "b"]
    assert sorted(drawn["forked"]) == ["a", "b", "frozen"]
    for name in ("a", "b"):
        assert drawn["forked"][name].read_bytes() == drawn["serial"][name].read_bytes()
    # the drawing processes freeze the heap they inherit: their collections never walk it
    assert int(drawn["serial"]["frozen"].read_text()) == 0
    assert int(drawn["forked"]["frozen"].read_text()) > 10_000


def test_an_error_in_a_late_figure_is_raised_here_and_leaves_no_process(tmp_path: Path) -> None:
    with Drawing({"fine": _plot_job(_ops(), "a")}, tmp_path, workers=2, late=1) as drawing:
        drawing.add("late", PlotJob("radixbench.reports.plots", "no_such_plot"))
        with pytest.raises(AttributeError, match="no_such_plot"):
            list(drawing.results())
        proc = drawing._proc
    assert proc is None or not proc.is_alive()


def test_leaving_early_stops_the_drawing(tmp_path: Path) -> None:
    drawing = Drawing({"a": _plot_job(_ops(), "a")}, tmp_path, workers=2)
    proc = drawing._proc
    assert proc is not None and proc.is_alive()
    with pytest.raises(KeyError), drawing:
        raise KeyError("the tables failed")
    assert not proc.is_alive()


_CALLER = """
import json, sys
from pathlib import Path
import pandas as pd
from radixbench.reports.pipeline import write_report
out = Path(sys.argv[1])
seen = {}
def answered(result):  # the tables are written, no figure is drawn yet
    seen["plots at the answer"] = sorted(p.name for p in (out / "plots").glob("*.png"))
req, ops = (pd.read_parquet(sys.argv[i]) for i in (2, 3))
eq = json.loads(Path(sys.argv[4]).read_text())
write_report(out, req, ops, {"seed": 0}, eq, progress=False, on_answer=answered)
print(sorted(p.name for p in (out / "plots").iterdir()))
print("matplotlib" in sys.modules, seen)
"""


def test_the_caller_never_imports_matplotlib_and_draws_after_the_answer(
    tmp_path: Path, requests_df: pd.DataFrame, ops_df: pd.DataFrame, equivalence_ok: dict
) -> None:
    """write_report in a fresh process: no figure is drawn before its answer, and matplotlib
    is imported only by the drawing processes (the old code imported it here)."""
    import os
    import subprocess
    import sys

    requests_df.to_parquet(tmp_path / "req.parquet")
    ops_df.to_parquet(tmp_path / "ops.parquet")
    (tmp_path / "eq.json").write_text(json.dumps(equivalence_ok))
    env = dict(os.environ, RADIXBENCH_PLOT_WORKERS="2")
    args = [str(tmp_path / name) for name in ("run", "req.parquet", "ops.parquet", "eq.json")]
    proc = subprocess.run(
        [sys.executable, "-c", _CALLER, *args],
        capture_output=True, text=True, env=env, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.splitlines()
    assert "request_cdfs.png" in out[-2] and "verdict_bars.png" in out[-2]
    assert out[-1] == "False {'plots at the answer': []}"


def test_the_drawing_processes_import_before_they_are_asked_to_draw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drawing process imports a job's module as soon as it starts (beside the caller's
    tables) and draws nothing until :meth:`Drawing.results` is asked."""
    import sys
    import time

    marker = tmp_path / "imported"
    (tmp_path / "slow_plots.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('yes')\n"
        "def draw(path):\n    path.write_text('figure')\n    return path\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with Drawing({"fig": PlotJob("slow_plots", "draw")}, tmp_path / "plots", workers=2) as d:
        for _ in range(600):
            if marker.exists():
                break
            time.sleep(0.05)
        assert marker.exists() and "slow_plots" not in sys.modules
        assert not (tmp_path / "plots" / "fig.png").exists()
        assert dict(d.results()) == {"fig": tmp_path / "plots" / "fig.png"}
    assert (tmp_path / "plots" / "fig.png").read_text() == "figure"


_SIGTERM_AT_FORK = """
import os, signal, sys
from pathlib import Path
from radixbench.reports.drawing import Drawing

class Terminated(Exception):
    pass

def on_term(*_):
    raise Terminated

signal.signal(signal.SIGTERM, on_term)
sent = []
import threading
idle = threading.Event()
other = threading.Thread(target=idle.wait, daemon=True)  # as torch's or Arrow's threads
other.start()

def before_fork():  # the signal lands while the drawing process is forked
    if not sent:
        sent.append(1)
        if sys.argv[2] == "thread":  # taken by a thread that does not block it
            signal.pthread_kill(other.ident, signal.SIGTERM)
        else:
            os.kill(os.getpid(), signal.SIGTERM)

os.register_at_fork(before=before_fork)
try:
    with Drawing({"a": lambda path: path}, Path(sys.argv[1]), workers=2) as d:
        d.results()
except Terminated:
    sys.exit(143)
sys.exit(0)
"""


@pytest.mark.parametrize("receiver", ["process", "thread"])
def test_a_sigterm_during_the_fork_is_not_lost(tmp_path: Path, receiver: str) -> None:
    """A SIGTERM arriving while the drawing process is forked: the caller's handler ran inside
    an at-fork callback, where Python ignores exceptions, and the run went on to exit 0 (seen
    in CI on test_sigterm_leaves_no_temporary_folder). The signal is only noted during the
    fork and raised after it, also when another thread takes it (``thread``; the CI failure
    came after masking the signal in the forking thread only, likely that way, though this
    test does not reproduce it: the thread's handler races the fork)."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _SIGTERM_AT_FORK, str(tmp_path), receiver],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 143, proc.stderr


def test_sigterm_deferred_notes_the_signal_and_raises_it_after() -> None:
    """:func:`_sigterm_deferred`'s mechanics: inside it a SIGTERM raises nothing; on leaving
    it the caller's handler gets the signal (and is the handler again); without a signal
    nothing is raised."""
    import os
    import signal

    from radixbench.reports.drawing import _sigterm_deferred

    class Term(Exception):
        pass

    def handler(signum: int, frame: object) -> None:
        raise Term

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        reached = False
        with pytest.raises(Term), _sigterm_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            reached = True  # nothing raised inside the block
        assert reached
        assert signal.getsignal(signal.SIGTERM) is handler
        with _sigterm_deferred():
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
