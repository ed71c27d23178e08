"""Latency plots over the per-op table (PNG + SVG, matplotlib Agg).

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

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.summary import EVICTOR_AXIS, MATCHER_AXIS
from radixbench.reports.variant_names import axis_value

__all__ = [
    "CDF_OPS",
    "fit_loglog_slope",
    "loglog_scatter",
    "no_data",
    "plot_evict_vs_leaves",
    "plot_match_vs_len",
    "plot_op_cdf",
    "save_figure",
]

#: Ops that always get a CDF panel (a "no data" panel when absent); other ops present in the
#: table get panels after these.
CDF_OPS: tuple[str, ...] = ("match_prefix", "insert", "evict", "build_extend")

#: Scatter plots draw at most this many points per series (a fixed-seed sample); fits use all.
MAX_SCATTER_POINTS = 20_000

_DPI = 110


def no_data(ax: Axes, title: str) -> None:
    """Mark ``ax`` as an empty panel titled ``title``."""
    ax.set_title(title)
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def save_figure(fig: Figure, path: Path | str) -> Path:
    """Render ``fig`` with the Agg canvas and write it atomically as PNG to ``path`` and as SVG
    beside it (same stem, ``.svg``); returns the PNG path."""
    path = Path(path)
    svg = path.with_suffix(".svg")
    FigureCanvasAgg(fig)
    fig.tight_layout()
    with atomic_paths(path, svg) as (tmp, tmp_svg):
        fig.savefig(tmp, format="png", dpi=_DPI)
        fig.savefig(tmp_svg, format="svg")
    return path


_save = save_figure


def _axis_part(variants: pd.Series, axis_index: int) -> pd.Series:
    """Part ``axis_index`` of each ``"<evictor>/<matcher>/<flatten>"`` name; another
    implementation's ``"<impl>/<flatten>"`` name gives its impl label for the evictor and
    matcher axes (:func:`~radixbench.reports.variant_names.axis_value`)."""
    return pd.Series(
        [axis_value(str(v), axis_index) for v in variants],
        index=variants.index,
        dtype=object,
    )


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


def plot_op_cdf(ops: pd.DataFrame, path: Path | str) -> Path:
    """Plot per-op latency CDFs: one panel per op, one line per variant; x is ns on a log scale.

    Panels: every op of :data:`CDF_OPS` (a "no data" panel when it has no rows), then any other
    op present, in name order. Needs the ``op``, ``variant`` and ``ns`` columns; an empty frame
    gives a figure of "no data" panels.
    """
    present = sorted(str(o) for o in ops["op"].unique()) if "op" in ops.columns else []
    panels = [*CDF_OPS, *(o for o in present if o not in CDF_OPS)]
    ncols = 2
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(6.0 * ncols, 3.6 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, op in zip(axes, panels, strict=False):
        rows = ops[ops["op"] == op] if present else ops.iloc[0:0]
        if rows.empty:
            no_data(ax, op)
            continue
        for variant, group in rows.groupby("variant", sort=True):
            ns, frac = cdf_points(group["ns"].to_numpy(dtype=np.float64), 1.0)
            ax.step(ns, frac, where="post", label=f"{variant} (n={len(group)})")
        ax.set_xscale("log")
        ax.set_ylim(0.0, 1.02)
        ax.set_title(op)
        ax.set_xlabel("latency per call (ns, log scale)")
        ax.set_ylabel("fraction of calls")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="x-small", loc="lower right")
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle("Per-op latency CDF by variant")
    return _save(fig, path)


def loglog_scatter(
    ax: Axes,
    rows: pd.DataFrame,
    x_col: str,
    axis_index: int,
) -> None:
    """Scatter ``ns`` against ``x_col`` per value of variant axis ``axis_index``, log-log.

    Each series' legend entry carries its fitted log-log slope (:func:`fit_loglog_slope`).
    Draws a "no data" note when no row has positive coordinates.
    """
    if not rows.empty:
        rows = rows[(rows[x_col] > 0) & (rows["ns"] > 0)]
    if rows.empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return
    groups = _axis_part(rows["variant"], axis_index)
    rng = np.random.default_rng(0)
    for name, group in rows.groupby(groups, sort=True):
        x = group[x_col].to_numpy(dtype=np.float64)
        y = group["ns"].to_numpy(dtype=np.float64)
        slope = fit_loglog_slope(x, y)
        shown = f"{slope:.2f}" if math.isfinite(slope) else "n/a"
        label = f"{name} (slope {shown}, n={x.size})"
        if x.size > MAX_SCATTER_POINTS:
            pick = rng.choice(x.size, MAX_SCATTER_POINTS, replace=False)
            x, y = x[pick], y[pick]
        ax.scatter(x, y, s=4, alpha=0.4, label=label, rasterized=True)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", markerscale=3)


def plot_evict_vs_leaves(ops: pd.DataFrame, path: Path | str) -> Path:
    """Plot ``evict`` latency (ns) against ``evictable_leaves`` per evictor, log-log.

    Series are grouped by the evictor part of the variant name (matchers/flatten pooled);
    the legend shows each series' fitted log-log slope (~1: linear in leaves, e.g. a full
    heapify; ~0: independent of leaves). Needs ``op``, ``variant``, ``ns``, ``evictable_leaves``.
    """
    fig = Figure(figsize=(7.5, 5.0))
    ax = fig.subplots()
    rows = ops[ops["op"] == "evict"] if "op" in ops.columns else ops.iloc[0:0]
    loglog_scatter(ax, rows, "evictable_leaves", EVICTOR_AXIS)
    ax.set_title("evict latency vs evictable leaves, by evictor")
    ax.set_xlabel("evictable leaves before the call (count, log scale)")
    ax.set_ylabel("evict latency (ns, log scale)")
    return _save(fig, path)


def plot_match_vs_len(ops: pd.DataFrame, path: Path | str) -> Path:
    """Plot ``match_prefix`` latency (ns) against ``key_len`` (tokens) per matcher, log-log.

    Series are grouped by the matcher part of the variant name; the legend shows each series'
    fitted log-log slope. Needs ``op``, ``variant``, ``ns``, ``key_len``.
    """
    fig = Figure(figsize=(7.5, 5.0))
    ax = fig.subplots()
    rows = ops[ops["op"] == "match_prefix"] if "op" in ops.columns else ops.iloc[0:0]
    loglog_scatter(ax, rows, "key_len", MATCHER_AXIS)
    ax.set_title("match_prefix latency vs key length, by matcher")
    ax.set_xlabel("key length (tokens, log scale)")
    ax.set_ylabel("match_prefix latency (ns, log scale)")
    return _save(fig, path)
