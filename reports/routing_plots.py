"""Plots of a cluster run (PNG, SVG on request; matplotlib Agg, as :mod:`~radixbench.reports.
plots`): per-instance load and prefix hit rate over time, one panel per router, and the TTFT
CDF of every router on one panel.

* ``instance_load``: outstanding requests of each instance after each routing decision
  (the ``load`` table), a step line per instance, thinned to at most
  :data:`MAX_POINTS` points per line (every decision counts in the tables);
* ``instance_hit_rate``: per instance, hit tokens / input tokens of the requests arriving in
  each of :data:`TIME_BINS` equal arrival-time bins (finished requests);
* ``ttft_cdf``: the empirical CDF of TTFT (s, log axis) of finished requests, per router.

A panel's title and a CDF line's legend entry name the router, with its gateway count where a
router runs behind several (``cache-aware, 8 gateways``). Each per-instance plot has one legend
naming the instances (same colour in every router's panel), in the figure's right margin, where
it covers no panel.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from radixbench.reports.plotaxes import fixed_layout, top_title
from radixbench.reports.plots import no_data, save_figure
from radixbench.reports.routing import router_labels

__all__ = ["plot_instance_hit_rate", "plot_instance_load", "plot_ttft_cdf"]

MAX_POINTS = 2_000
TIME_BINS = 40


#: Height (in) of one legend entry at :data:`LEGEND_FONT` points and width (in) of one legend
#: column ("instance 31" with its line), for sizing the right margin the legend lies in.
LEGEND_FONT = 7
_ENTRY_H_IN = 0.17
_COLUMN_W_IN = 1.0


def instance_colours(instances: list) -> dict:
    """One colour per instance, the same in every panel (an instance absent from one router's
    panel shifts no other's): tab10 up to 10 instances, tab20 up to 20, else turbo."""
    n = len(instances)
    if n <= 10:
        return {k: f"C{i}" for i, k in enumerate(instances)}
    cmap = colormaps["tab20" if n <= 20 else "turbo"]
    return {k: cmap(i / max(1, n - 1) if n > 20 else i) for i, k in enumerate(instances)}


def _grid(n: int, entries: int = 0) -> tuple[Figure, list, int]:
    """A figure of ``n`` panels (2 per row) with a right margin wide enough for a legend of
    ``entries`` rows in as many columns as the figure's height needs; returns the figure, its
    axes and the legend's column count."""
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    height = 3.0 * rows
    top_in, bottom_in = 0.45, 0.6
    per_column = max(1, int((height - top_in - bottom_in) / _ENTRY_H_IN))
    ncol = math.ceil(entries / per_column) if entries else 0
    right_in = 0.3 + _COLUMN_W_IN * ncol
    fig = Figure(figsize=(6.0 * cols + right_in - 0.25, height))
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    fixed_layout(fig, rows, cols, top_in=top_in, bottom_in=bottom_in, right_in=right_in)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes, ncol


def _legend(fig: Figure, axes: list, colours: dict, ncol: int) -> None:
    """One legend for every panel (an instance has the same colour in each), in the figure's
    right margin beside the top-right panel, where it covers no panel; none without lines."""
    if not colours:
        return
    handles = [Line2D([], [], color=c, lw=1.2) for c in colours.values()]
    top_right = axes[1] if len(axes) > 1 and axes[1].get_visible() else axes[0]
    box = top_right.get_position()
    fig.legend(
        handles,
        [f"instance {k}" for k in colours],
        fontsize=LEGEND_FONT,
        ncols=max(1, ncol),
        loc="upper left",
        bbox_to_anchor=(box.x1 + 0.1 / fig.get_size_inches()[0], box.y1),
        borderaxespad=0.0,
    )


def plot_instance_load(
    load: pd.DataFrame, labels: pd.DataFrame, path: Path | str, *, svg: bool = False
) -> Path:
    """``load``: ``variant``, ``sim_time_s``, ``instance``, ``outstanding``; ``labels``: a table
    with ``variant`` and ``router`` (and ``gateways``, ``instances``: panel titles)."""
    variants = list(dict.fromkeys(load["variant"])) or ["-"]
    colours = instance_colours(sorted(load["instance"].unique()))
    names = router_labels(labels)
    fig, axes, ncol = _grid(len(variants), len(colours))
    for ax, variant in zip(axes, variants):
        rows = load[load["variant"] == variant]
        if not len(rows):
            no_data(ax, "outstanding requests per instance")
            continue
        for inst, part in rows.groupby("instance", sort=True):
            step = max(1, len(part) // MAX_POINTS)
            part = part.iloc[::step]
            ax.step(part["sim_time_s"], part["outstanding"], where="post", lw=0.8,
                    color=colours[inst])  # fmt: skip
        ax.set_title(f"{names.get(variant, variant)}: outstanding requests per instance")
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("requests")
        ax.grid(alpha=0.3)
    _legend(fig, axes, colours, ncol)
    return save_figure(fig, path, svg=svg)


def plot_instance_hit_rate(requests: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """``requests``: the per-request table with ``instance`` (and ``router``)."""
    done = requests[requests["status"] == "finished"]
    variants = list(dict.fromkeys(requests["variant"])) or ["-"]
    colours = instance_colours(sorted(done["instance"].unique()))
    fig, axes, ncol = _grid(len(variants), len(colours))
    t_max = float(done["arrival_s"].max()) if len(done) else 1.0
    edges = np.linspace(0.0, max(t_max, 1e-9), TIME_BINS + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    names = router_labels(requests)
    for ax, variant in zip(axes, variants):
        rows = done[done["variant"] == variant]
        if not len(rows):
            no_data(ax, "prefix hit rate per instance")
            continue
        for inst, part in rows.groupby("instance", sort=True):
            b = np.clip(np.digitize(part["arrival_s"], edges) - 1, 0, TIME_BINS - 1)
            hit = np.bincount(b, weights=part["prefix_hit_tokens"], minlength=TIME_BINS)
            inp = np.bincount(b, weights=part["input_len"], minlength=TIME_BINS)
            rate = np.divide(hit, inp, out=np.full(TIME_BINS, np.nan), where=inp > 0)
            ax.plot(mids, rate, lw=0.9, marker=".", ms=3, color=colours[inst])
        top_title(ax, f"{names.get(variant, variant)}: prefix hit rate per instance")
        ax.set_xlabel("arrival time (s)")
        ax.set_ylabel("hit tokens / input tokens")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    _legend(fig, axes, colours, ncol)
    return save_figure(fig, path, svg=svg)


def plot_ttft_cdf(requests: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """TTFT CDF per router (finished requests)."""
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.subplots()
    fixed_layout(fig, right_in=1.9)
    done = requests[requests["status"] == "finished"]
    drawn = False
    names = router_labels(requests)
    for variant in dict.fromkeys(requests["variant"]):
        ttft = np.sort(done.loc[done["variant"] == variant, "ttft_s"].to_numpy(np.float64))
        ttft = ttft[ttft > 0]
        if not ttft.size:
            continue
        step = max(1, ttft.size // MAX_POINTS)
        y = np.arange(1, ttft.size + 1) / ttft.size
        ax.step(ttft[::step], y[::step], where="post", label=names.get(variant, variant))
        drawn = True
    if not drawn:
        no_data(ax, "TTFT CDF per router")
        return save_figure(fig, path, svg=svg)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s, simulated)")
    ax.set_ylabel("fraction of requests")
    top_title(ax, "TTFT CDF per router")
    ax.axhline(0.9, color="grey", lw=0.6, ls=":")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, svg=svg)
