"""Every curve of an eviction study against the best evictor: the ``served`` section of
``study.md`` (``sections = ["served"]``, :data:`radixbench.harness.config.study.SECTIONS`).

Per point and curve — radixbench's evictors, sglang 0.5.23 as served (its Rust and Python tree
cores) and a patch of it — the evict call's p50 and p99, its share of simulated step time (the
scheduler's time spent evicting, coupled clock), and the throughput and TTFT p50 change against
the point's best evictor (the family's own variant with the fastest median evict,
:func:`radixbench.harness.experiments.study.best_variant`) with 95 % paired bootstrap
intervals (:func:`radixbench.reports.study.point_rows`' ``*_vs_best`` columns, one row per curve by
:func:`radixbench.reports.study_best.curves`); then, at the
largest point, one line per served curve.
"""

from __future__ import annotations

import math

import pandas as pd

from radixbench.reports.markdown import markdown_table
from radixbench.reports.study_best import curves

__all__ = ["served_section"]


def _change(r: pd.Series, metric: str) -> str:
    ratio, lo, hi = (r[f"{metric}_vs_best_{k}"] for k in ("ratio", "lo", "hi"))
    if r["curve"] == r["best"]:
        return "best"
    if any(not isinstance(v, float) or math.isnan(v) for v in (ratio, lo, hi)):
        return "n/a"
    return f"{100 * (ratio - 1):+.1f} % [{100 * (lo - 1):+.1f}, {100 * (hi - 1):+.1f}]"


def _us(ns: float) -> str:
    return "n/a" if math.isnan(ns) else f"{ns / 1e3:,.1f}"


def served_section(points: pd.DataFrame) -> list[str]:
    """Markdown lines: the heading, the curves table and the largest point's served curves."""
    df = curves(points)
    if df.empty:
        return []
    head = ["point", "evictable leaves", "curve", "evict p50 (µs)", "evict p99 (µs)",
            "evict share of step time", "throughput vs best [95 % CI]",
            "TTFT p50 vs best [95 % CI]", "load"]  # fmt: skip
    body = []
    for _, r in df.iterrows():
        over = isinstance(r["overloaded"], str) and r["curve"] in r["overloaded"]
        body.append([str(r["point"]), f"{r['evictable_leaves']:,.0f}", str(r["curve"]),
                     _us(r["p50_ns"]), _us(r["p99_ns"]), f"{100 * r['share']:.1f} %",
                     _change(r, "throughput"), _change(r, "ttft_p50"),
                     "overloaded" if over else "served"])  # fmt: skip
    largest = df["point"].iloc[int(df["evictable_leaves"].to_numpy().argmax())]
    last = df[df["point"] == largest]
    best = str(last["best"].iloc[0])
    lines = [
        "## Against the best evictor (sglang as served, its patch, radixbench's evictors)",
        "",
        "Per point and curve: the `evict` call's p50 / p99, the share of simulated step time "
        "spent in it (the scheduler's time evicting, coupled clock), and throughput and TTFT "
        "p50 against the point's best evictor (radixbench's evictor with the fastest median "
        "evict), variant / best - 1, paired by request, 95 % bootstrap intervals (throughput "
        "over 20 arrival blocks). A variant flagged overloaded has a growing queue: its TTFT "
        "measures the queue.",
        "",
        markdown_table(head, body),
        "",
        f"At the largest point ({last['evictable_leaves'].iloc[0]:,.0f} evictable leaves, best "
        f"{best}):",
    ]
    for _, r in last.iterrows():
        if r["curve"] == best:
            continue
        lines.append(
            f"- {r['curve']}: evict p50 {_us(r['p50_ns'])} µs, p99 {_us(r['p99_ns'])} µs, "
            f"{100 * r['share']:.1f} % of step time; throughput {_change(r, 'throughput')}, "
            f"TTFT p50 {_change(r, 'ttft_p50')} vs {best}."
        )
    return lines
