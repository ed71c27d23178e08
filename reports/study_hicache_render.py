"""Rendering of ``radixbench study hicache``: the points table, one plot and ``study.md``.

:func:`write_hicache_study` takes the rows of
:func:`radixbench.reports.study_hicache.hicache_point_rows` (one per point and candidate, plus
the harness's ``point``, ``sweep``, ``x``, ``storage_gbps`` ... columns) and writes, each file
atomically::

    study.json                     the study's settings, crossover constants, wall time, load
    points.{parquet,csv}           the rows
    plots/study-hicache.png + .svg per sweep: TTFT / throughput ratios and the tier split; and
                                   the L3-hit-vs-recompute crossover over storage bandwidth
    study.md                       verdict lines, the table, the method
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.markdown import markdown_table
from radixbench.reports.study_hicache import (
    l3_crossover_gbps,
    l3_hit_time,
    measured_crossover,
)
from radixbench.reports.study_render import _save
from radixbench.reports.tables import write_table

__all__ = ["crossover_summary", "plot_hicache_study", "verdict_lines", "write_hicache_study"]

_TIERS = (("device", "#4c72b0"), ("host", "#dd8452"), ("storage", "#55a868"))
_RATIOS = (("ttft_p50", "TTFT p50"), ("ttft_p99", "TTFT p99"), ("throughput", "throughput"))


def _labels(df: pd.DataFrame) -> list[str]:
    many_x, many_c = df["x"].nunique() > 1, df["candidate"].nunique() > 1
    return [
        " ".join(p for p, on in ((str(r.x), many_x), (str(r.candidate), many_c)) if on)
        or str(r.candidate)
        for r in df.itertuples()
    ]


def _l3_model(c: Mapping[str, Any], gbps: float) -> float:
    return l3_hit_time(
        c["tokens"], gbps, c["bytes_per_token"], c["host_link_bytes_s"], c["page"],
        c["op_latency_s"],
    )  # fmt: skip


def _l3_measured(c: Mapping[str, Any], row: pd.Series) -> float:
    """A ``tokens`` hit at the point's measured read time per token, plus the model's rest."""
    rest = _l3_model(c, math.inf) if np.isfinite(row["l3_read_s_per_token"]) else math.nan
    return float(c["tokens"] * row["l3_read_s_per_token"] + rest)


def crossover_summary(points: pd.DataFrame, c: Mapping[str, Any]) -> dict[str, Any]:
    """The crossover (GB/s) by the model and on the storage sweep's measurements (None:
    none), with the storage sweep's bandwidths and measured hit times (s)."""
    model = l3_crossover_gbps(
        c["tokens"], c["recompute_s"], c["bytes_per_token"], c["host_link_bytes_s"], c["page"],
        c["op_latency_s"],
    )  # fmt: skip
    st = points[(points["sweep"] == "storage")].drop_duplicates("point")
    gbps = st["storage_gbps"].astype(float).tolist()
    meas = [_l3_measured(c, r) for _, r in st.iterrows()]
    return {"model_gbps": model, "measured_gbps": measured_crossover(gbps, meas, c["recompute_s"]),
            "gbps": gbps, "measured_s": meas}  # fmt: skip


def plot_hicache_study(
    points: pd.DataFrame, meta: Mapping[str, Any], cross: Mapping[str, Any], path: Path
) -> Path:
    """Per sweep (a column): TTFT p50 / p99 ratio (off / HiCache) and throughput ratio
    (HiCache / off) with 95 % CIs, > 1 favouring HiCache; under it the hit rate split by tier
    (device / host / storage hit tokens over input tokens) with the device-only hit rate as a
    black tick. Bottom: an L3 hit of ``tokens`` tokens vs recomputing them against storage
    bandwidth (GB/s), model curve and measured points, the crossover marked. Returns the PNG
    path (an SVG lies beside it)."""
    sweeps = list(meta["sweeps"])
    fig = Figure(figsize=(4.2 * max(len(sweeps), 2), 11))
    grid = fig.add_gridspec(3, max(len(sweeps), 1), height_ratios=(1, 1, 1.1))
    for j, name in enumerate(sweeps):
        df = points[points["sweep"] == name].sort_values(["point", "candidate"])
        pos = np.arange(len(df))
        ax = fig.add_subplot(grid[0, j])
        for k, (m, label) in enumerate(_RATIOS):
            y = df[f"{m}_ratio"].to_numpy(float)
            err = np.abs(np.vstack([y - df[f"{m}_lo"], df[f"{m}_hi"] - y]))
            ax.errorbar(pos + (k - 1) * 0.12, y, yerr=err, fmt="o-", ms=4, capsize=2, label=label)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_title(textwrap.fill(str(meta["sweeps"][name][0]), 45), fontsize=9)
        ax.set_xticks(pos, _labels(df), fontsize=8, rotation=20)
        ax.set_ylabel("ratio vs device-only (> 1: HiCache better)", fontsize=8)
        if j == 0:  # one legend per row: the panels share their series
            ax.legend(fontsize=7)
        bx = fig.add_subplot(grid[1, j])
        bottom = np.zeros(len(df))
        for tier, color in _TIERS:
            h = df[f"{tier}_hit_rate"].to_numpy(float)
            bx.bar(pos, h, bottom=bottom, color=color, label=tier, width=0.6)
            bottom += h
        bx.scatter(pos, df["baseline_hit_rate"], marker="_", s=300, c="k", label="device-only")
        bx.set_xticks(pos, _labels(df), fontsize=8, rotation=20)
        bx.set_ylabel("prefix hit tokens / input tokens", fontsize=8)
        bx.set_ylim(0, 1)
        if j == 0:
            bx.legend(fontsize=7, loc="upper left")
    cx = fig.add_subplot(grid[2, :])
    c = meta["crossover"]
    gs = np.geomspace(0.25, 50, 200)
    cx.plot(gs, [_l3_model(c, g) for g in gs], label=f"L3 hit of {c['tokens']:,} tokens (model)")
    cx.axhline(c["recompute_s"], color="k", ls="--", label="recompute (prefill, cost model)")
    if cross["gbps"]:
        cx.scatter(cross["gbps"], cross["measured_s"], c="C3", zorder=3, label="L3 hit, measured")
    for key, ls, what in (("model_gbps", ":", "model"), ("measured_gbps", "-.", "measured")):
        if cross[key]:
            cx.axvline(
                cross[key], color="grey", ls=ls, label=f"crossover {cross[key]:.2g} GB/s ({what})"
            )
    cx.set_xscale("log")
    cx.set_yscale("log")
    cx.set_xlabel("storage read bandwidth (GB/s per rank)")
    cx.set_ylabel("time to first use of the prefix (s)")
    cx.set_title("where an L3 (storage) hit becomes slower than recomputing: left of the crossover")
    cx.legend(fontsize=8)
    return _save(fig, path)


def _ci(r: Any, m: str) -> str:
    return (
        f"{getattr(r, m + '_ratio'):.2f}x [{getattr(r, m + '_lo'):.2f}–{getattr(r, m + '_hi'):.2f}]"
    )


def verdict_lines(
    points: pd.DataFrame, meta: Mapping[str, Any], cross: Mapping[str, Any]
) -> list[str]:
    """One line per point and candidate (hit rate by tier, TTFT and throughput ratios), then the
    crossover."""
    lines = []
    r: Any
    for r in points.sort_values(["point", "candidate"]).itertuples():
        lines.append(
            f"{r.sweep} {r.x} {r.candidate}: hit {r.hit_rate:.0%} (device/host/storage "
            f"{r.device_hit_rate:.0%}/{r.host_hit_rate:.0%}/{r.storage_hit_rate:.0%}) vs "
            f"{r.baseline_hit_rate:.0%} off; TTFT p50 {r.baseline_ttft_p50_s:.2f}->"
            f"{r.ttft_p50_s:.2f} s ({_ci(r, 'ttft_p50')}), p99 {r.baseline_ttft_p99_s:.2f}->"
            f"{r.ttft_p99_s:.2f} s ({_ci(r, 'ttft_p99')}), throughput {_ci(r, 'throughput')}"
            + (f"; overloaded: {r.overloaded}" if r.overloaded else "")
        )
    c = meta["crossover"]
    fmt = lambda g: "none (slower at any bandwidth)" if g is None else f"{g:.2g} GB/s"  # noqa: E731
    lines.append(
        f"L3 crossover: an L3 hit of a {c['tokens']:,}-token prompt is slower than recomputing it "
        f"({c['recompute_s']:.2f} s) below {fmt(cross['model_gbps'])} of storage read bandwidth "
        f"(model); on the storage sweep's measured reads: {fmt(cross['measured_gbps'])}"
    )
    return lines


def write_hicache_study(
    run_dir: Path, points: pd.DataFrame, meta: Mapping[str, Any]
) -> dict[str, Any]:
    """Write the study's files into ``run_dir`` (module docstring); returns ``lines``
    (the verdict lines), ``study_md``, ``plot`` (paths) and ``crossover``
    (:func:`crossover_summary`)."""
    cross = crossover_summary(points, meta["crossover"])
    with atomic_paths(run_dir / "study.json") as (tmp,):
        tmp.write_text(json.dumps({**meta, "crossover_gbps": cross}, indent=2, default=str))
    write_table(points, run_dir, "points")
    (run_dir / "plots").mkdir(exist_ok=True)
    plot = plot_hicache_study(points, meta, cross, run_dir / "plots" / "study-hicache.png")
    verdicts = verdict_lines(points, meta, cross)
    cols = ("sweep", "x", "candidate", "hit_rate", "storage_hit_rate", "ttft_p50_ratio",
            "ttft_p99_ratio", "throughput_ratio", "mean_io_wait_s")  # fmt: skip
    rows = [
        [f"{v:.3g}" if isinstance(v, float) else str(v) for v in r]
        for r in points[list(cols)].itertuples(index=False)
    ]
    md = [
        f"# Study {meta['name']} ({meta['mode']})", "", str(meta["description"]), "",
        "## Verdict", "", *[f"- {v}" for v in verdicts], "",
        f"![plot](plots/{plot.name})", "", markdown_table(cols, rows), "",
        "## Method", "",
        f"Scenario {meta['scenario']}, seed {meta['seed']}; each point one compare of its "
        "`variants.hicache` values, the first (off: the device-only cache) the baseline. Ratios: "
        "TTFT baseline / HiCache (paired by request), block output throughput HiCache / baseline, "
        "95 % percentile-bootstrap CIs (1,000 resamples); > 1 favours HiCache. Crossover: "
        "radixbench.reports.study_hicache. Wall time "
        f"{meta['wall_s']} s, 1-min load {meta['load_avg_1min']}.", "",
    ]  # fmt: skip
    with atomic_paths(run_dir / "study.md") as (tmp,):
        tmp.write_text("\n".join(md), encoding="utf-8")
    return {
        "lines": verdicts,
        "study_md": run_dir / "study.md",
        "plot": plot,
        "crossover": cross,
    }
