"""Where the serving engine stands: radixbench's algorithms against a reference implementation.

A run with a reference (``[variants] reference``, ``--reference``: by default the cache sglang
0.5.23 serves with, ``UnifiedRadixCache`` on its Rust tree core) answers "what does SGLang pay
today, and what would each algorithm save": for every evictor of radixbench's cache (at the
baseline matcher and flatten) the ratio of the reference's ``evict`` median to the evictor's,
and likewise every matcher on ``match_prefix`` (at the baseline evictor), each with its
bootstrap interval, the reference's own p50 and the condition its calls saw (evictable leaves,
matched tokens). These pairs differ on more than one axis (implementation and algorithm), so
they are not verdicts of one change; they are rows of their own (``axis`` ``reference``) and
lines of the answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from radixbench.reports.axes import REPLICA, VariantSet
from radixbench.reports.bootstrap import bootstrap_ratio, ratio_columns
from radixbench.reports.diagnostics import axis_checks
from radixbench.reports.verdicts import call_blocks, common_call_sites, verdict

__all__ = ["reference_lines", "reference_rows"]

#: op compared -> (the radixbench axis it varies, the condition's column and its unit)
_OPS = {"evict": ("evictor", "evictable_leaves"), "match_prefix": ("matcher", "result")}


def _aa(noise: pd.DataFrame | None, metric: str) -> tuple[float, float, float]:
    """The A/A control's ``(ci_low, ci_high, ratio)`` of ``metric`` in the verdict table
    ``noise`` (NaN without it)."""
    if noise is None or noise.empty or "axis" not in noise:
        return math.nan, math.nan, math.nan
    row = noise[(noise["axis"] == REPLICA) & (noise["metric"] == metric)]
    if row.empty:
        return math.nan, math.nan, math.nan
    r = row.iloc[0]
    return float(r["ci_low"]), float(r["ci_high"]), float(r["ratio"])


def reference_rows(
    ops: pd.DataFrame,
    variants: VariantSet,
    baseline: Mapping[str, str],
    reference: str,
    *,
    noise: pd.DataFrame | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (op, radixbench variant) against the reference variant (implementation
    label ``reference``): ``candidate`` the radixbench variant, ``baseline`` the reference's,
    medians (ns), ``ratio`` = reference / candidate with its interval (> 1: the algorithm is
    faster than the reference), ``condition`` (the reference's calls' median evictable leaves
    or matched tokens), ``verdict`` by the verdicts' one rule with the A/A control of the
    verdict table ``noise`` (:func:`~radixbench.reports.verdicts.verdict`). An op whose axis
    was not exercised by the same rule the headline uses
    (:func:`~radixbench.reports.diagnostics.axis_checks`: trivial inputs, or none) reads
    ``not compared`` with the reason in ``note``. Empty when the reference or the op did not
    run. Mutates nothing."""
    refs = [n for n in variants.names if variants.value(n, "impl") == reference
            and variants.value(n, "replica") is None]  # fmt: skip
    if not refs:
        return pd.DataFrame()
    ref = refs[0]
    checks = axis_checks(ops, [axis for axis, _ in _OPS.values()])
    rows = []
    for op, (axis, cond_col) in _OPS.items():
        sel = ops[ops["op"] == op]
        mine = sel[sel["variant"] == ref]
        if mine.empty:
            continue
        check = checks[axis]
        aa = _aa(noise, f"{op} ns")
        other = "matcher" if axis == "evictor" else "evictor"
        for name in variants.names:
            if variants.value(name, axis) is None or variants.value(name, "replica") is not None:
                continue
            if variants.value(name, other) != baseline.get(other):
                continue
            if variants.value(name, "flatten") != variants.value(ref, "flatten"):
                continue
            both = common_call_sites(sel[sel["variant"].isin([ref, name])])  # like for like
            at_ref, at_name = both[both["variant"] == ref], both[both["variant"] == name]
            b = at_ref["ns"].to_numpy(np.float64)
            c = at_name["ns"].to_numpy(np.float64)
            if not b.size or not c.size:
                continue
            blocks = call_blocks(at_ref, at_name)  # by simulated time, as the verdicts
            ratio, lo, hi = bootstrap_ratio(b, c, n_resamples=n_resamples, seed=seed, blocks=blocks)
            rows.append(
                {
                    "axis": "reference",
                    "metric": f"{op} ns",
                    "candidate": name,
                    "baseline": ref,
                    "algorithm": variants.value(name, axis),
                    **ratio_columns(b, c, ratio, lo, hi, blocked=blocks is not None),
                    "verdict": verdict(lo, hi, *aa) if check.ok else "not compared",
                    "n_baseline": int(b.size),
                    "n_candidate": int(c.size),
                    "condition": float(at_ref[cond_col].median()),
                    "note": "" if check.ok else check.reason,
                }
            )
    return pd.DataFrame(rows)


def _x(v: float) -> str:
    return f"{v:.3g}"


def reference_lines(rows: pd.DataFrame, label: str, caveat: str = "") -> list[str]:
    """The answer's lines: per op, the reference's p50 at its condition, then each algorithm's
    ratio against it with the interval and the verdict rows carry; an op not compared (rows
    of verdict ``not compared``) gets ``NOT COMPARED`` and the reason instead (``label``: how
    to name the reference, e.g. ``sglang 0.5.23 as served (rust tree core)``; ``caveat``:
    appended to every line, e.g. after a divergence)."""
    out: list[str] = []
    if rows.empty:
        return out
    for metric, g in rows.groupby("metric", sort=False):
        op = str(metric).removesuffix(" ns")
        first = g.iloc[0]
        if first["verdict"] == "not compared":  # the headline's own triviality rule
            out.append(f"{op} — {label}: NOT COMPARED — {first['note']}{caveat}.")
            continue
        cond = (
            f"{first['condition']:,.0f} evictable leaves"
            if op == "evict"
            else f"{first['condition']:,.0f} matched tokens"
        )
        parts = []
        for _, r in g.iterrows():
            ratio, lo, hi = float(r["ratio"]), float(r["ci_low"]), float(r["ci_high"])
            if r["verdict"] == "faster":
                parts.append(f"{r['algorithm']} {_x(ratio)}× faster [{_x(lo)}–{_x(hi)}]")
            elif r["verdict"] == "slower":  # the inverse ratio and its interval
                parts.append(
                    f"{r['algorithm']} {_x(1 / ratio)}× slower [{_x(1 / hi)}–{_x(1 / lo)}]"
                )
            else:
                parts.append(f"{r['algorithm']} no significant difference ({_x(ratio)} "
                             f"[{_x(lo)}–{_x(hi)}])")  # fmt: skip
        out.append(
            f"{op} — {label}: p50 {first['baseline_median'] / 1e3:,.1f} µs at a median {cond}; "
            + "; ".join(parts)
            + caveat
            + "."
        )
    return out
