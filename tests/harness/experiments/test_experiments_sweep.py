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


def test_killed_sweep_resumes_without_redoing_cells(grid_file, tmp_path) -> None:
    out = tmp_path / "sweep"
    cmd = [
        sys.executable,
        "-m",
        "radixbench.harness",
        "sweep",
        str(grid_file),
        "--out",
        str(out),
        "--workers",
        "2",
        "--no-progress",
    ]
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / "cells").exists() and len(_finished(out / "cells")) >= 1:
                break
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done_before = _finished(out / "cells")
    assert 1 <= len(done_before) < 3, "the sweep must be killed halfway"
    assert not (out / "results.parquet").exists()
    grid = load_grid(grid_file)
    resumed = run_sweep(grid, out, workers=2, progress=False)
    assert resumed.cached == len(done_before)
    assert resumed.ran == 3 - len(done_before) and resumed.failed == []
    after = _finished(out / "cells")
    assert {k: after[k] for k in done_before} == done_before  # finished cells untouched
    assert len(resumed.results) == 6
    assert not any(p.name.startswith(".tmp") for p in (out / "cells").iterdir())


def _crash_once(marker_dir: str, cell: Cell, cells_dir: str) -> str:
    marker = Path(marker_dir) / cell.key
    if not marker.exists():
        marker.write_text("crashed")
        os._exit(1)  # the worker process dies mid-cell
    return run_cell(cell, cells_dir)


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
