"""Plots drawn by forked workers (``reports/drawing.py``) are the plots drawn serially."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.drawing import draw_plots, plot_workers
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
