"""Tests for radixbench.reports.plots: PNG output, labels, slopes, empty inputs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from radixbench.reports import plots
from radixbench.reports.plots import (
    CDF_OPS,
    fit_loglog_slope,
    plot_evict_vs_leaves,
    plot_match_vs_len,
    plot_op_cdf,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTTERS = [plot_op_cdf, plot_evict_vs_leaves, plot_match_vs_len]


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Record every figure the plot functions save (they still write their file)."""
    figures: list[Figure] = []
    real_save = plots._save

    def spy(fig: Figure, path: Path | str) -> Path:
        figures.append(fig)
        return real_save(fig, path)

    monkeypatch.setattr(plots, "_save", spy)
    return figures


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 2000


@pytest.mark.parametrize("plotter", PLOTTERS)
def test_writes_png(tmp_path: Path, ops_df: pd.DataFrame, plotter) -> None:
    target = tmp_path / "plots" / f"{plotter.__name__}.png"
    assert plotter(ops_df, target) == target
    _assert_png(target)
    svg = target.with_suffix(".svg")
    assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert "<svg" in svg.read_text(encoding="utf-8")
    # PNG and SVG, no temp files
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name, svg.name]


@pytest.mark.parametrize("plotter", PLOTTERS)
def test_empty_ops_say_no_data(
    tmp_path: Path, ops_df: pd.DataFrame, plotter, captured: list[Figure]
) -> None:
    target = plotter(ops_df.iloc[0:0], tmp_path / "empty.png")
    _assert_png(target)
    (fig,) = captured
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "no data" in texts


def test_cdf_panels_titles_and_units(tmp_path: Path, ops_factory, captured: list[Figure]) -> None:
    ops = ops_factory(counts={"match_prefix": 50, "insert": 40, "dec_lock_ref": 30})
    plot_op_cdf(ops, tmp_path / "cdf.png")
    (fig,) = captured
    assert fig.get_suptitle()
    visible = [ax for ax in fig.axes if ax.get_visible()]
    titles = [ax.get_title() for ax in visible]
    assert titles == [*CDF_OPS, "dec_lock_ref"]
    by_title = {ax.get_title(): ax for ax in visible}
    for op in ("evict", "build_extend"):  # absent: skipped with a note
        assert [t.get_text() for t in by_title[op].texts] == ["no data"]
        assert not by_title[op].get_lines()
    for op in ("match_prefix", "insert", "dec_lock_ref"):
        ax = by_title[op]
        assert len(ax.get_lines()) == 4  # one CDF per variant
        assert "ns" in ax.get_xlabel()
        assert ax.get_ylabel()
        assert ax.get_xscale() == "log"
        ys = np.asarray(ax.get_lines()[0].get_ydata())
        assert ys[-1] == pytest.approx(1.0)
        assert np.all(np.diff(ys) >= 0)


def _legend_slopes(fig: Figure) -> dict[str, float]:
    (ax,) = fig.axes
    legend = ax.get_legend()
    assert legend is not None
    slopes = {}
    for text in legend.get_texts():
        m = re.match(r"(\S+) \(slope ([-\d.]+), n=\d+\)", text.get_text())
        assert m, text.get_text()
        slopes[m.group(1)] = float(m.group(2))
    return slopes


def test_evict_plot_shows_fitted_slopes(
    tmp_path: Path, ops_df: pd.DataFrame, captured: list[Figure]
) -> None:
    plot_evict_vs_leaves(ops_df, tmp_path / "evict.png")
    (fig,) = captured
    (ax,) = fig.axes
    assert ax.get_title()
    assert "ns" in ax.get_ylabel()
    assert "leaves" in ax.get_xlabel()
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    slopes = _legend_slopes(fig)
    assert set(slopes) == {"heapify", "persistent-heap"}
    assert slopes["heapify"] == pytest.approx(1.0, abs=0.1)  # heapify is O(leaves)
    assert slopes["persistent-heap"] < 0.4  # O(log leaves)


def test_match_plot_groups_by_matcher(
    tmp_path: Path, ops_df: pd.DataFrame, captured: list[Figure]
) -> None:
    plot_match_vs_len(ops_df, tmp_path / "match.png")
    (fig,) = captured
    (ax,) = fig.axes
    assert "tokens" in ax.get_xlabel()
    assert "ns" in ax.get_ylabel()
    slopes = _legend_slopes(fig)
    assert set(slopes) == {"linear", "galloping"}
    assert slopes["linear"] == pytest.approx(1.0, abs=0.1)
    assert slopes["galloping"] < 0.4


def test_fit_loglog_slope() -> None:
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    assert fit_loglog_slope(x, 3.0 * x**1.5) == pytest.approx(1.5, abs=1e-12)
    assert fit_loglog_slope(x, np.full(4, 7.0)) == pytest.approx(0.0, abs=1e-12)
    # non-positive points are dropped, not fitted
    x2 = np.array([0.0, 1.0, 10.0, 100.0, 5.0])
    y2 = np.array([5.0, 2.0, 20.0, 200.0, -1.0])
    assert fit_loglog_slope(x2, y2) == pytest.approx(1.0, abs=1e-12)
    assert np.isnan(fit_loglog_slope(np.array([4.0, 4.0]), np.array([1.0, 2.0])))
    assert np.isnan(fit_loglog_slope(np.array([]), np.array([])))


def test_cdf_points_exact_small_and_thinned_large() -> None:
    import numpy as np

    from radixbench.reports.plots import cdf_points

    x, f = cdf_points(np.array([3.0, 1.0, 2.0, 0.0]), floor=0.5)
    assert x.tolist() == [0.5, 1.0, 2.0, 3.0]
    assert f.tolist() == [0.25, 0.5, 0.75, 1.0]
    values = np.random.default_rng(0).lognormal(size=50_000)
    x, f = cdf_points(values, floor=1e-9, max_points=512)
    assert 500 <= x.size <= 512
    ordered = np.sort(values)
    assert x[0] == ordered[0] and x[-1] == ordered[-1] and f[-1] == 1.0
    # each drawn point lies exactly on the empirical CDF
    k = (f * values.size).round().astype(int)
    assert np.array_equal(x, ordered[k - 1])
