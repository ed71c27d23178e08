"""Summary statistics over the per-op and per-request tables.

* :func:`op_summary` - latency distribution (ns) per (op, variant);
* :func:`variant_summary` - request outcomes, prefix-hit rate and TTFT/E2E (s) per variant;
* :func:`axis_speedup` / :func:`speedups` - how much faster one value of a variant axis
  (evictor, matcher, flatten, impl) is than a baseline value, holding the other axes equal
  (the pairing of :meth:`radixbench.reports.axes.VariantSet.partner`).

Percentiles use NumPy's default (``method="linear"``) definition, so they are exactly what
``numpy.percentile`` returns for the same samples.

Variants are identified by their axis columns (:mod:`radixbench.reports.axes`), never by
splitting their display names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from radixbench.reports.axes import VariantSet
from radixbench.reports.parted import TableParts
from radixbench.reports.tables import OP_COLUMNS, REQUEST_COLUMNS, REQUEST_STATUSES, validate_frame

__all__ = [
    "OP_SUMMARY_COLUMNS",
    "SPEEDUP_COLUMNS",
    "VARIANT_SUMMARY_COLUMNS",
    "axis_speedup",
    "op_summary",
    "speedups",
    "variant_summary",
]

#: Ops of the cache an implementation comparison (:func:`impl_speedup`) covers.
IMPL_OPS = ("match_prefix", "insert", "evict")

#: Columns of :func:`op_summary`: latencies in ns, ``total_ms`` the summed time in ms.
OP_SUMMARY_COLUMNS = [
    "op", "variant", "count", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns", "total_ms",
]  # fmt: skip

#: Columns of :func:`variant_summary`: token counts in tokens, times in seconds.
VARIANT_SUMMARY_COLUMNS = [
    "variant", "requests", "finished", "rejected", "input_tokens", "prefix_hit_tokens",
    "prefix_hit_rate", "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "e2e_mean_s", "e2e_p50_s",
    "e2e_p99_s",
]  # fmt: skip

#: Columns of :func:`axis_speedup` / :func:`speedups` (ratios are dimensionless; ``total_ratio``:
#: the baseline's total time over the candidate's for the same number of calls, i.e. the ratio of
#: mean ns per call, at the call sites both make when the per-op table is given).
SPEEDUP_COLUMNS = ["op", "variant", "baseline_variant", "p50_ratio", "p99_ratio", "total_ratio"]


def _pct(values: np.ndarray, q: float) -> float:
    """``numpy.percentile(values, q)`` as a float, NaN for an empty sample."""
    return float(np.percentile(values, q)) if values.size else float("nan")


def _mean(values: np.ndarray) -> float:
    """Arithmetic mean as a float, NaN for an empty sample (no RuntimeWarning)."""
    return float(values.mean()) if values.size else float("nan")


def op_summary(ops: pd.DataFrame | TableParts) -> pd.DataFrame:
    """Summarize per-op latencies: one row per (op, variant), sorted by op then variant.

    Columns (:data:`OP_SUMMARY_COLUMNS`): ``count`` calls; ``mean_ns``, ``p50_ns``, ``p90_ns``,
    ``p99_ns`` (float, ns); ``max_ns`` (int64, ns); ``total_ms`` = sum of ``ns`` / 1e6 (ms).
    Needs the ``variant``, ``op`` and ``ns`` columns of the per-op table (a frame, or a table
    in parts: ``reports.parted.TableParts``, read group by group).
    """
    need = {k: OP_COLUMNS[k] for k in ("variant", "op", "ns")}
    groups: Iterable[tuple[Any, np.ndarray]]
    if isinstance(ops, pd.DataFrame):
        validate_frame(ops, need, "ops")
        groups = (
            (key, g["ns"].to_numpy(dtype=np.int64))
            for key, g in ops.groupby(["op", "variant"], sort=True)
        )
    else:  # a table in parts (reports.parted): the same groups, one at a time
        validate_frame(ops.empty(), need, "ops")
        groups = ops.groups("op", "ns")
    rows = []
    for (op, variant), ns in groups:
        rows.append(
            {
                "op": str(op),
                "variant": str(variant),
                "count": int(ns.size),
                "mean_ns": _mean(ns),
                "p50_ns": _pct(ns, 50),
                "p90_ns": _pct(ns, 90),
                "p99_ns": _pct(ns, 99),
                "max_ns": int(ns.max()),
                "total_ms": float(ns.sum()) / 1e6,
            }
        )
    out = pd.DataFrame(rows, columns=OP_SUMMARY_COLUMNS)
    return out.astype({"count": "int64", "max_ns": "int64"})


def variant_summary(requests: pd.DataFrame) -> pd.DataFrame:
    """Summarize request outcomes: one row per variant, sorted by variant.

    Columns (:data:`VARIANT_SUMMARY_COLUMNS`): ``requests`` rows, ``finished``/``rejected``
    counts; ``input_tokens`` and ``prefix_hit_tokens`` summed over *finished* requests (tokens);
    ``prefix_hit_rate`` = prefix_hit_tokens / input_tokens (NaN if no input tokens);
    ``ttft_*_s`` and ``e2e_*_s`` mean/p50/p99 over finished requests (s; NaN if none finished).

    Raises :class:`ValueError` on a ``status`` outside :data:`REQUEST_STATUSES`.
    """
    validate_frame(requests, REQUEST_COLUMNS, "requests")
    bad = ~requests["status"].isin(REQUEST_STATUSES)
    if bad.any():
        raise ValueError(
            f"requests table: unknown status {requests.loc[bad, 'status'].iloc[0]!r} "
            f"(expected one of {', '.join(REQUEST_STATUSES)})"
        )
    rows = []
    for variant, group in requests.groupby("variant", sort=True):
        done = group[group["status"] == "finished"]
        input_tokens = int(done["input_len"].sum())
        hit_tokens = int(done["prefix_hit_tokens"].sum())
        ttft = done["ttft_s"].to_numpy(dtype=np.float64)
        e2e = done["e2e_s"].to_numpy(dtype=np.float64)
        rows.append(
            {
                "variant": str(variant),
                "requests": len(group),
                "finished": len(done),
                "rejected": int((group["status"] == "rejected").sum()),
                "input_tokens": input_tokens,
                "prefix_hit_tokens": hit_tokens,
                "prefix_hit_rate": hit_tokens / input_tokens if input_tokens else float("nan"),
                "ttft_mean_s": _mean(ttft),
                "ttft_p50_s": _pct(ttft, 50),
                "ttft_p99_s": _pct(ttft, 99),
                "e2e_mean_s": _mean(e2e),
                "e2e_p50_s": _pct(e2e, 50),
                "e2e_p99_s": _pct(e2e, 99),
            }
        )
    out = pd.DataFrame(rows, columns=VARIANT_SUMMARY_COLUMNS)
    ints = ["requests", "finished", "rejected", "input_tokens", "prefix_hit_tokens"]
    return out.astype(dict.fromkeys(ints, "int64"))


def _ratio(baseline: float, value: float) -> float:
    """baseline / value; inf when only the variant is 0 ns, NaN when both are (no warning)."""
    if value == 0:
        return float("nan") if baseline == 0 else float("inf")
    return baseline / value


def _pair_stats(
    ops: pd.DataFrame | None, op: str, pair: tuple[str, str], summary: Mapping[str, pd.Series]
) -> list[tuple[float, float, float]]:
    """``(p50, p99, mean)`` ns of ``op`` for the two variants of ``pair``: from ``ops`` at the
    call sites both make (``verdicts.common_call_sites``), else from the summary rows."""
    if ops is None:
        return [  # a summary without mean_ns (hand-made): totals of equal counts
            (float(r["p50_ns"]), float(r["p99_ns"]), float(r.get("mean_ns", r["total_ms"])))
            for r in (summary[v] for v in pair)
        ]
    from radixbench.reports.verdicts import common_call_sites

    rows = common_call_sites(ops[(ops["op"] == op) & ops["variant"].isin(pair)])
    out = []
    for v in pair:
        ns = rows.loc[rows["variant"] == v, "ns"].to_numpy(np.float64)
        out.append((_pct(ns, 50), _pct(ns, 99), _mean(ns)))
    return out


def axis_speedup(
    op_summary: pd.DataFrame,
    op: str,
    axis: str,
    baseline: Mapping[str, str],
    variants: VariantSet,
    ops: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Speed-up of each value of variant axis ``axis`` over ``baseline[axis]`` for ``op``.

    For every variant of ``op_summary`` (rows with ``op == op``) the baseline row is its
    partner on ``axis`` (:meth:`VariantSet.partner`: the variant differing on that axis only,
    like for like on ``impl``); variants without one are skipped. Ratios are baseline /
    variant of the p50, the p99 and the total time over the same number of calls (mean ns per
    call: implementations make an op at different call sites and counts, e.g. 9,000 vs 3,000
    inserts), so a ratio > 1 means the variant is faster; with the per-op table ``ops``, at the
    call sites both variants make (``verdicts.common_call_sites``). Returns a frame with
    :data:`SPEEDUP_COLUMNS`, sorted by variant.
    """
    rows_for_op = op_summary[op_summary["op"] == op]
    by_variant = {str(r["variant"]): r for _, r in rows_for_op.iterrows()}
    rows = []
    for variant in sorted(by_variant):
        pair = variants.partner(variant, axis, baseline)
        if pair is None or pair.baseline not in by_variant:
            continue
        base, row = _pair_stats(ops, op, (pair.baseline, variant), by_variant)
        rows.append(
            {
                "op": op,
                "variant": variant,
                "baseline_variant": pair.baseline,
                "p50_ratio": _ratio(base[0], row[0]),
                "p99_ratio": _ratio(base[1], row[1]),
                "total_ratio": _ratio(base[2], row[2]),
            }
        )
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS).astype(
        {"p50_ratio": "float64", "p99_ratio": "float64", "total_ratio": "float64"}
    )


def speedups(
    op_summary: pd.DataFrame,
    baseline: Mapping[str, str],
    variants: VariantSet,
    ops: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Evictor speed-ups on ``evict``, matcher speed-ups on ``match_prefix``, then each other
    implementation against its like-for-like partner on ``match_prefix``, ``insert`` and
    ``evict`` (rows only where the run has such pairs). ``baseline``: axis -> baseline value
    (``VariantSet.resolve_baseline``); ``ops``: the per-op table (ratios at the call sites both
    variants make, :func:`axis_speedup`)."""
    parts = [
        axis_speedup(op_summary, "evict", "evictor", baseline, variants, ops),
        axis_speedup(op_summary, "match_prefix", "matcher", baseline, variants, ops),
        *(axis_speedup(op_summary, op, "impl", baseline, variants, ops) for op in IMPL_OPS),
    ]
    non_empty = [p for p in parts if not p.empty]
    if not non_empty:
        return parts[0]
    return pd.concat(non_empty, ignore_index=True)
