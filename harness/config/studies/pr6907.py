"""The check of SGLang PR #6907's own claim against an eviction study's measurements: the
``pr6907`` section of ``study.md`` that the eviction study names (``sections = ["pr6907"]``,
:data:`radixbench.harness.config.study.SECTIONS`).

PR #6907 ("Minor Optimizations in Radix Cache and Schedule Batch", closed unmerged) claims,
for its persistent eviction heap: "Average latency over 12 requests: 0.577s -> 0.495s" and
"Evict ... from 31ms -> 12ms"; it gives no model, hardware, workload or tree size, and the
maintainers found no difference on their benchmark. A per-request mean latency saving ``S``
from a per-call saving ``d(L)`` (``L`` evictable leaves) needs ``n = S / d(L)`` evict calls on
each request's critical path (one request at a time; with concurrent requests every request
in flight waits for each call, which the study's measured E2E saving includes).
:func:`pr6907_section` interpolates the study's per-call medians (heapify, and heapify minus
persistent-heap) against evictable leaves, log-log between points (the end segments' slopes
beyond them; the cost per leaf grows with the tree, so a straight line through the origin
would not do), and gives the ``L`` that ``S = 82 ms`` needs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from radixbench.reports.markdown import markdown_table

__all__ = ["CLAIM", "fit_per_leaf_ns", "leaves_for_cost", "pr6907_section"]

#: PR #6907's figures (s): mean latency before / after over 12 requests; evict before / after.
CLAIM = {"latency_before_s": 0.577, "latency_after_s": 0.495, "requests": 12,
         "evict_before_s": 0.031, "evict_after_s": 0.012}  # fmt: skip


def fit_per_leaf_ns(leaves: np.ndarray, ns: np.ndarray) -> float:
    """Slope ``a`` (ns per leaf) of ``ns = a * leaves`` by least squares through the origin
    over the finite, positive-leaf pairs; NaN when there is none."""
    x, y = np.asarray(leaves, dtype=np.float64), np.asarray(ns, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0)
    if not keep.any():
        return float("nan")
    x, y = x[keep], y[keep]
    return float((x * y).sum() / (x * x).sum())


def leaves_for_cost(leaves: np.ndarray, ns: np.ndarray, target_ns: float) -> tuple[float, bool]:
    """Evictable leaves at which the per-call cost ``ns`` (measured at ``leaves``) reaches
    ``target_ns``: log-log interpolation over the points sorted by leaves (costs made
    non-decreasing), the end segment's slope beyond them. Returns ``(leaves, extrapolated)``;
    ``(nan, False)`` with fewer than two usable points (positive leaves and cost)."""
    x, y = np.asarray(leaves, dtype=np.float64), np.asarray(ns, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    order = np.argsort(x[keep])
    lx, ly = np.log(x[keep][order]), np.log(np.maximum.accumulate(y[keep][order]))
    if lx.size < 2 or lx[-1] == lx[0]:
        return float("nan"), False
    t = np.log(target_ns)
    if ly[0] <= t <= ly[-1]:
        i = max(1, int(np.searchsorted(ly, t)))
        j = i - 1
    else:
        j, i = (0, 1) if t < ly[0] else (lx.size - 2, lx.size - 1)
    if ly[i] == ly[j]:
        return float("nan"), False
    out = lx[j] + (t - ly[j]) * (lx[i] - lx[j]) / (ly[i] - ly[j])
    return float(np.exp(out)), not ly[0] <= t <= ly[-1]


def pr6907_section(points: pd.DataFrame, candidate: str = "persistent-heap") -> list[str]:
    """Markdown lines of the PR #6907 check from an eviction study's rows (one per point and
    candidate; the rows of the candidate whose name starts with ``candidate`` are used)."""
    saving_s = CLAIM["latency_before_s"] - CLAIM["latency_after_s"]
    d_claim_s = CLAIM["evict_before_s"] - CLAIM["evict_after_s"]
    rows = points[points["candidate"].str.startswith(candidate)]
    lines = [
        "## Check of SGLang PR #6907's claim",
        "",
        f"The PR claims mean latency over {CLAIM['requests']} requests "
        f"{CLAIM['latency_before_s']:.3f} s → {CLAIM['latency_after_s']:.3f} s "
        f"(−{1e3 * saving_s:.0f} ms per request) and evict {1e3 * CLAIM['evict_before_s']:.0f} "
        f"→ {1e3 * CLAIM['evict_after_s']:.0f} ms per call (−{1e3 * d_claim_s:.0f} ms). With the "
        f"PR's own per-call saving, −{1e3 * saving_s:.0f} ms per request needs "
        f"{saving_s / d_claim_s:.1f} evict calls on each request's path.",
        "",
    ]
    if rows.empty or rows["evictable_leaves"].isna().all():
        return [*lines, f"(no `{candidate}` rows with evict calls in this study)"]
    leaves = rows["evictable_leaves"].to_numpy(np.float64)
    base_ns = rows["op_base_ns"].to_numpy(np.float64)
    diff_ns = base_ns - rows["op_cand_ns"].to_numpy(np.float64)
    per_leaf = ", ".join(
        f"{b / x:,.0f} ns/leaf at {x:,.0f}" for x, b in sorted(zip(leaves, base_ns, strict=True))
    )
    l31, ex31 = leaves_for_cost(leaves, base_ns, CLAIM["evict_before_s"] * 1e9)
    mark = " (extrapolated)"
    lines += [
        f"Measured here (median evict call vs median evictable leaves): heapify costs {per_leaf}"
        f". Interpolated log-log, heapify costs the PR's {1e3 * CLAIM['evict_before_s']:.0f} ms "
        f"per call at ≈ {l31:,.0f} evictable leaves{mark if ex31 else ''} on this CPU.",
        "",
    ]
    head = ["evict calls per request", "saving per call needed",
            f"evictable leaves needed ({candidate} vs heapify)"]  # fmt: skip
    table = []
    for n in (1, saving_s / d_claim_s, 10, 100):
        need, ex = leaves_for_cost(leaves, diff_ns, saving_s * 1e9 / n)
        table.append(
            [f"{n:.1f}", f"{1e3 * saving_s / n:.1f} ms", f"{need:,.0f}{mark if ex else ''}"]
        )
    lines += markdown_table(head, table).split("\n")
    got = rows.assign(saving_ms=1e3 * (rows["e2e_mean_base_s"] - rows["e2e_mean_cand_s"]))
    got = got.dropna(subset=["evictable_leaves"]).sort_values("evictable_leaves")
    reach = got[got["saving_ms"] >= 1e3 * saving_s]
    last = got.iloc[-1]
    lines += [
        "",
        f"Measured in this study's concurrent server (every request in flight waits for each "
        f"call): the largest tree had {last['evictable_leaves']:,.0f} evictable leaves "
        f"({last['tree_nodes']:,.0f} nodes) at {last['evicts_per_request']:.2f} evict calls per "
        "request. ",
    ]
    if reach.empty:
        lines[-1] += (
            f"No point reached a mean-E2E saving of {1e3 * saving_s:.0f} ms (largest: "
            f"{got['saving_ms'].max():,.1f} ms)."
        )
    else:
        r = reach.iloc[0]
        below = got[got["evictable_leaves"] < r["evictable_leaves"]]
        lines[-1] += (
            f"The mean-E2E saving first reaches {1e3 * saving_s:.0f} ms at "
            f"{r['evictable_leaves']:,.0f} leaves and {r['evicts_per_request']:.2f} evict calls "
            f"per request: {r['saving_ms']:,.1f} ms (mean E2E ratio {r['e2e_mean_ratio']:.3f} "
            f"[{r['e2e_mean_lo']:.3f}, {r['e2e_mean_hi']:.3f}])"
            + (
                f"; at {below.iloc[-1]['evictable_leaves']:,.0f} leaves it was "
                f"{below.iloc[-1]['saving_ms']:,.1f} ms."
                if len(below)
                else "."
            )
        )
    lines += [
        "",
        "A request adds at most one or two evictable leaves, so a 12-request benchmark cannot "
        "build such a tree itself: the claim needs a server already holding thousands of "
        "cached requests with a full KV pool. The bundled scenarios' figures are in "
        "docs/PR6907-CHECK.md.",
    ]
    return lines
