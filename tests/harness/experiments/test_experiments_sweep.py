from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle
import pytest

from radixbench.harness.cli import main
from radixbench.harness.config.grid import Cell, load_grid
from radixbench.harness.experiments.sweep import run_cell, run_sweep

cloudpickle.register_pickle_by_value(sys.modules[__name__])

GRID = """
scenario = "mooncake-conversation"
[base]
arrivals.max_requests = 25
scheduler.max_running = 8
[grid]
"sim.kv_capacity_tokens" = [60000, 120000, 240000]
[variants]
evictors = ["heapify", "persistent-heap"]
matchers = ["galloping"]
"""


@pytest.fixture(scope="module")
def cluster():
    """One LocalCluster (2 worker processes) shared by the in-process tests, reached through
    its address as `--scheduler tcp://...` would be; the kill test starts its own."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as c:
        yield c


@pytest.fixture
def grid_file(tmp_path: Path) -> Path:
    p = tmp_path / "g.toml"
    p.write_text(GRID)
    return p


def _finished(cells: Path) -> dict[str, int]:
    """Finished cell folders -> inode of their config.json."""
    return {
        d.name: (d / "config.json").stat().st_ino
        for d in cells.iterdir()
        if not d.name.startswith(".") and (d / "config.json").exists()
    }


@pytest.mark.e2e  # a Dask cluster
def test_sweep_runs_gathers_and_resumes(grid_file, tmp_path, cluster) -> None:
    grid = load_grid(grid_file)
    out = tmp_path / "sweep"
    first = run_sweep(grid, out, scheduler=cluster.scheduler_address, progress=False)
    assert first.failed == [] and first.cached == 0 and first.ran == 3  # one cell per point
    res = first.results
    assert len(res) == 6  # a row per cell and variant
    cand = res[res["evictor"] == "persistent-heap"]
    assert cand["baseline_variant"].eq("heapify/galloping/numpy").all()
    assert {"evict_ratio", "evict_ci_low", "evict_ci_high", "evict_verdict"} <= set(res.columns)
    assert "overloaded" in res.columns
    assert set(res["evictor"]) == {"heapify", "persistent-heap"}
    assert sorted(set(res["sim.kv_capacity_tokens"])) == [60000, 120000, 240000]
    assert (res["evict_p99_ns"].dropna() > 0).all()
    assert (out / "results.parquet").exists() and (out / "results.csv").exists()
    assert any(p.name.startswith("evict_p99_ns_vs_") for p in first.plots)
    before = _finished(out / "cells")
    second = run_sweep(grid, out, scheduler=cluster.scheduler_address, progress=False)
    assert second.cached == 3 and second.ran == 0
    assert _finished(out / "cells") == before  # nothing re-run
    assert second.results.equals(first.results)


#: ``radixbench sweep GRID --out OUT --workers 2 --no-progress`` (the CLI, in its own process)
#: with its cells gated by files in MARKERS: each cell takes the next free ticket
#: (``ticket-N``, created exclusively); tickets 0 and 1 run the cell, the later one opens the
#: cell's run folder as a real cell does (``AtomicRunDir``), writes ``blocked-<cell key>`` and
#: waits there until the test kills the process group. So the sweep is killed with exactly two
#: of its three cells finished and the third mid-cell, however slow the machine (it used to be
#: killed once a poll saw >= 1 finished cell, asserting "halfway" by counts).
_GATED_SWEEP = """
import importlib, os, sys, time
from pathlib import Path

from radixbench.harness.cli import main
from radixbench.harness.experiments import sweep
from radixbench.harness.experiments.rundir import AtomicRunDir


def gated(cell, cells_dir, markers):
    ticket = 0
    while True:
        try:
            os.close(os.open(os.path.join(markers, f"ticket-{ticket}"), os.O_CREAT | os.O_EXCL))
            break
        except FileExistsError:
            ticket += 1
    if ticket < 2:
        return sweep.run_cell(cell, cells_dir)
    with AtomicRunDir(Path(cells_dir), cell.key):
        Path(markers, f"blocked-{cell.key}").touch()
        while True:
            time.sleep(60)


if __name__ == "__main__":  # not in the workers (started by spawning this script again)
    grid, out, markers = sys.argv[1:]
    cli = importlib.import_module("radixbench.harness.cli.sweep")
    assert cli.run_sweep is sweep.run_sweep
    cell_fn = lambda cell, cells_dir: gated(cell, cells_dir, markers)
    cli.run_sweep = lambda *args, **kw: sweep.run_sweep(*args, **kw, cell_fn=cell_fn)
    sys.exit(main(["sweep", grid, "--out", out, "--workers", "2", "--no-progress"]))
"""


@pytest.mark.e2e  # a Dask cluster
def test_killed_sweep_resumes_without_redoing_cells(grid_file, tmp_path) -> None:
    out = tmp_path / "sweep"
    cells = out / "cells"
    markers = tmp_path / "markers"
    markers.mkdir()
    script = tmp_path / "gated_sweep.py"
    script.write_text(_GATED_SWEEP)
    log = tmp_path / "sweep.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(grid_file), str(out), str(markers)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    # Wait for the state, not for a time: 2 cells finished and the third blocked inside its run
    # folder (the deadline only stops a hung run).
    deadline = time.monotonic() + 600
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            blocked = list(markers.glob("blocked-*"))
            if len(blocked) == 1 and cells.exists() and len(_finished(cells)) == 2:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(
                f"the gated sweep never reached 2 finished + 1 blocked cell "
                f"(exit {proc.poll()}):\n{log.read_text()[-3000:]}"
            )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done_before = _finished(cells)
    assert len(done_before) == 2
    half_written = sorted(p.name for p in cells.iterdir() if p.name.startswith(".tmp-"))
    assert len(half_written) == 1, half_written  # the killed cell's run folder
    assert not (out / "results.parquet").exists()
    grid = load_grid(grid_file)
    resumed = run_sweep(grid, out, workers=2, progress=False)
    assert resumed.cached == 2
    assert resumed.ran == 1 and resumed.failed == []
    after = _finished(cells)
    assert {k: after[k] for k in done_before} == done_before  # finished cells untouched
    assert len(after) == 3 and len(resumed.results) == 6  # 3 grid points x 2 evictors
    assert not any(p.name.startswith(".tmp") for p in cells.iterdir())


def _crash_once(marker_dir: str, cell: Cell, cells_dir: str) -> str:
    marker = Path(marker_dir) / cell.key
    if not marker.exists():
        marker.write_text("crashed")
        os._exit(1)  # the worker process dies mid-cell
    return run_cell(cell, cells_dir)


@pytest.mark.e2e  # a Dask cluster
def test_cell_whose_worker_died_is_retried(grid_file, tmp_path, cluster) -> None:
    grid = load_grid(grid_file)
    grid = type(grid)(grid.path, grid.description, grid.params, grid.cells[:2])
    markers = tmp_path / "markers"
    markers.mkdir()
    outcome = run_sweep(
        grid,
        tmp_path / "sweep",
        scheduler=cluster.scheduler_address,
        progress=False,
        # a closure, not functools.partial: plain pickle would send the partial by reference to
        # this test module, which the workers cannot import; a closure goes through cloudpickle,
        # by value (register_pickle_by_value above)
        cell_fn=lambda cell, cells_dir: _crash_once(str(markers), cell, cells_dir),
    )
    assert outcome.failed == []
    assert len(outcome.results) == 4  # 2 cells (points) x 2 variants
    assert len(list(markers.iterdir())) == 2  # each cell's first attempt did crash


def test_cli_bad_scheduler_and_grid(tmp_path, capsys) -> None:
    assert main(["sweep", str(tmp_path / "none.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
    g = tmp_path / "g.toml"
    g.write_text(GRID)
    assert main(["sweep", str(g), "--scheduler", "localhost:1"]) == 2
    assert "--scheduler" in capsys.readouterr().err


@pytest.mark.e2e  # a Dask cluster
def test_cell_with_bad_input_fails_in_one_line(tmp_path, cluster, capfd) -> None:
    # Every request of prefix-repetition needs 640 KV slots: these cells cannot run at all.
    g = tmp_path / "tiny.toml"
    g.write_text(
        'scenario = "prefix-repetition"\n[base]\narrivals.max_requests = 5\n'
        '[grid]\n"sim.kv_capacity_tokens" = [100, 200]\n[variants]\nevictors = ["heapify"]\n'
    )
    argv = ["sweep", str(g), "--out", str(tmp_path / "sw"), "--no-progress",
            "--scheduler", cluster.scheduler_address]  # fmt: skip
    assert main(argv) == 1
    captured = capfd.readouterr()
    text = captured.out + captured.err
    assert "Compute Failed" not in text and "Traceback" not in text
    failed = [ln for ln in captured.out.splitlines() if ln.strip().startswith("failed cell")]
    assert len(failed) == 2
    assert all("--kv-capacity" in ln and "every request would be rejected" in ln for ln in failed)
    assert any("sim.kv_capacity_tokens=100, seed 0" in ln for ln in failed)
    assert "0 run now, 0 already finished, 2 failed" in captured.out
