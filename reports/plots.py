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

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.plotaxes import fixed_layout, log_ticks, top_title
from radixbench.reports.plots_scatter import (
    MAX_SCATTER_POINTS,
    XLABEL_IN,
    axis_groups,
    fit_loglog_slope,
    legend_room_in,
    loglog_scatter,
    scatter_series,
    slope_text,
)

#: The scatter machinery lives in :mod:`radixbench.reports.plots_scatter`; its names are
#: re-exported here, where notebooks and older code import them.
__all__ = [
    "CDF_OPS",
    "CDF_STYLES",
    "MAX_SCATTER_POINTS",
    "XLABEL_IN",
    "axis_groups",
    "fit_loglog_slope",
    "legend_room_in",
    "loglog_scatter",
    "no_data",
    "op_scatter",
    "plot_evict_vs_leaves",
    "plot_match_vs_len",
    "plot_op_cdf",
    "save_figure",
    "scatter_series",
    "slope_text",
    "sorted_groups",
    "write_png",
]

#: Ops that always get a CDF panel (a "no data" panel when absent); other ops present in the
#: table get panels after these.
CDF_OPS: tuple[str, ...] = ("match_prefix", "insert", "evict", "build_extend")

#: Line styles of the CDF curves, one per variant in name order (cycled): variants that time an
#: op alike (it runs none of the code their axes change) draw curves on top of each other.
CDF_STYLES: tuple[str, ...] = ("-", "--", "-.", ":")

_DPI = 110


def no_data(ax: Axes, title: str) -> None:
    """Mark ``ax`` as an empty panel titled ``title``."""
    top_title(ax, title)
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def save_figure(fig: Figure, path: Path | str, *, svg: bool = False) -> Path:
    """Render ``fig`` with the Agg canvas at :data:`_DPI` and write it atomically as PNG to
    ``path`` (:func:`write_png`; and, with ``svg=True``, as SVG beside it: same stem,
    ``.svg``); returns the PNG path. The figure is drawn as it is laid out
    (:func:`~radixbench.reports.plotaxes.fixed_layout`): no layout engine runs, which would
    draw every text once more. ``fig.dpi`` is restored afterwards."""
    path = Path(path)
    canvas = FigureCanvasAgg(fig)
    targets = (path, path.with_suffix(".svg")) if svg else (path,)
    with atomic_paths(*targets) as tmps:
        dpi, fig.dpi = fig.dpi, _DPI  # as savefig(dpi=_DPI) does, drawn once, here
        try:
            canvas.draw()
            write_png(canvas, tmps[0])
        finally:
            fig.dpi = dpi
        if svg:
            fig.savefig(tmps[1], format="svg")
    return path


def write_png(canvas: FigureCanvasAgg, path: Path | str) -> None:
    """Write ``canvas``'s drawn buffer (call ``canvas.draw()`` first) as a PNG file at ``path``
    with the figure's dpi: the pixels ``Figure.savefig`` would write, as RGB when every pixel is
    opaque (the report's figures have an opaque white background), else RGBA, and zlib level 3:
    an RGB PNG holds the same image as the RGBA one in 3/4 of the bytes to compress; the 9
    figures of a 1,000-request run encode in about half the CPU and come out smaller than
    ``savefig``'s RGBA at level 6."""
    rgba = np.asarray(canvas.buffer_rgba())  # (height, width, 4) uint8, a view
    pixels = rgba[..., :3] if int(rgba[..., 3].min()) == 255 else rgba
    info = PngInfo()
    info.add_text(
        "Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/"
    )
    dpi = canvas.figure.dpi
    Image.fromarray(np.ascontiguousarray(pixels)).save(
        path, format="png", dpi=(dpi, dpi), pnginfo=info, compress_level=3
    )


_save = save_figure


def op_scatter(
    rows: pd.DataFrame,
    x: str,
    axis: str,
    path: Path | str,
    *,
    xlabel: tuple[str, str],
    ylabel: tuple[str, str],
    title: str,
    svg: bool = False,
) -> Path:
    """One op's latency against ``x`` per value of variant ``axis`` (evictor, matcher), log
    axes where the values span a decade, fitted log-log slopes in the legend
    (:func:`~radixbench.reports.plots_scatter.loglog_scatter`), saved to ``path``. ``xlabel``
    / ``ylabel``: (quantity, unit)."""
    room = legend_room_in(scatter_series(rows, x, axis))
    fig = Figure(figsize=(7.5, 5.0 + room))
    ax = fig.subplots()
    fixed_layout(fig, bottom_in=XLABEL_IN + room)
    loglog_scatter(ax, rows, x, axis, xlabel=xlabel, ylabel=ylabel)
    top_title(ax, title)
    return _save(fig, path, svg=svg)


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


def sorted_groups(
    df: pd.DataFrame, key: str, key2: str, col: str
) -> dict[tuple[str, str], np.ndarray]:
    """``{(str(key value), str(key2 value)): the group's ``col`` values, sorted ascending, as a
    float64 array}`` for every (``key``, ``key2``) pair present in ``df``: one sort of the whole
    column by (pair, value) instead of a filter and a sort per group (a third of their CPU on a
    57k-row ops table of 11 ops). Rows with a missing key are left out, as ``groupby`` does."""
    k1, u1 = pd.factorize(df[key])
    k2, u2 = pd.factorize(df[key2])
    values = df[col].to_numpy(dtype=np.float64)
    keep = (k1 >= 0) & (k2 >= 0)  # rows with a missing key belong to no group, as in groupby
    pair, values = k1[keep].astype(np.int64) * len(u2) + k2[keep], values[keep]
    order = np.lexsort((values, pair))
    pair, values = pair[order], values[order]
    cuts = np.flatnonzero(np.diff(pair)) + 1
    starts = pair[np.r_[0, cuts]].tolist() if len(pair) else []
    return {
        (str(u1[p // len(u2)]), str(u2[p % len(u2)])): part
        for p, part in zip(starts, np.split(values, cuts) if starts else [], strict=True)
    }


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
    grid = fig.add_gridspec(nrows, ncols)  # no axes for the empty cell of an odd count
    axes = [fig.add_subplot(grid[i // ncols, i % ncols]) for i in range(len(panels))]
    fixed_layout(fig, nrows, ncols, top_in=top_in)
    latencies = sorted_groups(ops, "op", "variant", "ns") if present else {}
    for ax, op in zip(axes, panels, strict=True):
        if not any(k[0] == op for k in latencies):
            no_data(ax, op)
            continue
        counts = []
        drawn: dict[str, np.ndarray] = {}
        identical = []
        for v in (v for v in variants if (op, v) in latencies):
            ns_all = latencies[op, v]
            same = next((u for u, seen in drawn.items() if np.array_equal(seen, ns_all)), None)
            if same is not None:
                identical.append(f"{v}: identical to {same}")
            drawn[v] = ns_all
            ns, frac = cdf_points(ns_all, 1.0)
            ax.step(ns, frac, where="post", color=color[v], linestyle=style[v], label=v)
            counts.append(ns_all.size)
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
        top_title(ax, op)
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


def plot_evict_vs_leaves(ops: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """Plot ``evict`` latency (ns) against ``evictable_leaves`` per evictor (log axes where the
    values span a decade: :func:`~radixbench.reports.plots_scatter.loglog_scatter`).

    Series are grouped by the variant's evictor (matchers/flatten pooled);
    the legend shows each series' fitted log-log slope (~1: linear in leaves, e.g. a full
    heapify; ~0: independent of leaves). Needs ``op``, ``variant``, ``ns``, ``evictable_leaves``.
    """
    rows = ops[ops["op"] == "evict"] if "op" in ops.columns else ops.iloc[0:0]
    return op_scatter(
        rows, "evictable_leaves", "evictor", path, svg=svg,
        xlabel=("evictable leaves before the call", "count"), ylabel=("evict latency", "ns"),
        title="evict latency vs evictable leaves, by evictor",
    )  # fmt: skip


def plot_match_vs_len(ops: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """Plot ``match_prefix`` latency (ns) against ``key_len`` (tokens) per matcher (log axes
    where the values span a decade).

    Series are grouped by the variant's matcher; the legend shows each series'
    fitted log-log slope. Needs ``op``, ``variant``, ``ns``, ``key_len``.
    """
    rows = ops[ops["op"] == "match_prefix"] if "op" in ops.columns else ops.iloc[0:0]
    return op_scatter(
        rows, "key_len", "matcher", path, svg=svg,
        xlabel=("key length", "tokens"), ylabel=("match_prefix latency", "ns"),
        title="match_prefix latency vs key length, by matcher",
    )  # fmt: skip
