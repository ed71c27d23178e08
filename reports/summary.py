"""Summary statistics over the per-op and per-request tables.

* :func:`op_summary` - latency distribution (ns) per (op, variant);
* :func:`variant_summary` - request outcomes, prefix-hit rate and TTFT/E2E (s) per variant;
* :func:`axis_speedup` / :func:`speedups` - how much faster one value of a variant axis
  (evictor, matcher, flatten) is than a baseline value, holding the other axes equal, and
  (:func:`impl_speedup`) another cache implementation than radixbench's baseline variant.

Percentiles use NumPy's default (``method="linear"``) definition, so they are exactly what
``numpy.percentile`` returns for the same samples.

Variant names are ``"<evictor>/<matcher>/<flatten>"``, or ``"<impl>/<flatten>"`` for another
cache implementation (docs/CONTRACTS.md, :mod:`radixbench.reports.variant_names`); the axis
indices are :data:`EVICTOR_AXIS`, :data:`MATCHER_AXIS`, :data:`FLATTEN_AXIS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from radixbench.reports.tables import OP_COLUMNS, REQUEST_COLUMNS, REQUEST_STATUSES, validate_frame
from radixbench.reports.variant_names import (
    AXIS_NAMES,
    EVICTOR_AXIS,
    FLATTEN_AXIS,
    MATCHER_AXIS,
    partner,
)

__all__ = [
    "EVICTOR_AXIS",
    "FLATTEN_AXIS",
    "MATCHER_AXIS",
    "OP_SUMMARY_COLUMNS",
    "SPEEDUP_COLUMNS",
    "VARIANT_SUMMARY_COLUMNS",
    "axis_speedup",
    "impl_speedup",
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

#: Columns of :func:`axis_speedup` / :func:`speedups` (ratios are dimensionless).
SPEEDUP_COLUMNS = ["op", "variant", "baseline_variant", "p50_ratio", "p99_ratio", "total_ratio"]


def _pct(values: np.ndarray, q: float) -> float:
    """``numpy.percentile(values, q)`` as a float, NaN for an empty sample."""
    return float(np.percentile(values, q)) if values.size else float("nan")


def _mean(values: np.ndarray) -> float:
    """Arithmetic mean as a float, NaN for an empty sample (no RuntimeWarning)."""
    return float(values.mean()) if values.size else float("nan")


def op_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Summarize per-op latencies: one row per (op, variant), sorted by op then variant.

    Columns (:data:`OP_SUMMARY_COLUMNS`): ``count`` calls; ``mean_ns``, ``p50_ns``, ``p90_ns``,
    ``p99_ns`` (float, ns); ``max_ns`` (int64, ns); ``total_ms`` = sum of ``ns`` / 1e6 (ms).
    Needs the ``variant``, ``op`` and ``ns`` columns of the per-op table.
    """
    validate_frame(ops, {k: OP_COLUMNS[k] for k in ("variant", "op", "ns")}, "ops")
    rows = []
    for (op, variant), group in ops.groupby(["op", "variant"], sort=True):
        ns = group["ns"].to_numpy(dtype=np.int64)
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


def axis_speedup(
    op_summary: pd.DataFrame, op: str, axis_index: int, baseline_value: str
) -> pd.DataFrame:
    """Speed-up of each value of one variant axis over ``baseline_value`` for ``op``.

    For every variant of ``op_summary`` (rows with ``op == op``) whose part ``axis_index`` of
    ``"<evictor>/<matcher>/<flatten>"`` differs from ``baseline_value``, the baseline variant
    is the same name with that part replaced by ``baseline_value`` (all other axes held equal;
    an ``"<impl>/<flatten>"`` name has the flatten axis only).
    Variants without such a baseline row are skipped. Ratios are baseline / variant of
    ``p50_ns``, ``p99_ns`` and ``total_ms``, so a ratio > 1 means the variant is faster.

    Returns a frame with :data:`SPEEDUP_COLUMNS`, sorted by variant. Raises
    :class:`ValueError` if ``axis_index`` is not 0, 1 or 2.
    """
    if axis_index not in (EVICTOR_AXIS, MATCHER_AXIS, FLATTEN_AXIS):
        raise ValueError(
            f"a variant name has no axis {axis_index} (expected <evictor>/<matcher>/<flatten>)"
        )
    axis = AXIS_NAMES[axis_index]
    return _speedup_rows(op_summary, op, lambda v: partner(v, axis, {axis: baseline_value}))


def impl_speedup(op_summary: pd.DataFrame, op: str, baseline: Mapping[str, str]) -> pd.DataFrame:
    """Speed-up of each other implementation's variant (``"<impl>/<flatten>"``) for ``op``
    over radixbench's ``"<baseline evictor>/<baseline matcher>/<flatten>"`` (skipped when that
    variant is absent); ratios as in :func:`axis_speedup`."""
    return _speedup_rows(op_summary, op, lambda v: partner(v, "impl", baseline))


def _speedup_rows(
    op_summary: pd.DataFrame, op: str, partner_of: Callable[[str], str | None]
) -> pd.DataFrame:
    rows_for_op = op_summary[op_summary["op"] == op]
    by_variant = {str(r["variant"]): r for _, r in rows_for_op.iterrows()}
    rows = []
    for variant in sorted(by_variant):
        base_name = partner_of(variant)
        base = None if base_name is None else by_variant.get(base_name)
        if base is None:
            continue
        row = by_variant[variant]
        rows.append(
            {
                "op": op,
                "variant": variant,
                "baseline_variant": base_name,
                "p50_ratio": _ratio(float(base["p50_ns"]), float(row["p50_ns"])),
                "p99_ratio": _ratio(float(base["p99_ns"]), float(row["p99_ns"])),
                "total_ratio": _ratio(float(base["total_ms"]), float(row["total_ms"])),
            }
        )
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS).astype(
        {"p50_ratio": "float64", "p99_ratio": "float64", "total_ratio": "float64"}
    )


def speedups(op_summary: pd.DataFrame, baseline: Mapping[str, str]) -> pd.DataFrame:
    """Evictor speed-ups on ``evict``, matcher speed-ups on ``match_prefix``, then each other
    implementation against radixbench's baseline variant on ``match_prefix``, ``insert`` and
    ``evict`` (:func:`impl_speedup`; rows only when the run has such variants).

    ``baseline`` maps ``"evictor"`` and ``"matcher"`` to the baseline axis values, e.g.
    ``{"evictor": "heapify", "matcher": "linear"}``. Returns the rows of
    ``axis_speedup(op_summary, "evict", EVICTOR_AXIS, baseline["evictor"])``, those of
    ``axis_speedup(op_summary, "match_prefix", MATCHER_AXIS, baseline["matcher"])``, then the
    implementation rows.
    """
    missing = [k for k in ("evictor", "matcher") if k not in baseline]
    if missing:
        raise ValueError(f"baseline: missing key {missing[0]!r} (expected evictor and matcher)")
    parts = [
        axis_speedup(op_summary, "evict", EVICTOR_AXIS, baseline["evictor"]),
        axis_speedup(op_summary, "match_prefix", MATCHER_AXIS, baseline["matcher"]),
        *(impl_speedup(op_summary, op, baseline) for op in IMPL_OPS),
    ]
    non_empty = [p for p in parts if not p.empty]
    if not non_empty:
        return parts[0]
    return pd.concat(non_empty, ignore_index=True)
