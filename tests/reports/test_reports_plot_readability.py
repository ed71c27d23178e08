"""The run plots read right (issue 22, low): the queue axis starts at 0, log axes label at least
three ticks, scatter legends hide no point, each cost-vs-tree panel is coloured by the axis its
clusters come from, identical CDF curves stay visible, verdict bars name their baseline on a log
ratio axis, and every study panel labels its y axis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from radixbench.reports import plots, plots_run


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Every figure the plot functions of ``plots`` and ``plots_run`` save (still written)."""
    saved: list[Figure] = []
    real = plots.save_figure

    def spy(fig: Figure, path: Path | str, **kwargs) -> Path:
        saved.append(fig)
        return real(fig, path, **kwargs)

    monkeypatch.setattr(plots, "_save", spy)
    monkeypatch.setattr(plots_run, "save_figure", spy)
    return saved


def _labels(ax, axis: str = "x") -> list[str]:
    ax.figure.canvas.draw()
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    target = ax.xaxis if axis == "x" else ax.yaxis
    return [
        t.label1.get_text()
        for t in target.get_major_ticks()
        if t.label1.get_visible() and t.label1.get_text() and lo <= t.get_loc() <= hi
    ]


def test_queue_length_axis_starts_at_zero(tmp_path, timeseries_df, figures) -> None:
    for queue in (0, 5):  # an empty queue autoscaled to [-0.055, 0.055]
        plots_run.plot_kv_queue_over_time(
            timeseries_df.assign(queue_len=queue), tmp_path / "kv.png"
        )
        ax_q = figures[-1].axes[1]
        assert "queue" in ax_q.get_title().lower()
        lo, hi = ax_q.get_ylim()
        assert lo == 0 and hi > max(queue, 0)


def _evicts(leaves: np.ndarray) -> pd.DataFrame:
    """evict calls of two evictors over ``leaves`` evictable leaves each."""
    rows = []
    for evictor, ns in (("heapify", 40.0 * leaves), ("persistent-heap", 300.0 + 0 * leaves)):
        rows.append(
            pd.DataFrame(
                {
                    "variant": f"{evictor}/galloping/numpy",
                    "evictor": evictor,
                    "matcher": "galloping",
                    "flatten": "numpy",
                    "op": "evict",
                    "ns": ns.astype(np.int64),
                    "key_len": 16,
                    "result": 16,
                    "tree_nodes": 2 * leaves,
                    "tree_tokens": 600 * leaves,
                    "evictable_leaves": leaves,
                    "sim_time_s": np.linspace(0.0, 10.0, leaves.size),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def test_evict_vs_leaves_labels_three_ticks_and_its_legend_hides_no_point(
    tmp_path, figures
) -> None:
    # leaves 1,000-2,500: the 1-2-5 ticks in range are only 1000 and 2000
    leaves = np.linspace(1000, 2500, 400).astype(np.int64)
    plots.plot_evict_vs_leaves(_evicts(leaves), tmp_path / "evict.png")
    (fig,) = figures
    (ax,) = fig.axes
    assert len(_labels(ax, "x")) >= 3, _labels(ax, "x")
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert not legend.overlaps(ax.get_window_extent(renderer))  # outside the data area
    assert not legend.overlaps(ax.xaxis.label.get_window_extent(renderer))
    assert fig.bbox.contains(legend.x0, legend.y0) and fig.bbox.contains(legend.x1, legend.y1)


def test_cost_vs_tree_colours_each_panel_by_the_axis_of_its_clusters(
    tmp_path, ops_df, figures
) -> None:
    plots_run.plot_cost_vs_tree(ops_df, tmp_path / "tree.png")
    (fig,) = figures
    by_op = {ax.get_title().split(" ")[0]: ax for ax in fig.axes}
    assert set(by_op) == {"match_prefix", "insert", "evict"}
    expected = {"match_prefix": "matcher", "insert": "matcher", "evict": "evictor"}
    names = {"matcher": {"linear", "galloping"}, "evictor": {"heapify", "persistent-heap"}}
    renderer = fig.canvas.get_renderer()
    for op, axis in expected.items():
        ax = by_op[op]
        assert f"colour: {axis}" in ax.get_title()
        series = {t.get_text().split(" ")[0] for t in ax.get_legend().get_texts()}
        assert series == names[axis], (op, series)
        legend = ax.get_legend().get_window_extent(renderer)
        assert not any(legend.overlaps(a.get_window_extent(renderer)) for a in fig.axes)


def test_identical_cdf_curves_stay_visible(tmp_path, ops_df, figures) -> None:
    """Two variants that differ only on an axis the op does not use can time the same calls:
    the second curve must not hide the first."""
    a, b = sorted(ops_df["variant"].unique())[:2]
    ops = ops_df[ops_df["variant"].isin([a, b])].copy()
    ins = ops["op"] == "insert"
    ops.loc[ins & (ops["variant"] == b), "ns"] = ops.loc[ins & (ops["variant"] == a), "ns"].values
    plots.plot_op_cdf(ops, tmp_path / "cdf.png")
    (fig,) = figures
    ax = next(ax for ax in fig.axes if ax.get_title() == "insert")
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert np.array_equal(lines[a].get_xdata(), lines[b].get_xdata())
    assert lines[a].get_linestyle() != lines[b].get_linestyle()
    notes = " ".join(t.get_text() for t in ax.texts)
    assert f"{b}: identical to {a}" in notes
    # the figure legend shows each variant's line style
    (legend,) = fig.legends
    styles = {t.get_text(): h.get_linestyle() for t, h in zip(legend.get_texts(),
                                                               legend.legend_handles)}  # fmt: skip
    assert styles[a] == lines[a].get_linestyle() and styles[b] == lines[b].get_linestyle()


def _verdicts() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "metric": ["evict ns", "insert ns", "match_prefix ns"],
            "candidate": ["patch/chain", "patch/chain", "patch/chain"],
            "baseline": ["upstream/chain", "upstream/chain", "upstream/chain"],
            "ratio": [7.13, 0.90, 1.00],
            "ci_low": [7.07, 0.90, 0.99],
            "ci_high": [7.20, 0.91, 1.01],
            "verdict": ["faster", "slower", "no significant difference"],
        }
    )


def test_verdict_bars_name_the_baseline_on_a_log_ratio_axis(tmp_path, figures) -> None:
    plots_run.plot_verdict_bars(_verdicts(), tmp_path / "bars.png")
    (fig,) = figures
    (ax,) = fig.axes
    ylabels = [t.get_text() for t in ax.get_yticklabels()]
    assert ylabels == [f"{m}: patch/chain vs upstream/chain" for m in _verdicts()["metric"]]
    assert ax.get_xscale() == "log"
    assert "1" in _labels(ax, "x") and len(_labels(ax, "x")) >= 3
    lo, hi = ax.get_xlim()
    assert lo < 0.9 and hi > 7.2  # every bar and interval inside
    # each bar spans from 1 to its ratio, so 0.90 shows as a bar to the left of 1
    widths = sorted((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)
    assert widths[0] == pytest.approx((0.9, 1.0)) or widths[0] == pytest.approx((1.0, 0.9))
    values = " ".join(t.get_text() for t in ax.texts)
    assert "7.13" in values and "0.90" in values  # each ratio written beside its bar


def test_every_study_panel_labels_its_y_axis(tmp_path, study_rows, monkeypatch) -> None:
    """The TTFT p99 panel's ratios span 0.9-5: a log axis whose only decade tick is 1."""
    from radixbench.reports import study_render

    points = study_rows.copy()
    for col, value in (("ttft_p99_ratio", 4.0), ("ttft_p99_lo", 0.9), ("ttft_p99_hi", 5.0)):
        points[col] = np.linspace(1.0, value, len(points))
    meta = {"family": "eviction", "name": "eviction", "mode": "quick", "baseline": "heapify",
            "candidates": ("persistent-heap",), "scenario": "eviction-pressure"}  # fmt: skip
    captured: list[Figure] = []
    real = study_render._save

    def spy(fig: Figure, path: Path) -> Path:
        captured.append(fig)
        return real(fig, path)

    monkeypatch.setattr(study_render, "_save", spy)
    cross = study_render.crossover_table(points, "eviction")
    study_render.plot_study(points, cross, meta, tmp_path / "s.png")
    (fig,) = captured
    for ax in fig.axes:
        assert ax.get_ylabel(), ax.get_title()
        assert len(_labels(ax, "y")) >= 3, (ax.get_title(), _labels(ax, "y"))
