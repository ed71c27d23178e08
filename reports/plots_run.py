"""Run-level plots: request latency CDFs, prefix hit rate and KV/queue over time, cost vs tree
size, match time vs matched length and the verdict bar chart (PNG, SVG on request; Agg).

Same conventions as :mod:`radixbench.reports.plots`: explicit Agg canvas (no pyplot state),
every figure titled with unit-labelled axes, "no data" panels instead of errors on empty input,
atomic writes, each function returns the PNG path it wrote (the SVG, with ``svg=True``,
lies beside it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from radixbench.reports.plotaxes import (
    compact_number,
    fixed_layout,
    log_tick_values,
    log_ticks,
    top_title,
)
from radixbench.reports.plots import cdf_points, no_data, op_scatter, save_figure
from radixbench.reports.plots_scatter import (
    XLABEL_IN,
    legend_room_in,
    loglog_scatter,
    scatter_series,
)

__all__ = [
    "MAX_LINE_POINTS",
    "plot_cost_vs_tree",
    "plot_hit_rate_over_time",
    "plot_kv_queue_over_time",
    "plot_match_vs_matched",
    "plot_request_cdfs",
    "plot_verdict_bars",
    "thin_max",
]

#: Time-series lines draw at most this many points (:func:`thin_max`, evenly spaced requests).
MAX_LINE_POINTS = 2_000

#: Ops of the cost-vs-tree-size figure and the variant axis each is grouped (coloured) by: the
#: axis whose algorithm the op runs, so its clusters are the series (insert walks the tree with
#: the matcher before it adds the new suffix).
TREE_OPS: tuple[tuple[str, str], ...] = (
    ("match_prefix", "matcher"),
    ("insert", "matcher"),
    ("evict", "evictor"),
)


def thin_max(
    t: np.ndarray, y: np.ndarray, max_points: int = MAX_LINE_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """``(t, y)`` reduced to at most ``max_points`` points: consecutive runs of ``k`` samples
    become one point at the run's first ``t`` with the run's maximum ``y``, so peaks (a queue
    spike, KV full) survive the thinning. Arrays of at most ``max_points`` are returned as is."""
    if t.size <= max_points:
        return t, y
    starts = np.arange(0, t.size, -(-t.size // max_points))
    return t[starts], np.maximum.reduceat(y, starts)


def plot_request_cdfs(requests: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """TTFT and E2E latency CDFs (s, log x) of finished requests, one line per variant."""
    fig = Figure(figsize=(12.0, 4.6))
    axes = fig.subplots(1, 2)
    fixed_layout(fig, 1, 2, top_in=0.8)
    done = requests[requests["status"] == "finished"]
    for ax, col, label in zip(axes, ("ttft_s", "e2e_s"), ("TTFT", "E2E latency"), strict=True):
        if done.empty:
            no_data(ax, label)
            continue
        for variant, group in done.groupby("variant", sort=True):
            x, frac = cdf_points(group[col].to_numpy(np.float64), 1e-9)
            ax.step(x, frac, where="post", label=str(variant))
        ax.set_xscale("log")
        log_ticks(ax, "x")
        ax.set_ylim(0.0, 1.02)
        top_title(ax, f"{label} CDF")
        ax.set_xlabel(f"{label} (s, log scale)")
        ax.set_ylabel("fraction of finished requests")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small", loc="lower right")
    fig.suptitle("Request latency CDFs by variant", y=1 - 0.1 / 4.6, va="top")
    return save_figure(fig, path, svg=svg)


def plot_hit_rate_over_time(
    requests: pd.DataFrame,
    path: Path | str,
    ceiling: Mapping[str, Any] | None = None,
    *,
    svg: bool = False,
) -> Path:
    """Cumulative prefix hit rate (hit tokens / input tokens of finished requests, by arrival
    time in s) per variant; the trace's hit-rate ceiling (``ceiling["all"]``, a fraction) is
    drawn as a dashed line when given."""
    fig = Figure(figsize=(8.0, 4.5))
    ax = fig.subplots()
    fixed_layout(fig)
    done = requests[requests["status"] == "finished"].sort_values(["variant", "arrival_s"])
    if done.empty:
        no_data(ax, "prefix hit rate over time")
        return save_figure(fig, path, svg=svg)
    for variant, group in done.groupby("variant", sort=True):
        inp = np.cumsum(group["input_len"].to_numpy(np.float64))
        hit = np.cumsum(group["prefix_hit_tokens"].to_numpy(np.float64))
        rate = np.divide(hit, inp, out=np.zeros_like(hit), where=inp > 0)
        # a cumulative rate changes slowly: at most MAX_LINE_POINTS evenly spaced requests
        keep = np.unique(np.linspace(0, rate.size - 1, MAX_LINE_POINTS).round().astype(np.int64))
        ax.plot(group["arrival_s"].to_numpy(np.float64)[keep], rate[keep], label=str(variant))
    if ceiling and isinstance(ceiling.get("all"), (int, float)):
        ax.axhline(float(ceiling["all"]), ls="--", color="k", label="ceiling (infinite cache)")
    ax.set_ylim(0.0, 1.02)
    top_title(ax, "Cumulative prefix hit rate over time")
    ax.set_xlabel("arrival time (s, simulated)")
    ax.set_ylabel("prefix hit rate (fraction of input tokens)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small")
    return save_figure(fig, path, svg=svg)


def plot_kv_queue_over_time(
    timeseries: pd.DataFrame, path: Path | str, *, svg: bool = False
) -> Path:
    """KV utilisation (kv_used_tokens / kv_capacity_tokens, %) and queue length (waiting
    requests) over simulated time (s), one line per variant, from the ``timeseries`` table; a
    long run is thinned to :data:`MAX_LINE_POINTS` per line keeping each stretch's maximum."""
    fig = Figure(figsize=(12.0, 4.2))
    ax_kv, ax_q = fig.subplots(1, 2)
    fixed_layout(fig, 1, 2)
    if timeseries.empty:
        no_data(ax_kv, "KV utilisation")
        no_data(ax_q, "queue length")
        return save_figure(fig, path, svg=svg)
    for variant, group in timeseries.sort_values("sim_time_s").groupby("variant", sort=True):
        t = group["sim_time_s"].to_numpy(np.float64)
        cap = group["kv_capacity_tokens"].to_numpy(np.float64)
        used = group["kv_used_tokens"].to_numpy(np.float64)
        util = np.divide(used, cap, out=np.zeros_like(used), where=cap > 0) * 100.0
        ax_kv.step(*thin_max(t, util), where="post", label=str(variant))
        queue = group["queue_len"].to_numpy(np.float64)
        ax_q.step(*thin_max(t, queue), where="post", label=str(variant))
    ax_kv.set_ylim(0.0, 102.0)
    top_title(ax_kv, "KV utilisation over time")
    ax_kv.set_ylabel("KV slots used (% of capacity)")
    ax_q.set_ylim(0.0, max(1.0, ax_q.get_ylim()[1]))  # a count: no negative range
    top_title(ax_q, "Queue length over time")
    ax_q.set_ylabel("waiting requests (count)")
    for ax in (ax_kv, ax_q):
        ax.set_xlabel("simulated time (s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    return save_figure(fig, path, svg=svg)


def plot_cost_vs_tree(ops: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """Per-op latency (ns) against tree size (``tree_tokens`` before the call), log-log with
    the fitted slope per series, for ``match_prefix`` and ``insert`` (coloured by matcher) and
    ``evict`` (by evictor): :data:`TREE_OPS`; each panel's title names its colour axis and its
    legend lies under it."""
    rows = {op: ops[ops["op"] == op] for op, _ in TREE_OPS}
    room = legend_room_in(
        max(scatter_series(rows[op], "tree_tokens", axis) for op, axis in TREE_OPS)
    )
    fig = Figure(figsize=(6.0 * len(TREE_OPS), 5.0 + room))
    axes = fig.subplots(1, len(TREE_OPS))
    fixed_layout(fig, 1, len(TREE_OPS), top_in=0.8, bottom_in=XLABEL_IN + room)
    for ax, (op, axis) in zip(axes, TREE_OPS, strict=True):
        loglog_scatter(
            ax,
            rows[op],
            "tree_tokens",
            axis,
            xlabel=("tree size before the call", "tokens"),
            ylabel=(f"{op} latency", "ns"),
        )
        top_title(ax, f"{op} latency vs tree size (colour: {axis})")
    fig.suptitle(
        "Per-op cost vs tree size (legend: fitted log-log slope)", y=1 - 0.1 / 5.0, va="top"
    )
    return save_figure(fig, path, svg=svg)


def plot_match_vs_matched(ops: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """``match_prefix`` latency (ns) against the matched length (``result``, tokens) per
    matcher, log-log with fitted slopes; misses (0 matched tokens) are left out."""
    rows = ops[ops["op"] == "match_prefix"]
    return op_scatter(
        rows, "result", "matcher", path, svg=svg,
        xlabel=("matched prefix length", "tokens"), ylabel=("match_prefix latency", "ns"),
        title="match_prefix latency vs matched length, by matcher",
    )  # fmt: skip


def plot_verdict_bars(verdicts: pd.DataFrame, path: Path | str, *, svg: bool = False) -> Path:
    """Horizontal bars of the median ratio baseline/candidate per (metric, candidate), each
    labelled ``"<metric>: <candidate> vs <baseline>"``, on a log ratio axis: a bar runs from 1
    (a labelled tick and a reference line) to its ratio, right of 1 = candidate faster, so 0.9
    and 1.1 read as far from 1 as 1/0.9 and 1.1 do beside a 7x bar; the bootstrap 95 % interval
    is drawn as error bars and written beside each bar (``ratio [low, high]``). A ratio that is
    not finite and positive gets no bar."""
    n = len(verdicts)
    base = verdicts["baseline"] if "baseline" in verdicts else pd.Series("?", index=verdicts.index)
    labels = [
        f"{m}: {c} vs {b}"
        for m, c, b in zip(verdicts["metric"], verdicts["candidate"], base, strict=True)
    ]
    # left margin from the longest label ("small" font: ~0.065 in per character); values right
    left_in = 0.4 + 0.065 * max((len(s) for s in labels), default=0)
    right_in = 1.6
    fig = Figure(figsize=(max(9.0, left_in + right_in + 5.0), max(3.0, 0.45 * n + 1.5)))
    ax = fig.subplots()
    fixed_layout(fig, left_in=left_in, bottom_in=0.65, right_in=right_in)
    if n == 0:
        no_data(ax, "speed-up of each candidate over its baseline")
        return save_figure(fig, path, svg=svg)
    ratio = verdicts["ratio"].to_numpy(np.float64)
    lo = verdicts["ci_low"].to_numpy(np.float64)
    hi = verdicts["ci_high"].to_numpy(np.float64)
    ok = np.isfinite(ratio) & (ratio > 0)
    err = np.vstack([np.clip(ratio - lo, 0, None), np.clip(hi - ratio, 0, None)])
    err = np.where(ok, np.nan_to_num(err, nan=0.0, posinf=0.0), 0.0)
    colors = (
        verdicts["verdict"].map({"faster": "tab:green", "slower": "tab:red"}).fillna("tab:gray")
    )
    y = np.arange(n)
    ax.set_xscale("log")
    ax.barh(y, np.where(ok, ratio - 1.0, 0.0), left=1.0, xerr=err, color=list(colors), capsize=3)
    ax.axvline(1.0, color="k", lw=1)
    shown = np.concatenate([ratio[ok], lo[ok & (lo > 0)], hi[ok & np.isfinite(hi)], [1.0]])
    ax.set_xlim(float(shown.min()) / 1.15, float(shown.max()) * 1.15)
    ticks = sorted({1.0, *log_tick_values(*ax.get_xlim())})
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(compact_number))
    ax.xaxis.set_minor_locator(NullLocator())
    for i in range(n):  # the figures, in a column right of the axes
        text = f"{ratio[i]:.2f} [{lo[i]:.2f}, {hi[i]:.2f}]" if ok[i] else "n/a"
        ax.text(1.02, y[i], text, transform=ax.get_yaxis_transform(), va="center",
                fontsize="small")  # fmt: skip
    ax.set_yticks(y, labels, fontsize="small")
    ax.invert_yaxis()
    top_title(ax, "Median ratio baseline / candidate with bootstrap 95 % CI")
    ax.set_xlabel("ratio (dimensionless, log scale; > 1: candidate faster)")
    ax.grid(True, axis="x", alpha=0.3)
    return save_figure(fig, path, svg=svg)
