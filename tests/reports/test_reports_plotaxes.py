"""Tests for radixbench.reports.plotaxes.top_title: titles drawn where matplotlib's automatic
placement puts them, without laying out the y tick labels to find out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.axis import YAxis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from radixbench.reports import plots
from radixbench.reports.plotaxes import log_ticks, top_title


def _cdf_panel(fixed: bool) -> np.ndarray:
    fig = Figure(figsize=(4.0, 3.0))
    ax = fig.subplots()
    ax.step([10, 100, 1000, 50000], [0.1, 0.4, 0.8, 1.0], where="post")
    ax.set_xscale("log")
    log_ticks(ax, "x")
    ax.set_ylim(0.0, 1.02)
    if fixed:
        top_title(ax, "match_prefix", fontsize="small")
    else:
        ax.set_title("match_prefix", fontsize="small")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def test_top_title_draws_the_auto_placed_title_pixel_for_pixel() -> None:
    assert (_cdf_panel(fixed=True) == _cdf_panel(fixed=False)).all()


def test_top_title_keeps_its_font_options() -> None:
    ax = Figure().subplots()
    top_title(ax, "t", fontsize=5, loc="left")
    assert ax.get_title(loc="left") == "t"
    assert ax._left_title.get_fontsize() == 5


def test_op_cdf_never_lays_out_y_tick_labels_to_place_its_titles(
    tmp_path: Path, ops_df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    real = YAxis.get_tightbbox

    def spy(self, *args, **kwargs):
        calls.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(YAxis, "get_tightbbox", spy)
    plots.plot_op_cdf(ops_df, tmp_path / "op_cdf.png")
    assert calls == []
