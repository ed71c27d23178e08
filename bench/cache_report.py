"""The report of ``radixbench bench cache``: the ratios against the issue's targets, the tables
of the matchers, evictors and insert, the method, and two plots (``match_vs_len.png``,
``evict_vs_leaves.png``). :func:`run_cache_bench` runs :mod:`radixbench.bench.cache` and writes
``bench_cache.csv`` and the plots; :func:`report` renders the Markdown (``make bench`` writes it
to ``BENCHMARKS.md`` with the KV-allocator section of :mod:`radixbench.bench.alloc`)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pandas as pd

from radixbench.bench.cache import BenchSpec, run_all
from radixbench.bench.calibration import Calibration
from radixbench.bench.timing import GC_METHOD
from radixbench.reports.markdown import markdown_table


def _table(df: pd.DataFrame, index: list[str], value: str, fmt: str) -> str:
    """A markdown table: one row per ``index`` tuple, one column per variant."""
    wide = df.pivot_table(index=index, columns="variant", values=value, aggfunc="first")
    cols = [str(c) for c in wide.columns]
    rows = []
    for idx, row in wide.iterrows():
        keys = idx if isinstance(idx, tuple) else (idx,)
        cells = [f"{int(k):,}" if isinstance(k, float | int) else str(k) for k in keys]
        rows.append(cells + [format(v, fmt) for v in row.to_numpy()])
    return markdown_table([*index, *cols], rows)


def targets(df: pd.DataFrame) -> list[tuple[str, float, str, bool]]:
    """``(target, measured, required, met)`` for the issue's ratio targets, from one run: the
    matchers against the ``bytes==`` floor, the evictors timed alone and interleaved."""
    out: list[tuple[str, float, str, bool]] = []
    m = df[df.bench == "match"]
    refs = ("bytes==", "array==", "linear", "galloping")
    best = [v for v in m.variant.unique() if v not in refs]
    for shape, limit in (("edge", 2.0), ("path", 5.0)):
        rows = m[(m["shape"] == shape) & (m["tokens"] == m["tokens"].max())]
        rows = rows[rows.variant.isin(best)]
        if len(rows):
            r = rows.loc[rows["x_bytes_eq"].idxmin()]
            nodes = int(r["nodes"])
            name = f"best matcher ({r.variant}) / bytes== at {int(r.tokens):,} tokens, {nodes} node"
            out.append((name, float(r.x_bytes_eq), f"<= {limit}x", r.x_bytes_eq <= limit))
    for timing in ("alone", "interleaved"):
        e = df[(df.bench == "evict") & (df.leaves > 0) & (df.timing == timing)]
        e = e[e.nodes == e.leaves]  # every leaf evictable (not the trees with locked leaves)
        if not len(e):
            continue
        n = 50_000 if (e.leaves == 50_000).any() else int(e.leaves.max())
        at = e[e.leaves == n].set_index("variant")["median_ns"]
        for base, what in (("heapify-walk", "leaves"), ("heapify", "evictable leaves")):
            if {base, "persistent-heap"} <= set(at.index):
                ratio = at[base] / at["persistent-heap"]
                name = f"{base} / persistent-heap, evict(16) at {n:,} {what}, {timing}"
                out.append((name, ratio, ">= 200x", ratio >= 200))
        if {"persistent-heap", "lru-list"} <= set(at.index):
            lr = at["persistent-heap"] / at["lru-list"]
            name = f"persistent-heap / lru-list at {n:,} leaves, {timing}"
            out.append((name, lr, "> 1x", lr > 1))
    return out


METHOD = (
    "Method: every figure is the median of repetitions, interleaved unless said otherwise "
    "(each round times every variant once, in turn, so background load hits them alike); "
    "ratios are taken within this run; {gc}. `match` times the matching walk of "
    "`match_prefix` (child lookup + matcher per node; no split, no index gather) for a fully "
    "cached key, on one edge and along a 1,000-node path, against the floor `bytes==`: `==` of "
    "two `bytes` copies of the same int64 tokens, one `memcmp` (`array==`, two `array('q')` "
    "compared by CPython's typed item loop, is shown for reference). `evict` times "
    "`evict(16)` with a no-op `free`, so it is "
    "the evictor's data structure alone (the real allocator's `free` per victim is given "
    "separately), on trees of N one-token LRU leaves under the root: every leaf evictable, "
    "and {locked}. Each tree first gets one untimed `evict(16)` (the "
    "persistent heap drops the entries the locks made stale), and the victims of that call and "
    "of one after the timed rounds must agree across evictors; every call evicts 16 more leaves "
    "of the same tree. Each evictor is timed both interleaved and alone (one untimed call, then "
    "all repetitions back to back, on trees of its own built alike): interleaving evicts the "
    "other evictors' data from the CPU caches, which inflates the O(log n) evictors. `insert` "
    "times 1,000-token inserts sharing 0-900-token prefixes. See "
    "`bench/cache.py`."
)

EVICTORS_TEXT = (
    "Evictors: `heapify` follows current SGLang (sglang 0.5.23 `RadixCache.evict`, since SGLang "
    "PR #14339): the cache keeps the set of evictable leaves and every call heapifies that set, "
    "O(E) in evictable leaves. `heapify-walk` follows SGLang before PR #14339 (the baseline "
    "SGLang PR #6907 measured against): every call walks the whole tree to collect the "
    "unlocked leaves and heapifies them, O(N) in tree nodes. `persistent-heap` is PR #6907's "
    "idea (a heap kept up to date across calls, stale entries dropped lazily) with its review "
    "defects fixed, O((k + s) log H). `lru-list` is not from SGLang: an intrusive list of "
    "evictable leaves after vLLM's `FreeKVCacheBlockQueue`, with a side heap for leaves that "
    "become evictable out of order. All four evict the same victims in the same order (checked "
    "here on every tree)."
)


def _speedups(e: pd.DataFrame) -> str:
    """Markdown table: each baseline's median over each candidate's, per tree."""
    wide = e.pivot_table(index=["nodes", "leaves"], columns="variant", values="median_ns")
    pairs = [
        (b, c)
        for c in ("persistent-heap", "lru-list")
        for b in ("heapify-walk", "heapify")
        if {b, c} <= set(wide.columns)
    ]
    head = ["nodes", "evictable leaves", *(f"{b} / {c}" for b, c in pairs)]
    rows = []
    for key, row in wide.iterrows():
        nodes, leaves = cast("tuple[int, int]", key)
        cells = [f"{int(nodes):,}", f"{int(leaves):,}"]
        rows.append(cells + [f"{row[b] / row[c]:.1f}x" for b, c in pairs])
    return markdown_table(head, rows)


def report(
    df: pd.DataFrame,
    env: dict[str, object],
    command: str,
    alloc_md: str | None = None,
    cal: Calibration | None = None,
) -> str:
    """The whole ``bench cache`` report in Markdown; ``alloc_md``: the KV-allocator section of
    ``bench alloc``, appended when given; ``cal``: the run's calibration, recorded with the
    machine, every time table then also given in calibration units (median / the unit)."""
    df = df.copy()
    unit = cal.python_ns if cal is not None else float("nan")
    df["median_cal"] = pd.to_numeric(df["median_ns"], errors="coerce") / unit
    e = df[(df.bench == "evict") & (df.leaves > 0)].copy()
    pairs = sorted({(int(n), int(v)) for n, v in zip(e.nodes, e.leaves) if n != v})
    locked = (
        "; ".join(f"N = {n:,} with all but E = {v:,} leaves locked" for n, v in pairs)
        + " by `inc_lock_ref` (as running requests lock their paths), where `heapify-walk` "
        "still walks all N nodes but `heapify` heapifies only the E evictable leaves"
        if pairs
        else "no tree with locked leaves in this run"
    )
    method = METHOD.format(locked=locked, gc=GC_METHOD)
    lines = ["# Cache microbenchmarks", "", f"Regenerate: `{command}`", "", method, ""]
    lines += [EVICTORS_TEXT, ""]
    lines += ["## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    if cal is not None:
        lines += [f"- {cal.line()}"]
    lines += ["", "## Targets (ratios measured in this run)", ""]
    met_rows = [
        [name, f"{val:.2f}x", req, "yes" if met else "NO"] for name, val, req, met in targets(df)
    ]
    lines += [markdown_table(["target", "measured", "required", "met"], met_rows)]
    m = df[df.bench == "match"].copy()
    m["median_us"] = m["median_ns"] / 1e3
    lines += ["", "## match: median µs of the matching walk (bytes== is the floor)", ""]
    lines += [_table(m, ["shape", "nodes", "tokens"], "median_us", ".1f"), ""]
    lines += ["ratio to bytes== (memcmp) of the same tokens in the same rounds:", ""]
    lines += [_table(m, ["shape", "nodes", "tokens"], "x_bytes_eq", ".2f"), ""]
    lines += _in_cal(m, ["shape", "nodes", "tokens"], cal)
    e["median_us"] = e["median_ns"] / 1e3
    for timing, how in (("alone", "each evictor timed alone"), ("interleaved", "interleaved")):
        t = e[e.timing == timing]
        if not len(t):
            continue
        lines += [f"## evict(16), {how}: median µs vs tree nodes and evictable leaves", ""]
        lines += ["LRU, no-op free. Rows with fewer evictable leaves than nodes: the others are"]
        lines += ["locked.", ""]
        shown = t.rename(columns={"leaves": "evictable leaves"})
        lines += [_table(shown, ["nodes", "evictable leaves"], "median_us", ".1f"), ""]
        lines += _in_cal(shown, ["nodes", "evictable leaves"], cal)
        lines += [f"speed-up over each baseline (ratio of medians, {how}):", ""]
        lines += [_speedups(t), ""]
    free = df[(df.bench == "evict") & (df.leaves == 0)]
    if len(free):
        ns = float(free.median_ns.iloc[0])
        at = f" (= {cal.fmt(ns)})" if cal is not None else ""
        lines += [
            f"Real allocator `free` per victim (not in the figures above): {ns / 1e3:.1f} µs{at}"
        ]
        lines += [""]
    i = df[df.bench == "insert"].copy()
    i["median_us"] = i["median_ns"] / 1e3
    lines += ["## insert: median µs per 1,000-token insert (shared prefixes)", ""]
    lines += [_table(i, ["tokens"], "median_us", ".1f"), ""]
    lines += _in_cal(i, ["tokens"], cal)
    if alloc_md:
        lines += [alloc_md, ""]
    return "\n".join(lines)


def _in_cal(df: pd.DataFrame, index: list[str], cal: Calibration | None) -> list[str]:
    """The same medians as multiples of the calibration unit (nothing without ``cal``)."""
    if cal is None:
        return []
    head = "the same medians in calibration units (cal, median / the run's unit):"
    return [head, "", _table(df, index, "median_cal", ".3g"), ""]


def plots(df: pd.DataFrame, out: Path) -> None:
    """Write ``match_vs_len.png`` (match time vs key length, edge and path) and
    ``evict_vs_leaves.png`` (evict time vs evictable leaves, every leaf evictable) into ``out``
    (which must exist) from the rows of :func:`radixbench.bench.cache.run_all`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = df[df.bench == "match"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, shape in zip(axes, ("edge", "path")):
        for v, g in m[m["shape"] == shape].groupby("variant"):
            ax.loglog(g.tokens, g.median_ns / 1e3, marker="o", label=v)
        ax.set(title=f"match on {shape}", xlabel="key length (tokens)", ylabel="µs")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "match_vs_len.png", dpi=100)
    plt.close(fig)
    e = df[(df.bench == "evict") & (df.leaves > 0)]
    e = e[e.nodes == e.leaves]  # the trees with locked leaves are in the markdown only
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, g in e.groupby(["variant", "timing"]):
        v, timing = cast("tuple[str, str]", key)
        style = "-" if timing == "alone" else ":"
        ax.loglog(g.leaves, g.median_ns / 1e3, style, marker="o", label=f"{v} ({timing})")
    ax.set(title="evict(16), every leaf evictable", xlabel="evictable leaves", ylabel="µs")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "evict_vs_leaves.png", dpi=100)
    plt.close(fig)


def run_cache_bench(spec: BenchSpec, out: Path) -> pd.DataFrame:
    """Run every cache bench of ``spec`` (:func:`radixbench.bench.cache.run_all`), write
    ``bench_cache.csv`` and the plots into ``out`` (created if missing) and return the rows."""
    df = pd.DataFrame(run_all(spec))
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "bench_cache.csv", index=False)
    plots(df, out)
    return df
