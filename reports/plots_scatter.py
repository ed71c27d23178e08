"""Scatter plots of per-op latency against a size (evictable leaves, key length, tree size,
matched length), one series per value of a variant axis, with each series' fitted log-log slope
and point count in a legend under the panel; each axis is logarithmic only when its values span
a decade or more (:func:`~radixbench.reports.plotaxes.axis_scale`). Used by
:mod:`~radixbench.reports.plots` and :mod:`~radixbench.reports.plots_run`; non-positive
coordinates are left out of the scatters and fits.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from radixbench.reports.plotaxes import axis_label, axis_scale, compact_number, log_ticks

__all__ = [
    "MAX_SCATTER_POINTS",
    "MEDIAN_BINS",
    "MIN_SLOPE_SPAN",
    "XLABEL_IN",
    "axis_groups",
    "fit_loglog_slope",
    "legend_room_in",
    "loglog_scatter",
    "scatter_series",
    "slope_text",
]

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
    *,
    xlabel: tuple[str, str] = ("", ""),
    ylabel: tuple[str, str] = ("", ""),
) -> tuple[str, str]:
    """Scatter ``ns`` against ``x_col`` per value of variant axis ``axis`` (its column:
    :func:`axis_groups`), each axis on a log scale when its values span a decade or more
    (:func:`~radixbench.reports.plotaxes.axis_scale`), else linear; returns the two scales
    chosen, ``(x, y)``, and labels the axes ``xlabel`` / ``ylabel`` = ``(name, unit)`` with
    "log scale" where it is one (:func:`~radixbench.reports.plotaxes.axis_label`).

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
        ax.set_xlabel(axis_label(*xlabel, "linear") if xlabel[0] else "")
        ax.set_ylabel(axis_label(*ylabel, "linear") if ylabel[0] else "")
        return "linear", "linear"
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
    scales = (axis_scale(rows[x_col]), axis_scale(rows["ns"]))
    ax.set_xscale(scales[0])
    ax.set_yscale(scales[1])
    for which, scale in zip("xy", scales, strict=True):
        if scale == "log":
            log_ticks(ax, which)
        else:  # counts, tokens and ns: whole-number ticks, plain labels (1100, 150k)
            target = ax.xaxis if which == "x" else ax.yaxis
            target.set_major_locator(MaxNLocator(nbins=6, integer=True))
            target.set_major_formatter(FuncFormatter(compact_number))
    if xlabel[0]:
        ax.set_xlabel(axis_label(*xlabel, scales[0]))
    if ylabel[0]:
        ax.set_ylabel(axis_label(*ylabel, scales[1]))
    ax.grid(True, alpha=0.3)
    frame_in = ax.get_position().height * cast(Figure, ax.figure).get_size_inches()[1]
    ax.legend(
        fontsize="small",
        markerscale=3,
        loc="upper center",
        bbox_to_anchor=(0.5, -XLABEL_IN / frame_in),
        borderaxespad=0.0,
    )
    return scales
