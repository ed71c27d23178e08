"""Two saved runs side by side (``radixbench diff RUN_A RUN_B``): before/after a patch, two
machines, two settings.

Variants are matched across the runs by name (a run's A/A replica with its own). For every
variant both runs have: per op, the median wall time in A over the one in B with a bootstrap
interval (calls resampled independently; ``ratio > 1``: B is faster) and a verdict against 1
and the wider of the two runs' A/A noise floors; the prefix hit rate of each; and, when both
runs served the same requests, TTFT and E2E median ratios paired by ``rid``. Then the run
settings that differ (the records' fields, environment apart), the environment that differs,
and each run's equivalence status. :func:`diff_runs` computes it, :func:`diff_markdown` /
:func:`diff_html` render it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from radixbench.reports.bootstrap import bootstrap_ratio, ci_method
from radixbench.reports.markdown import pipe_table
from radixbench.reports.record import RunMeta
from radixbench.reports.verdicts import verdict

__all__ = ["DIFF_OPS", "RunDiff", "diff_html", "diff_markdown", "diff_runs"]

#: Ops compared across the runs.
DIFF_OPS = ("match_prefix", "insert", "evict", "checkpoint", "release", "build_extend",
            "build_decode")  # fmt: skip
#: Record fields never listed as setting differences (they always differ, or are shown apart).
_NOT_SETTINGS = {"wall_s", "environment", "events", "sim_end_s", "spec", "extra", "schema"}


@dataclass(frozen=True)
class RunDiff:
    """``ops``: one row per (variant, op) both runs timed; ``requests``: one row per (variant,
    metric) of hit rates and paired latency ratios; ``settings`` / ``environment``: ``(key, A,
    B)`` for what differs; ``equivalence``: ``(A ok, B ok)``; ``labels``: the two run folders'
    names."""

    ops: pd.DataFrame
    requests: pd.DataFrame
    settings: list[tuple[str, str, str]]
    environment: list[tuple[str, str, str]]
    equivalence: tuple[bool, bool]
    labels: tuple[str, str]


def _aa(verdicts: pd.DataFrame | None, metric: str) -> tuple[float, float]:
    if verdicts is None or "axis" not in verdicts:
        return math.nan, math.nan
    row = verdicts[(verdicts["axis"] == "replica") & (verdicts["metric"] == metric)]
    if row.empty:
        return math.nan, math.nan
    return float(row["ci_low"].iloc[0]), float(row["ci_high"].iloc[0])


def _floor(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    lows = [x for x in (a[0], b[0]) if not math.isnan(x)]
    highs = [x for x in (a[1], b[1]) if not math.isnan(x)]
    return (min(lows) if lows else math.nan, max(highs) if highs else math.nan)


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    keys = sorted(set(a) | set(b))
    return [(k, str(a.get(k)), str(b.get(k))) for k in keys if a.get(k) != b.get(k)]


def diff_runs(
    a: tuple[Mapping[str, pd.DataFrame | None], RunMeta],
    b: tuple[Mapping[str, pd.DataFrame | None], RunMeta],
    *,
    verdicts: tuple[pd.DataFrame | None, pd.DataFrame | None] = (None, None),
    equivalence: tuple[bool, bool] = (True, True),
    labels: tuple[str, str] = ("A", "B"),
    n_resamples: int = 1000,
    seed: int = 0,
) -> RunDiff:
    """The :class:`RunDiff` of runs ``a`` and ``b`` (each ``(tables, record)`` as
    ``record.read_run`` returns them); ``verdicts``: each run's verdict table (their A/A rows
    are the noise floor). Raises ``ValueError`` when the runs share no variant name."""
    (ta, ma), (tb, mb) = a, b
    ops_a, ops_b = ta["ops"], tb["ops"]
    req_a, req_b = ta["requests"], tb["requests"]
    assert ops_a is not None and ops_b is not None and req_a is not None and req_b is not None
    names_a = list(dict.fromkeys(map(str, req_a["variant"])))
    common = [n for n in names_a if n in set(map(str, req_b["variant"]))]
    if not common:
        raise ValueError(
            f"{labels[0]} and {labels[1]} share no variant name (A: {', '.join(names_a)})"
        )
    op_rows = []
    for name in common:
        for op in DIFF_OPS:
            xa = ops_a.loc[(ops_a["variant"] == name) & (ops_a["op"] == op), "ns"]
            xb = ops_b.loc[(ops_b["variant"] == name) & (ops_b["op"] == op), "ns"]
            if xa.empty or xb.empty:
                continue
            va, vb = xa.to_numpy(np.float64), xb.to_numpy(np.float64)
            ratio, lo, hi = bootstrap_ratio(va, vb, n_resamples=n_resamples, seed=seed)
            aa_lo, aa_hi = _floor(_aa(verdicts[0], f"{op} ns"), _aa(verdicts[1], f"{op} ns"))
            op_rows.append(
                {
                    "variant": name,
                    "op": op,
                    "n_a": va.size,
                    "n_b": vb.size,
                    "p50_us_a": float(np.median(va)) / 1e3,
                    "p50_us_b": float(np.median(vb)) / 1e3,
                    "ratio": ratio,
                    "ci_low": lo,
                    "ci_high": hi,
                    "ci_method": ci_method(va.size, vb.size),
                    "aa_low": aa_lo,
                    "aa_high": aa_hi,
                    "verdict": verdict(lo, hi, aa_lo, aa_hi, words=("B faster", "B slower")),
                }
            )
    req_rows = []
    for name in common:
        fa = req_a[(req_a["variant"] == name) & (req_a["status"] == "finished")]
        fb = req_b[(req_b["variant"] == name) & (req_b["status"] == "finished")]
        hr = [
            float(f["prefix_hit_tokens"].sum() / f["input_len"].sum()) if len(f) else math.nan
            for f in (fa, fb)
        ]
        req_rows.append({"variant": name, "metric": "prefix hit rate", "a": hr[0], "b": hr[1],
                         "ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                         "requests": min(len(fa), len(fb))})  # fmt: skip
        both = fa.merge(fb, on="rid", suffixes=("_a", "_b"))
        for col, label in (("ttft_s", "TTFT"), ("e2e_s", "E2E latency")):
            if not len(both):
                continue
            x, y = both[f"{col}_a"].to_numpy(np.float64), both[f"{col}_b"].to_numpy(np.float64)
            ratio, lo, hi = bootstrap_ratio(x, y, n_resamples=n_resamples, seed=seed, paired=True)
            req_rows.append({"variant": name, "metric": f"{label} median (s)",
                             "a": float(np.nanmedian(x)), "b": float(np.nanmedian(y)),
                             "ratio": ratio, "ci_low": lo, "ci_high": hi,
                             "requests": len(both)})  # fmt: skip
    ja, jb = ma.to_json(), mb.to_json()
    settings = _differences(
        {k: v for k, v in ja.items() if k not in _NOT_SETTINGS},
        {k: v for k, v in jb.items() if k not in _NOT_SETTINGS},
    )
    return RunDiff(
        pd.DataFrame(op_rows),
        pd.DataFrame(req_rows),
        settings,
        _differences(ma.environment, mb.environment),
        equivalence,
        labels,
    )


def _summary(d: RunDiff) -> list[str]:
    la, lb = d.labels
    eq = {True: "PASS", False: "DIVERGED"}
    out = [f"Equivalence: {la} {eq[d.equivalence[0]]}, {lb} {eq[d.equivalence[1]]}."]
    for _, r in d.ops.iterrows():
        if r["verdict"] != "no significant difference":
            out.append(
                f"{r['op']} ({r['variant']}): p50 {r['p50_us_a']:.2f} µs in {la}, "
                f"{r['p50_us_b']:.2f} µs in {lb}: {r['verdict']}, ratio {r['ratio']:.3g} "
                f"[{r['ci_low']:.3g}–{r['ci_high']:.3g}]."
            )
    if len(out) == 1:
        out.append("No op differs beyond 1 and the runs' A/A noise floors.")
    return out


def diff_markdown(d: RunDiff) -> str:
    """The diff as Markdown: summary lines, the op table, the request table, settings and
    environment that differ."""
    la, lb = d.labels
    lines = [f"# radixbench diff: {la} vs {lb}", "", *(f"- {t}" for t in _summary(d)), ""]
    lines += ["## Ops (ratio = A / B of the median; > 1: B is faster)", "", pipe_table(d.ops), ""]
    lines += ["## Requests (ratio = A / B, paired by rid)", "", pipe_table(d.requests), ""]
    for title, rows in (("Settings that differ", d.settings), ("Environment", d.environment)):
        frame = pd.DataFrame(rows, columns=["key", la, lb])
        lines += [f"## {title}", "", pipe_table(frame) if rows else "_none_", ""]
    return "\n".join(lines)


def diff_html(d: RunDiff) -> str:
    """The diff as a self-contained HTML page (the same sections as :func:`diff_markdown`)."""
    from radixbench.reports.html import CSS, frame_html

    la, lb = d.labels
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>radixbench diff</title>"
        f"<style>{CSS}</style></head><body><h1>radixbench diff: {html.escape(la)} vs "
        f"{html.escape(lb)}</h1><ul>",
        *(f"<li>{html.escape(t)}</li>" for t in _summary(d)),
        "</ul><h2>Ops (ratio = A / B of the median; &gt; 1: B is faster)</h2>",
        frame_html(d.ops, "ops"),
        "<h2>Requests (ratio = A / B, paired by rid)</h2>",
        frame_html(d.requests, "requests"),
    ]
    for title, rows in (("Settings that differ", d.settings), ("Environment", d.environment)):
        parts += [f"<h2>{title}</h2>", frame_html(pd.DataFrame(rows, columns=["key", la, lb]),
                                                   title.split()[0].lower())]  # fmt: skip
    parts.append("</body></html>")
    return "".join(parts)
