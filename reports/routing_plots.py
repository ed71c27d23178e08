"""Plots of a cluster run (PNG, SVG on request; matplotlib Agg, as :mod:`~radixbench.reports.
plots`): per-instance load and prefix hit rate over time, one panel per router, and the TTFT
CDF of every router on one panel.

* ``instance_load``: outstanding requests of each instance after each routing decision
  (the ``load`` table), a step line per instance, thinned to at most
  :data:`MAX_POINTS` points per line (every decision counts in the tables);
* ``instance_hit_rate``: per instance, hit tokens / input tokens of the requests arriving in
  each of :data:`TIME_BINS` equal arrival-time bins (finished requests);
* ``ttft_cdf``: the empirical CDF of TTFT (s, log axis) of finished requests, per router.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from radixbench.reports.plotaxes import fixed_layout
from radixbench.reports.plots import no_data, save_figure

__all__ = ["plot_instance_hit_rate", "plot_instance_load", "plot_ttft_cdf"]

MAX_POINTS = 2_000
TIME_BINS = 40


def _grid(n: int) -> tuple[Figure, list, int, int]:
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(6.0 * cols, 3.0 * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    fixed_layout(fig, rows, cols, right_in=1.3)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes, rows, cols


def _label(df: pd.DataFrame, variant: str) -> str:
    rows = df[df["variant"] == variant]
    if "router" in rows.columns and len(rows):
        return str(rows["router"].iloc[0])
    return variant


def plot_instance_load(
    load: pd.DataFrame, labels: pd.DataFrame, path: Path | str, *, svg: bool = False
) -> Path:
    """``load``: ``variant``, ``sim_time_s``, ``instance``, ``outstanding``; ``labels``: a table
    with ``variant`` and ``router`` (panel titles)."""
    variants = list(dict.fromkeys(load["variant"])) or ["-"]
    fig, axes, _, _ = _grid(len(variants))
    for ax, variant in zip(axes, variants):
        rows = load[load["variant"] == variant]
        if not len(rows):
            no_data(ax, "outstanding requests per instance")
            continue
        for inst, part in rows.groupby("instance", sort=True):
            step = max(1, len(part) // MAX_POINTS)
            part = part.iloc[::step]
            ax.step(part["sim_time_s"], part["outstanding"], where="post", lw=0.8,
                    label=f"instance {inst}")  # fmt: skip
        ax.set_title(f"{_label(labels, variant)}: outstanding requests per instance")
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("requests")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, svg=svg)


def plot_instance_hit_rate(requests: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """``requests``: the per-request table with ``instance`` (and ``router``)."""
    done = requests[requests["status"] == "finished"]
    variants = list(dict.fromkeys(requests["variant"])) or ["-"]
    fig, axes, _, _ = _grid(len(variants))
    t_max = float(done["arrival_s"].max()) if len(done) else 1.0
    edges = np.linspace(0.0, max(t_max, 1e-9), TIME_BINS + 1)
    mids = (edges[:-1] + edges[1:]) / 2
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
            ax.plot(mids, rate, lw=0.9, marker=".", ms=3, label=f"instance {inst}")
        ax.set_title(f"{_label(requests, variant)}: prefix hit rate per instance")
        ax.set_xlabel("arrival time (s)")
        ax.set_ylabel("hit tokens / input tokens")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, svg=svg)


def plot_ttft_cdf(requests: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """TTFT CDF per router (finished requests)."""
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.subplots()
    fixed_layout(fig, right_in=1.9)
    done = requests[requests["status"] == "finished"]
    drawn = False
    for variant in dict.fromkeys(requests["variant"]):
        ttft = np.sort(done.loc[done["variant"] == variant, "ttft_s"].to_numpy(np.float64))
        ttft = ttft[ttft > 0]
        if not ttft.size:
            continue
        step = max(1, ttft.size // MAX_POINTS)
        y = np.arange(1, ttft.size + 1) / ttft.size
        ax.step(ttft[::step], y[::step], where="post", label=_label(requests, variant))
        drawn = True
    if not drawn:
        no_data(ax, "TTFT CDF per router")
        return save_figure(fig, path, svg=svg)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s, simulated)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("TTFT CDF per router")
    ax.axhline(0.9, color="grey", lw=0.6, ls=":")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, svg=svg)
