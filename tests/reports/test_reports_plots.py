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

    def spy(fig: Figure, path: Path | str, **kwargs) -> Path:
        figures.append(fig)
        return real_save(fig, path, **kwargs)

    monkeypatch.setattr(plots, "_save", spy)
    return figures


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 2000


@pytest.mark.parametrize("plotter", PLOTTERS)
def test_writes_png_and_svg_only_on_request(tmp_path: Path, ops_df: pd.DataFrame, plotter) -> None:
    target = tmp_path / "plots" / f"{plotter.__name__}.png"
    assert plotter(ops_df, target) == target
    _assert_png(target)
    # PNG only by default, no temp files
    assert [p.name for p in target.parent.iterdir()] == [target.name]
    assert plotter(ops_df, target, svg=True) == target
    svg = target.with_suffix(".svg")
    assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert "<svg" in svg.read_text(encoding="utf-8")
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
    # one figure legend names the variants; each panel states its calls per variant
    (legend,) = fig.legends
    assert sorted(t.get_text() for t in legend.get_texts()) == sorted(ops["variant"].unique())
    by_title = {ax.get_title(): ax for ax in visible}
    for op in ("evict", "build_extend"):  # absent: skipped with a note
        assert [t.get_text() for t in by_title[op].texts] == ["no data"]
        assert not by_title[op].get_lines()
    for op in ("match_prefix", "insert", "dec_lock_ref"):
        ax = by_title[op]
        assert len(ax.get_lines()) == 4  # one CDF per variant
        n = (ops["op"] == op).sum() // 4
        assert [t.get_text() for t in ax.texts] == [f"n = {n:,} calls per variant"]
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


# --- readable axes, layout and large-run summaries (issue 13 "Plots", issue 14 item 3) --------


@pytest.fixture
def run_figures(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Record every figure the run-level plot functions save (they still write their file)."""
    from radixbench.reports import plots_run

    figures: list[Figure] = []
    real_save = plots_run.save_figure

    def spy(fig: Figure, path: Path | str, **kwargs) -> Path:
        figures.append(fig)
        return real_save(fig, path, **kwargs)

    monkeypatch.setattr(plots_run, "save_figure", spy)
    return figures


def _boxes_disjoint(boxes: list) -> bool:
    return all(
        not a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.width > 0
    )


def _tick_label_boxes(ax, axis: str) -> tuple[list[str], list]:
    renderer = ax.figure.canvas.get_renderer()
    labels = (ax.xaxis if axis == "x" else ax.yaxis).get_ticklabels()
    shown = [t for t in labels if t.get_visible() and t.get_text()]
    return [t.get_text() for t in shown], [t.get_window_extent(renderer) for t in shown]


def test_narrow_log_range_gets_plain_non_overlapping_ticks(
    tmp_path: Path, requests_df: pd.DataFrame, run_figures: list[Figure]
) -> None:
    """The E2E CDF of a run whose latencies span less than a decade used to label minor ticks
    (2x10^-1, 3x10^-1, ...) that overlapped."""
    from radixbench.reports.plots_run import plot_request_cdfs

    narrow = requests_df.assign(e2e_s=np.linspace(0.12, 0.48, len(requests_df)))
    plot_request_cdfs(narrow, tmp_path / "cdfs.png")
    (fig,) = run_figures
    for ax in fig.axes:
        texts, boxes = _tick_label_boxes(ax, "x")
        assert 2 <= len(texts) <= 7, texts
        assert not any("$" in t for t in texts), texts  # no mathtext
        assert _boxes_disjoint(boxes), texts
        assert not ax.xaxis.get_minor_ticks() or not any(
            t.label1.get_text() for t in ax.xaxis.get_minor_ticks()
        )
    assert _tick_label_boxes(fig.axes[1], "x")[0] == ["0.2", "0.3", "0.4", "0.5"]


def test_cost_vs_tree_ticks_do_not_overlap(
    tmp_path: Path, ops_df: pd.DataFrame, run_figures: list[Figure]
) -> None:
    from radixbench.reports.plots_run import plot_cost_vs_tree

    plot_cost_vs_tree(ops_df, tmp_path / "tree.png")
    (fig,) = run_figures
    for ax in fig.axes:
        for axis in ("x", "y"):
            texts, boxes = _tick_label_boxes(ax, axis)
            assert len(texts) <= 7 and _boxes_disjoint(boxes), texts


def test_suptitle_clears_panel_titles(
    tmp_path: Path, ops_df: pd.DataFrame, captured: list[Figure]
) -> None:
    plot_op_cdf(ops_df, tmp_path / "cdf.png")
    (fig,) = captured
    renderer = fig.canvas.get_renderer()
    sup = fig._suptitle.get_window_extent(renderer)
    legend = fig.legends[0].get_window_extent(renderer)
    assert sup.y0 > legend.y1  # suptitle above the figure legend
    for ax in fig.axes:
        if ax.get_visible():
            title = ax.title.get_window_extent(renderer)
            assert not title.overlaps(sup) and not title.overlaps(legend), ax.get_title()
            assert title.y1 <= legend.y0 + 1


def test_large_runs_are_drawn_from_summaries(
    tmp_path: Path, ops_factory, captured: list[Figure]
) -> None:
    """50k evict calls per variant: CDFs of <= 1,024 quantiles, scatters of a sample plus a
    binned-median line, while the legend's n and slope still count every call."""
    ops = ops_factory(counts={"evict": 50_000})
    plot_op_cdf(ops, tmp_path / "cdf.png")
    plot_evict_vs_leaves(ops, tmp_path / "evict.png")
    cdf, scatter = captured
    evict = next(ax for ax in cdf.axes if ax.get_title() == "evict")
    assert all(len(line.get_xdata()) <= 1024 for line in evict.get_lines())
    (ax,) = scatter.axes
    assert all(len(c.get_offsets()) == plots.MAX_SCATTER_POINTS for c in ax.collections)
    assert len(ax.get_lines()) == 2  # one median line per evictor
    assert "n=100000" in ax.get_legend().get_texts()[0].get_text()


def test_thin_max_keeps_peaks() -> None:
    from radixbench.reports.plots_run import thin_max

    t = np.arange(100_000, dtype=np.float64)
    y = np.zeros_like(t)
    y[54_321] = 7.0  # a one-step queue spike
    tt, yy = thin_max(t, y, 1000)
    assert tt.size <= 1000 and yy.max() == 7.0 and tt[0] == 0.0
    small = np.arange(5.0)
    assert thin_max(small, small, 10)[1] is small


def test_log_tick_values() -> None:
    from radixbench.reports.plotaxes import compact_number, log_tick_values

    assert log_tick_values(1e3, 1e8) == [1e3, 1e4, 1e5, 1e6, 1e7, 1e8]
    assert len(log_tick_values(1.0, 1e12)) <= 7
    assert log_tick_values(0.007, 0.19) == [0.01, 0.03, 0.1]
    assert log_tick_values(2044, 2131) == [2050, 2075, 2100, 2125]
    assert log_tick_values(-1.0, 5.0) == []
    labels = [compact_number(v) for v in (0, 0.02, 2115, 25_000, 1.5e6, 3e9)]
    assert labels == ["0", "0.02", "2115", "25k", "1.5M", "3G"]


def _sweep_results() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for kv in (150_000, 300_000, 600_000):
        for groups in (2, 4):
            for variant in ("heapify/galloping/numpy", "persistent-heap/galloping/numpy"):
                for seed in (0, 1, 2):
                    rows.append(
                        {
                            "sim.kv_capacity_tokens": kv,
                            "workload.groups": groups,
                            "variant": variant,
                            "seed": seed,
                            "evict_p50_ns": kv / 100 * rng.lognormal(0, 0.2),
                            "prefix_hit_rate": 0.5 + rng.normal(0, 0.02),
                        }
                    )
    return pd.DataFrame(rows)


def test_sweep_plots_show_spread_n_zero_and_units(tmp_path: Path, monkeypatch) -> None:
    from radixbench.reports import sweep

    figures: list[Figure] = []
    real_init = Figure.__init__

    def spy_init(self, *args, **kwargs) -> None:
        real_init(self, *args, **kwargs)
        figures.append(self)

    monkeypatch.setattr(Figure, "__init__", spy_init)
    results = _sweep_results()
    paths = sweep.plot_sweep(results, ["sim.kv_capacity_tokens", "workload.groups"], tmp_path)
    assert len(paths) == len(figures) == 4
    for path in paths:
        _assert_png(path)
    fig = figures[0]  # evict_p50_ns vs sim.kv_capacity_tokens
    (ax,) = fig.axes
    assert ax.get_xlabel() == "sim.kv_capacity_tokens (tokens)"
    assert ax.get_ylim()[0] == 0.0 and ax.get_yscale() == "linear"
    assert "min-max over seeds" in ax.get_title() and "averaged over workload.groups" in (
        ax.get_title()
    )
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "heapify/galloping/numpy (n=3 seeds)",
        "persistent-heap/galloping/numpy (n=3 seeds)",
    ]
    # the error bars span min..max over the seeds of the per-seed means
    stats = sweep.seed_stats(results, "sim.kv_capacity_tokens", "evict_p50_ns")
    first = stats.iloc[0]
    per_seed = (
        results[
            (results["variant"] == first["variant"])
            & (results["sim.kv_capacity_tokens"] == first["param"])
        ]
        .groupby("seed")["evict_p50_ns"]
        .mean()
    )
    assert first["min"] == pytest.approx(per_seed.min())
    assert first["max"] == pytest.approx(per_seed.max())
    assert first["mean"] == pytest.approx(per_seed.mean()) and first["n"] == 3
    segments = ax.collections[0].get_segments()  # the first variant's error bars
    assert segments[0][0][1] == pytest.approx(first["min"])
    assert segments[0][1][1] == pytest.approx(first["max"])
    assert sweep.param_label("arrivals.window_s") == "arrivals.window_s (s)"
    assert sweep.param_label("x.mystery") == "x.mystery (as in the scenario)"


def test_slope_text_withholds_a_slope_over_a_narrow_range() -> None:
    from radixbench.reports.plots import slope_text

    x = np.array([1095.0, 1100.0, 1112.0])
    assert slope_text(x, np.array([1.0, 5.0, 100.0])) == "x spans 1.02x: no slope"
    wide = np.array([10.0, 100.0, 1000.0])
    assert slope_text(wide, 2.0 * wide) == "slope 1.00"
    assert slope_text(np.array([4.0]), np.array([1.0])) == "x spans 1.00x: no slope"
    assert slope_text(np.array([]), np.array([])) == "slope n/a"
