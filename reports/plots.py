"""Latency plots over the per-op table (PNG, SVG on request; matplotlib Agg).

Figures are built on :class:`matplotlib.figure.Figure` with an explicit Agg canvas, so no
pyplot global state or interactive backend is involved (safe in headless runs and threads).
Every figure has a title and unit-labelled axes; an op or series without data is drawn as a
"no data" panel instead of raising. Files are written atomically; each function returns the
path it wrote.

Log axes cannot show 0: latencies of 0 ns are clipped to 1 ns in the CDF, and points with a
non-positive coordinate are left out of the log-log scatters and fits.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.plotaxes import fixed_layout, log_ticks

__all__ = [
    "CDF_OPS",
    "CDF_STYLES",
    "fit_loglog_slope",
    "legend_room_in",
    "loglog_scatter",
    "no_data",
    "plot_evict_vs_leaves",
    "plot_match_vs_len",
    "plot_op_cdf",
    "save_figure",
    "scatter_series",
    "slope_text",
]

#: Ops that always get a CDF panel (a "no data" panel when absent); other ops present in the
#: table get panels after these.
CDF_OPS: tuple[str, ...] = ("match_prefix", "insert", "evict", "build_extend")

#: Line styles of the CDF curves, one per variant in name order (cycled): variants that time an
#: op alike (it runs none of the code their axes change) draw curves on top of each other.
CDF_STYLES: tuple[str, ...] = ("-", "--", "-.", ":")

#: Scatter plots draw at most this many points per series (a fixed-seed sample); the fitted
#: slope, ``n`` and the binned-median line use every point.
MAX_SCATTER_POINTS = 3_000

#: Log-spaced x bins of the median line drawn over each scatter series.
MEDIAN_BINS = 24

#: A scatter's legend lies under its panel, below the x tick labels and x label (which take
#: :data:`XLABEL_IN` inches under the frame, ``fixed_layout``'s default bottom margin), one entry
#: per row: :func:`legend_room_in` is the extra bottom margin a figure gives it.
XLABEL_IN = 0.6
LEGEND_ROW_IN = 0.21
LEGEND_PAD_IN = 0.25

_DPI = 110


def no_data(ax: Axes, title: str) -> None:
    """Mark ``ax`` as an empty panel titled ``title``."""
    ax.set_title(title)
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def save_figure(fig: Figure, path: Path | str, *, svg: bool = False) -> Path:
    """Render ``fig`` with the Agg canvas and write it atomically as PNG to ``path`` (and, with
    ``svg=True``, as SVG beside it: same stem, ``.svg``); returns the PNG path. The figure is
    drawn as it is laid out (:func:`~radixbench.reports.plotaxes.fixed_layout`): no layout
    engine runs, which would draw every text once more."""
    path = Path(path)
    FigureCanvasAgg(fig)
    targets = (path, path.with_suffix(".svg")) if svg else (path,)
    with atomic_paths(*targets) as tmps:
        fig.savefig(tmps[0], format="png", dpi=_DPI)
        if svg:
            fig.savefig(tmps[1], format="svg")
    return path


_save = save_figure


def axis_groups(rows: pd.DataFrame, axis: str) -> pd.Series:
    """Each row's value on variant axis ``axis`` (its column), the implementation's label
    (``impl``) where the variant runs its implementation's own algorithm; the variant name
    when the table has no such column."""
    if axis not in rows.columns:
        return rows["variant"].astype(object)
    values = rows[axis].astype(object)
    if "impl" in rows.columns:
        values = values.where(rows[axis].notna(), rows["impl"].astype(object))
    return values


#: A log-log slope is shown only over x values that span at least this factor: over a narrow
#: range (the demo's evicts see 1,095-1,112 leaves) noise gives meaningless slopes like 10.
MIN_SLOPE_SPAN = 2.0


def slope_text(x: np.ndarray, y: np.ndarray) -> str:
    """``slope 1.02`` (:func:`fit_loglog_slope`), or why none is given: ``n/a`` when undefined,
    ``x spans 1.02x: no slope`` when the positive x values span less than
    :data:`MIN_SLOPE_SPAN`."""
    xs = np.asarray(x, dtype=np.float64)
    xs = xs[xs > 0]
    if xs.size and xs.max() < MIN_SLOPE_SPAN * xs.min():
        return f"x spans {xs.max() / xs.min():.2f}x: no slope"
    slope = fit_loglog_slope(x, y)
    return f"slope {slope:.2f}" if math.isfinite(slope) else "slope n/a"


def fit_loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log10(y) against log10(x) (``numpy.polyfit``, degree 1).

    Only points with x > 0 and y > 0 are used. Returns NaN when fewer than two distinct x
    values remain (the slope is undefined). A slope of ~1 means y grows linearly in x, ~0 means
    y is independent of x (e.g. logarithmic growth shows as a small slope).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    keep = (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    if np.unique(x).size < 2:
        return float("nan")
    slope, _intercept = np.polyfit(np.log10(x), np.log10(y), 1)
    return float(slope)


def cdf_points(
    values: np.ndarray, floor: float, max_points: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """``(x, F(x))`` of the empirical CDF of ``values`` (raised to ``floor``): every sample when
    there are at most ``max_points``, else ``max_points`` evenly spaced quantiles (exact at those
    fractions). Keeps PNG/SVG rendering time independent of the sample count."""
    x = np.sort(np.maximum(values.astype(np.float64), floor))
    n = x.size
    if n <= max_points:
        return x, np.arange(1, n + 1, dtype=np.float64) / n
    idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
    return x[idx], (idx + 1).astype(np.float64) / n


def plot_op_cdf(ops: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """Plot per-op latency CDFs: one panel per op, one line per variant; x is ns on a log scale.

    Panels: every op of :data:`CDF_OPS` (a "no data" panel when it has no rows), then any other
    op present, in name order. Each line is drawn from at most 1,024 quantiles
    (:func:`cdf_points`); one figure legend names the variants (same colour and line style in
    every panel: :data:`CDF_STYLES`, so a curve drawn on top of an equal one leaves it visible
    through its gaps) and each panel states its calls per variant (``n``) and which variants'
    calls took exactly the same times (``B: identical to A``). Needs the ``op``, ``variant`` and
    ``ns`` columns; an empty frame gives a figure of "no data" panels.
    """
    present = sorted(str(o) for o in ops["op"].unique()) if "op" in ops.columns else []
    panels = [*CDF_OPS, *(o for o in present if o not in CDF_OPS)]
    variants = sorted(str(v) for v in ops["variant"].unique()) if present else []
    color = {v: f"C{i % 10}" for i, v in enumerate(variants)}
    style = {v: CDF_STYLES[i % len(CDF_STYLES)] for i, v in enumerate(variants)}
    ncols = 2
    nrows = math.ceil(len(panels) / ncols)
    legend_rows = math.ceil(len(variants) / 2)
    top_in = 0.75 + 0.22 * legend_rows
    fig = Figure(figsize=(6.0 * ncols, 3.3 * nrows + top_in))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    fixed_layout(fig, nrows, ncols, top_in=top_in)
    for ax, op in zip(axes, panels, strict=False):
        rows = ops[ops["op"] == op] if present else ops.iloc[0:0]
        if rows.empty:
            no_data(ax, op)
            continue
        counts = []
        drawn: dict[str, np.ndarray] = {}
        identical = []
        for variant, group in rows.groupby("variant", sort=True):
            v, ns_all = str(variant), np.sort(group["ns"].to_numpy(dtype=np.float64))
            same = next((u for u, seen in drawn.items() if np.array_equal(seen, ns_all)), None)
            if same is not None:
                identical.append(f"{v}: identical to {same}")
            drawn[v] = ns_all
            ns, frac = cdf_points(ns_all, 1.0)
            ax.step(ns, frac, where="post", color=color[v], linestyle=style[v], label=v)
            counts.append(len(group))
        if identical:  # the later curve lies exactly on the earlier one: say so
            ax.text(
                0.02,
                0.96,
                "\n".join(identical),
                ha="left",
                va="top",
                transform=ax.transAxes,
                fontsize="x-small",
            )
        ax.set_xscale("log")
        log_ticks(ax, "x")
        ax.set_ylim(0.0, 1.02)
        ax.set_title(op)
        ax.set_xlabel("latency per call (ns, log scale)")
        ax.set_ylabel("fraction of calls")
        ax.grid(True, alpha=0.3)
        lo, hi = min(counts), max(counts)
        n_text = f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"
        ax.text(
            0.98,
            0.04,
            f"n = {n_text} calls per variant",
            ha="right",
            va="bottom",
            transform=ax.transAxes,
            fontsize="small",
        )
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    h = fig.get_size_inches()[1]
    fig.suptitle("Per-op latency CDF by variant", y=1 - 0.12 / h, va="top")
    if variants:
        handles: list[Artist] = [
            Line2D([], [], color=color[v], linestyle=cast(Any, style[v])) for v in variants
        ]
        fig.legend(
            handles,
            list(variants),
            loc="upper center",
            bbox_to_anchor=(0.5, 1 - 0.42 / h),
            ncols=2,
            fontsize="small",
            frameon=False,
        )
    return _save(fig, path, svg=svg)


def _binned_median(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Medians of ``x`` and ``y`` per log-spaced bin of ``x`` (all > 0), bins with fewer than 5
    points left out."""
    lo, hi = math.log10(x.min()), math.log10(x.max())
    edges = np.logspace(lo, hi if hi > lo else lo + 1e-9, MEDIAN_BINS + 1)
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, MEDIAN_BINS - 1)
    centres, medians = [], []
    for b in range(MEDIAN_BINS):
        in_bin = which == b
        if np.count_nonzero(in_bin) >= 5:
            centres.append(float(np.median(x[in_bin])))
            medians.append(float(np.median(y[in_bin])))
    return np.asarray(centres), np.asarray(medians)


def _positive(rows: pd.DataFrame, x_col: str) -> pd.DataFrame:
    """The rows a log-log scatter of ``ns`` against ``x_col`` can draw (both > 0)."""
    return rows[(rows[x_col] > 0) & (rows["ns"] > 0)] if not rows.empty else rows


def scatter_series(rows: pd.DataFrame, x_col: str, axis: str) -> int:
    """How many series (legend entries) :func:`loglog_scatter` draws for these arguments."""
    rows = _positive(rows, x_col)
    return int(axis_groups(rows, axis).nunique()) if not rows.empty else 0


def legend_room_in(entries: int) -> float:
    """Extra bottom margin (in) for a legend of ``entries`` rows under a panel's x label."""
    return LEGEND_PAD_IN + LEGEND_ROW_IN * entries if entries else 0.0


def loglog_scatter(
    ax: Axes,
    rows: pd.DataFrame,
    x_col: str,
    axis: str,
) -> None:
    """Scatter ``ns`` against ``x_col`` per value of variant axis ``axis`` (its column:
    :func:`axis_groups`), log-log.

    Each series' legend entry carries its fitted log-log slope (:func:`fit_loglog_slope`) and
    its point count ``n``; a large series is drawn as a fixed-seed sample of
    :data:`MAX_SCATTER_POINTS` points plus the median ``ns`` per log-spaced ``x_col`` bin of all
    its points (a line, bins of >= 5 points). The legend lies under the panel, below its x label,
    where it hides no point: the figure must leave :func:`legend_room_in` of
    :func:`scatter_series` inches of bottom margin beyond :data:`XLABEL_IN`, and be laid out
    (``fixed_layout``) before this call. Draws a "no data" note when no row has positive
    coordinates.
    """
    rows = _positive(rows, x_col)
    if rows.empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    groups = axis_groups(rows, axis)
    rng = np.random.default_rng(0)
    for name, group in rows.groupby(groups, sort=True):
        x = group[x_col].to_numpy(dtype=np.float64)
        y = group["ns"].to_numpy(dtype=np.float64)
        label = f"{name} ({slope_text(x, y)}, n={x.size})"
        color = f"C{len(ax.collections) % 10}"
        if x.size > MAX_SCATTER_POINTS:
            bx, by = _binned_median(x, y)
            ax.plot(bx, by, color=color, lw=1.5, label="_median")
            pick = rng.choice(x.size, MAX_SCATTER_POINTS, replace=False)
            x, y = x[pick], y[pick]
        ax.scatter(x, y, s=4, alpha=0.4, color=color, label=label, rasterized=True)
    ax.set_xscale("log")
    ax.set_yscale("log")
    log_ticks(ax, "x")
    log_ticks(ax, "y")
    ax.grid(True, alpha=0.3)
    frame_in = ax.get_position().height * cast(Figure, ax.figure).get_size_inches()[1]
    ax.legend(
        fontsize="small",
        markerscale=3,
        loc="upper center",
        bbox_to_anchor=(0.5, -XLABEL_IN / frame_in),
        borderaxespad=0.0,
    )


def plot_evict_vs_leaves(ops: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """Plot ``evict`` latency (ns) against ``evictable_leaves`` per evictor, log-log.

    Series are grouped by the variant's evictor (matchers/flatten pooled);
    the legend shows each series' fitted log-log slope (~1: linear in leaves, e.g. a full
    heapify; ~0: independent of leaves). Needs ``op``, ``variant``, ``ns``, ``evictable_leaves``.
    """
    rows = ops[ops["op"] == "evict"] if "op" in ops.columns else ops.iloc[0:0]
    room = legend_room_in(scatter_series(rows, "evictable_leaves", "evictor"))
    fig = Figure(figsize=(7.5, 5.0 + room))
    ax = fig.subplots()
    fixed_layout(fig, bottom_in=XLABEL_IN + room)
    loglog_scatter(ax, rows, "evictable_leaves", "evictor")
    ax.set_title("evict latency vs evictable leaves, by evictor")
    ax.set_xlabel("evictable leaves before the call (count, log scale)")
    ax.set_ylabel("evict latency (ns, log scale)")
    return _save(fig, path, svg=svg)


def plot_match_vs_len(ops: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """Plot ``match_prefix`` latency (ns) against ``key_len`` (tokens) per matcher, log-log.

    Series are grouped by the variant's matcher; the legend shows each series'
    fitted log-log slope. Needs ``op``, ``variant``, ``ns``, ``key_len``.
    """
    rows = ops[ops["op"] == "match_prefix"] if "op" in ops.columns else ops.iloc[0:0]
    room = legend_room_in(scatter_series(rows, "key_len", "matcher"))
    fig = Figure(figsize=(7.5, 5.0 + room))
    ax = fig.subplots()
    fixed_layout(fig, bottom_in=XLABEL_IN + room)
    loglog_scatter(ax, rows, "key_len", "matcher")
    ax.set_title("match_prefix latency vs key length, by matcher")
    ax.set_xlabel("key length (tokens, log scale)")
    ax.set_ylabel("match_prefix latency (ns, log scale)")
    return _save(fig, path, svg=svg)
