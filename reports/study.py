"""Statistics of a ``radixbench study``: serving effect of one algorithm family vs a quantity.

A study runs one compare per *point* (all variants interleaved in one process, under the
coupled clock), and :func:`point_rows` turns each point's tables into one row per candidate
variant, compared with the family's baseline variant:

* the **quantity** the algorithm's cost scales with, read from the baseline's per-op table:
  eviction — median ``evictable_leaves`` and ``tree_nodes`` before each ``evict`` call (count);
  matching — median matched length (``result``, tokens) of the ``match_prefix`` calls that hit
  and median query length (``key_len``, tokens);
* the op's own speed-up: median ``ns`` baseline / candidate, unpaired bootstrap (blocks of
  simulated time beyond 1,000 calls, :mod:`~radixbench.reports.resampled`)
  (:func:`radixbench.reports.verdicts.bootstrap_ratio`);
* the **serving effect** over the *measured window* — requests arriving at or after the first
  ``evict`` call of any variant (eviction: before it, the pool is filling and the variants run
  the same code) or all requests (matching): TTFT p50 ratio (paired by ``rid``,
  ``bootstrap_ratio(paired=True)``), TTFT p99 and mean E2E latency ratios (the same paired
  percentile bootstrap on that statistic, :func:`paired_stat_ratio`), all baseline / candidate,
  and the throughput ratio candidate / baseline (:func:`block_throughput_ratio`). A ratio > 1
  means the candidate is better; every interval is a 95 % percentile bootstrap (1,000
  resamples, seeded, deterministic);
* against the **best evictor** (``best``: the family's own variant with the lowest median op
  time at the point, chosen by the harness): each variant's throughput and TTFT p50, variant /
  best, paired by request, 95 % bootstrap intervals; and the op's p99 per variant;
* the **share of step time** in cache operations: simulated step time is the cost model's
  forward time plus (coupled clock) the measured CPU time of the step's top-level cache
  operations and batch builds; ``cache_share`` = that measured time / step time, ``op_share``
  = the family's op alone (``evict`` / ``match_prefix``) / step time, both over the window.

**Crossover** (:func:`crossover`): for a metric and a candidate, the smallest quantity among
the points from which on the ratio's verdict is "faster" at that point and every larger one
(:func:`radixbench.reports.verdicts.verdict`, the rule of every verdict: the whole 95 % CI
above ``1 + MIN_EFFECT``, the candidate better by more than 3 % with 95 % confidence; a lone
noisy point below the largest one does not count); ``x_interp`` refines it to where the
point estimate, linear in log quantity between that point and the point before it, crosses
``1 + MIN_EFFECT``. No point qualifying means "no crossover up to the largest point".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from radixbench.reports.bootstrap import bootstrap_ratio
from radixbench.reports.verdicts import call_blocks, verdict, verdict_bars

__all__ = [
    "FAMILIES",
    "METRICS",
    "block_throughput_ratio",
    "crossover",
    "paired_stat_ratio",
    "point_rows",
]

#: family -> (variant axis, op that axis changes, x column, x axis label with unit).
FAMILIES: dict[str, tuple[str, str, str, str]] = {
    "eviction": ("evictor", "evict", "evictable_leaves", "evictable leaves at evict (median)"),
    "matching": ("matcher", "match_prefix", "matched_tokens", "matched length (tokens, median)"),
}
#: Serving metrics of a study row (``<metric>_ratio`` / ``_lo`` / ``_hi``) -> label.
METRICS: dict[str, str] = {
    "ttft_p50": "TTFT p50",
    "ttft_p99": "TTFT p99",
    "throughput": "throughput",
    "e2e_mean": "mean E2E latency",
}


def paired_stat_ratio(
    base: np.ndarray,
    cand: np.ndarray,
    stat: Callable[..., np.ndarray],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """``stat(base) / stat(cand)`` and its paired percentile-bootstrap interval: the verdicts'
    bootstrap (:func:`radixbench.reports.verdicts.bootstrap_ratio` with ``paired=True`` and this
    ``stat``).

    ``base``, ``cand``: 1-D float arrays of equal length, element i the same request under both
    variants (pairs with a NaN dropped); ``stat(x, axis=...)``: a reduction such as
    ``np.mean`` or ``functools.partial(np.quantile, q=0.99)``. Returns ``(ratio, lo, hi)``, all
    NaN for empty input. ``ValueError`` on unequal lengths. Deterministic for ``seed``.
    """
    return bootstrap_ratio(
        base, cand, n_resamples=n_resamples, seed=seed, level=level, paired=True, stat=stat
    )


def block_throughput_ratio(
    arrival_s: np.ndarray,
    finish_base_s: np.ndarray,
    finish_cand_s: np.ndarray,
    *,
    blocks: int = 20,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Throughput ratio candidate / baseline of the same requests, with a block bootstrap.

    Requests (arrays of one value per request, s) are cut, in arrival order, into ``blocks``
    consecutive groups (fewer when there are under 5 requests per group); a group's duration
    is its last finish minus its first arrival. The output tokens are the same under both
    variants, so the ratio of tokens/s is ``sum(base durations) / sum(cand durations)`` (one
    group: vLLM's ``duration`` ratio). The interval resamples groups with replacement.
    """
    order = np.argsort(arrival_s, kind="stable")
    arr, fb, fc = (
        np.asarray(a, dtype=np.float64)[order] for a in (arrival_s, finish_base_s, finish_cand_s)
    )
    if arr.size == 0:
        return float("nan"), float("nan"), float("nan")
    k = max(1, min(blocks, arr.size // 5))
    parts = np.array_split(np.arange(arr.size), k)
    db = np.array([fb[p].max() - arr[p].min() for p in parts])
    dc = np.array([fc[p].max() - arr[p].min() for p in parts])
    ratio = float(db.sum() / dc.sum())
    idx = np.random.default_rng(seed).integers(0, k, size=(n_resamples, k))
    boot = db[idx].sum(axis=1) / dc[idx].sum(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return ratio, float(lo), float(hi)


def _window_start(ops: pd.DataFrame, family: str) -> float:
    """Simulated time (s) the measured window starts: first evict (eviction) or 0."""
    if family != "eviction":
        return 0.0
    ev = ops.loc[ops["op"] == "evict", "sim_time_s"]
    return float(ev.min()) if len(ev) else 0.0


def _quantities(ops: pd.DataFrame, family: str, n_window: int) -> dict[str, Any]:
    """The x quantities of a point, from the baseline variant's per-op rows."""
    op = FAMILIES[family][1]
    sel = ops[ops["op"] == op]
    out: dict[str, Any] = {f"{op}_calls": len(sel)}
    if family == "eviction":
        out["evictable_leaves"] = float(sel["evictable_leaves"].median()) if len(sel) else np.nan
        out["tree_nodes"] = float(sel["tree_nodes"].median()) if len(sel) else np.nan
        out["evicts_per_request"] = len(sel) / n_window if n_window else np.nan
    else:
        hits = sel[sel["result"] > 0]
        out["matched_tokens"] = float(hits["result"].median()) if len(hits) else np.nan
        out["key_tokens"] = float(sel["key_len"].median()) if len(sel) else np.nan
    return out


def _shares(ts: pd.DataFrame, ops: pd.DataFrame, op: str, t0: float) -> tuple[float, float]:
    """(cache_share, op_share) of simulated step time over steps starting at or after ``t0``."""
    steps = ts[ts["sim_time_s"] >= t0]
    total = float(steps["step_s"].sum())
    if total <= 0:
        return float("nan"), float("nan")
    op_s = float(ops.loc[(ops["op"] == op) & (ops["sim_time_s"] >= t0), "ns"].sum()) * 1e-9
    return float(steps["measured_cpu_s"].sum()) / total, op_s / total


def point_rows(
    requests: pd.DataFrame,
    ops: pd.DataFrame,
    timeseries: pd.DataFrame,
    *,
    family: str,
    baseline: str,
    candidates: Sequence[str],
    seed: int = 0,
    n_resamples: int = 1000,
    best: str | None = None,
) -> list[dict[str, Any]]:
    """One row per candidate of one study point (see the module docstring for every column).

    ``requests`` / ``ops`` / ``timeseries``: the point's per-request, per-op and per-step
    tables (docs/CONTRACTS.md); ``baseline`` / ``candidates``: variant names present in them;
    ``best``: a variant to set every other against as well (the ``*_vs_best`` columns of
    :func:`_vs_best`; None: none). Pure: mutates nothing. ``ValueError`` on an unknown family
    or a variant absent from ``requests``.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown study family {family!r}; known: {', '.join(FAMILIES)}")
    present = set(requests["variant"].unique())
    for v in (baseline, *candidates):
        if v not in present:
            raise ValueError(f"variant {v!r} is not in the point's requests table")
    op = FAMILIES[family][1]
    t0 = _window_start(ops, family)
    done = requests[(requests["status"] == "finished") & (requests["arrival_s"] >= t0)]
    base_req = done[done["variant"] == baseline]
    base_ops = ops[ops["variant"] == baseline]
    q = _quantities(base_ops, family, len(base_req))
    b_share = _shares(timeseries[timeseries["variant"] == baseline], base_ops, op, t0)
    p99 = _quantile(0.99)
    rows = []
    for cand in candidates:
        both = base_req.merge(done[done["variant"] == cand], on="rid", suffixes=("_b", "_c"))
        cand_ops = ops[ops["variant"] == cand]
        c_share = _shares(timeseries[timeseries["variant"] == cand], cand_ops, op, t0)
        tb, tc = both["ttft_s_b"].to_numpy(), both["ttft_s_c"].to_numpy()
        eb, ec = both["e2e_s_b"].to_numpy(), both["e2e_s_c"].to_numpy()
        kw: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed}
        row: dict[str, Any] = {
            "family": family,
            "baseline": baseline,
            "candidate": cand,
            "window_start_s": t0,
            "n_requests": len(both),
            **q,
            "op_base_ns": float(base_ops.loc[base_ops["op"] == op, "ns"].median()),
            "op_cand_ns": float(cand_ops.loc[cand_ops["op"] == op, "ns"].median()),
            "op_p99_base_ns": _p99(base_ops.loc[base_ops["op"] == op, "ns"]),
            "op_p99_cand_ns": _p99(cand_ops.loc[cand_ops["op"] == op, "ns"]),
            "ttft_p50_base_s": float(np.median(tb)) if tb.size else np.nan,
            "ttft_p50_cand_s": float(np.median(tc)) if tc.size else np.nan,
            "ttft_p99_base_s": float(np.quantile(tb, 0.99)) if tb.size else np.nan,
            "ttft_p99_cand_s": float(np.quantile(tc, 0.99)) if tc.size else np.nan,
            "e2e_mean_base_s": float(eb.mean()) if eb.size else np.nan,
            "e2e_mean_cand_s": float(ec.mean()) if ec.size else np.nan,
            "cache_share_base": b_share[0],
            "cache_share_cand": c_share[0],
            "op_share_base": b_share[1],
            "op_share_cand": c_share[1],
        }
        b_op, c_op = base_ops[base_ops["op"] == op], cand_ops[cand_ops["op"] == op]
        blocks = call_blocks(b_op, c_op)  # blocks of simulated time, as the verdicts
        stats = {
            "op": bootstrap_ratio(
                b_op["ns"].to_numpy(np.float64),
                c_op["ns"].to_numpy(np.float64),
                blocks=blocks,
                **kw,
            ),
            "ttft_p50": bootstrap_ratio(tb, tc, paired=True, **kw),
            "ttft_p99": paired_stat_ratio(tb, tc, p99, **kw),
            "e2e_mean": paired_stat_ratio(eb, ec, np.mean, **kw),
            "throughput": block_throughput_ratio(
                both["arrival_s_b"].to_numpy(),
                both["finish_s_b"].to_numpy(),
                both["finish_s_c"].to_numpy(),
                **kw,
            ),
        }
        for name, (r, lo, hi) in stats.items():
            row[f"{name}_ratio"], row[f"{name}_lo"], row[f"{name}_hi"] = r, lo, hi
        if best is not None:
            for who, variant in (("base", baseline), ("cand", cand)):
                row.update(_vs_best(done, best, variant, who, kw))
        rows.append(row)
    return rows


def _p99(ns: pd.Series) -> float:
    return float(ns.quantile(0.99)) if len(ns) else float("nan")


def _vs_best(
    done: pd.DataFrame, best: str, variant: str, who: str, kw: dict[str, Any]
) -> dict[str, Any]:
    """``variant`` against ``best`` over the same finished requests (paired by ``rid``):
    ``best`` = the name; ``<who>_throughput_vs_best_{ratio,lo,hi}`` (variant / best, the block
    bootstrap) and ``<who>_ttft_p50_vs_best_{ratio,lo,hi}`` (variant / best: > 1 = slower),
    95 % intervals."""
    pair = done[done["variant"] == best].merge(
        done[done["variant"] == variant], on="rid", suffixes=("_b", "_c")
    )
    thr = block_throughput_ratio(
        pair["arrival_s_b"].to_numpy(), pair["finish_s_b"].to_numpy(),
        pair["finish_s_c"].to_numpy(), **kw,
    )  # fmt: skip
    tb, tc = pair["ttft_s_b"].to_numpy(), pair["ttft_s_c"].to_numpy()
    ttft = bootstrap_ratio(tc, tb, paired=True, **kw)
    out: dict[str, Any] = {"best": best}
    for name, (r, lo, hi) in (("throughput", thr), ("ttft_p50", ttft)):
        out |= {f"{who}_{name}_vs_best_ratio": r, f"{who}_{name}_vs_best_lo": lo,
                f"{who}_{name}_vs_best_hi": hi}  # fmt: skip
    return out


def _quantile(q: float) -> Callable[..., np.ndarray]:
    def stat(x: np.ndarray, axis: int = 0) -> np.ndarray:
        return np.quantile(x, q, axis=axis)

    return stat


def crossover(points: pd.DataFrame, metric: str, x: str) -> dict[str, float | None]:
    """Crossover of one candidate's ``metric`` (see the module docstring).

    ``points``: one candidate's study rows with ``x`` and ``<metric>_ratio`` / ``_lo`` /
    ``_hi`` columns; a point qualifies when its interval gets the verdict ``faster``
    (:func:`radixbench.reports.verdicts.verdict`, the rule of every verdict: above ``1 +
    MIN_EFFECT``; a study has no A/A replica). Returns ``{"x_first": smallest qualifying x
    or None, "x_interp": the log-linear crossing or None (also None when ``x_first`` is the
    smallest point: the crossing then lies below the range studied), "x_max": largest x
    studied}``; rows with a NaN x are ignored.
    """
    df = points.dropna(subset=[x]).sort_values(x)
    if df.empty:
        return {"x_first": None, "x_interp": None, "x_max": None}
    cols = (x, f"{metric}_ratio", f"{metric}_lo", f"{metric}_hi")
    xs, r, lo, hi = (df[c].to_numpy(np.float64) for c in cols)
    above = np.array([verdict(a, b) == "faster" for a, b in zip(lo, hi, strict=True)], bool)
    line = verdict_bars()[1]
    out: dict[str, float | None] = {"x_first": None, "x_interp": None, "x_max": float(xs[-1])}
    if not above[-1]:
        return out
    # the first point of the run of qualifying points that reaches the largest point
    i = int(np.flatnonzero(~above)[-1]) + 1 if (~above).any() else 0
    out["x_first"] = float(xs[i])
    if i == 0:  # already above the line at the smallest point: the crossing lies below it
        return out
    out["x_interp"] = float(xs[i])
    if r[i - 1] < line < r[i] and xs[i - 1] > 0:
        f = (line - r[i - 1]) / (r[i] - r[i - 1])
        out["x_interp"] = float(np.exp(np.log(xs[i - 1]) + f * np.log(xs[i] / xs[i - 1])))
    return out
