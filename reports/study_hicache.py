"""Statistics of ``radixbench study hicache``: one row per point and candidate HiCache setting
against the point's baseline (``off``: the device-only cache), and when an L3 hit stops paying.

:func:`hicache_point_rows` reduces one point's tables (the compare of its ``variants.hicache``
values) to rows with, per candidate: the prefix hit rate and its split by tier (device / host /
storage hit tokens over input tokens, for the candidate; the baseline's hit rate beside it),
TTFT p50 / p99 of both (s), the TTFT p50 and p99 ratios baseline / candidate (paired by request)
and the block output-throughput ratio candidate / baseline
(:func:`radixbench.reports.study.block_throughput_ratio`), each with a 95 % percentile-bootstrap
CI (1,000 resamples, seeded) — a ratio > 1 favours HiCache — and the measured L3 read time per
token (s; an ``l3_read``'s submission to its end, queueing included, over its tokens) and
host-to-device load time per token (s).

**Crossover** (:func:`l3_hit_time`, :func:`l3_crossover_gbps`): a prompt of ``N`` tokens found
in storage costs the storage queries and reads (``2 * ceil(pages / 128)`` per-call latencies,
``N * bytes_per_token / B`` at read bandwidth ``B``) and the host-to-device load
(``N * bytes_per_token / host_link``); recomputing it costs the cost model's prefill of ``N``
tokens. The crossover is the bandwidth below which the hit is slower:
``B* = N * bpt / (recompute - latencies - load)`` (None: even infinite bandwidth is slower).
:func:`measured_crossover` finds the same point on the storage sweep's measurements: where
``N`` times the measured per-token read time plus the model's load and latencies crosses the
recompute time, interpolated linearly in log bandwidth.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from radixbench.reports.bootstrap import bootstrap_ratio
from radixbench.reports.study import block_throughput_ratio

__all__ = [
    "STORAGE_BATCH_PAGES",
    "hicache_point_rows",
    "l3_crossover_gbps",
    "l3_hit_time",
    "measured_crossover",
]

#: Pages per storage call (``STORAGE_BATCH_SIZE``; :mod:`radixbench.sim.transfers`).
STORAGE_BATCH_PAGES = 128
_TIERS = ("device", "host", "storage")


def _per_token(transfers: pd.DataFrame, variant: str, kind: str) -> float:
    t = transfers[(transfers["variant"] == variant) & (transfers["kind"] == kind)]
    tokens = float(t["tokens"].sum())
    return float((t["end_s"] - t["submit_s"]).sum() / tokens) if tokens else float("nan")


def hicache_point_rows(
    requests: pd.DataFrame, transfers: pd.DataFrame, policies: Sequence[str], seed: int = 0
) -> list[dict[str, Any]]:
    """One row per candidate policy of a point (module docstring). ``requests`` / ``transfers``:
    the compare's tables, variants told apart by their ``hicache`` column; ``policies``: the
    point's ``variants.hicache`` values, the first the baseline. Ratios: NaN without requests."""
    done = requests[requests["status"] == "finished"]
    by = {p: done[done["hicache"] == p].sort_values("rid") for p in policies}
    base = by[policies[0]]
    rows = []
    for cand in policies[1:]:
        c = by[cand]
        both = np.intersect1d(base["rid"], c["rid"])
        b, c = base[base["rid"].isin(both)], c[c["rid"].isin(both)]
        inp = float(c["input_len"].sum()) or float("nan")
        row: dict[str, Any] = {
            "baseline": policies[0],
            "candidate": cand,
            "variant": str(c["variant"].iloc[0]) if len(c) else "",
            "paired_requests": int(both.size),
            "baseline_hit_rate": float(b["prefix_hit_tokens"].sum()) / inp,
            "hit_rate": float(c["prefix_hit_tokens"].sum()) / inp,
            **{f"{t}_hit_rate": float(c[f"{t}_hit_tokens"].sum()) / inp for t in _TIERS},
            "baseline_ttft_p50_s": float(np.percentile(b["ttft_s"], 50)) if len(b) else math.nan,
            "ttft_p50_s": float(np.percentile(c["ttft_s"], 50)) if len(c) else math.nan,
            "baseline_ttft_p99_s": float(np.percentile(b["ttft_s"], 99)) if len(b) else math.nan,
            "ttft_p99_s": float(np.percentile(c["ttft_s"], 99)) if len(c) else math.nan,
            "mean_io_wait_s": float(c["io_wait_s"].mean()),
        }
        for name, q in (("ttft_p50", 50), ("ttft_p99", 99)):
            r = bootstrap_ratio(
                b["ttft_s"].to_numpy(), c["ttft_s"].to_numpy(), paired=True, seed=seed,
                stat=partial(np.percentile, q=q),
            )  # fmt: skip
            row.update(dict(zip((f"{name}_ratio", f"{name}_lo", f"{name}_hi"), r, strict=True)))
        r = block_throughput_ratio(
            b["arrival_s"].to_numpy(), b["finish_s"].to_numpy(), c["finish_s"].to_numpy(),
            seed=seed,
        )  # fmt: skip
        row.update(
            dict(zip(("throughput_ratio", "throughput_lo", "throughput_hi"), r, strict=True))
        )
        variant = row["variant"]
        row["l3_read_s_per_token"] = _per_token(transfers, variant, "l3_read")
        row["h2d_s_per_token"] = _per_token(transfers, variant, "h2d")
        rows.append(row)
    return rows


def _fixed_s(tokens: int, page: int, op_latency_s: float) -> float:
    pages = -(-tokens // page)
    return 2 * -(-pages // STORAGE_BATCH_PAGES) * op_latency_s


def l3_hit_time(
    tokens: int, gbps: float, bytes_per_token: int, host_link_bytes_s: float, page: int,
    op_latency_s: float,
) -> float:  # fmt: skip
    """Seconds to bring a ``tokens``-long prefix from storage at ``gbps`` (1e9 B/s) read
    bandwidth to the device: queries and reads (per-call latency per 128 pages each), the
    read's bytes, and the host-to-device load of them (module docstring)."""
    nbytes = tokens * bytes_per_token
    return _fixed_s(tokens, page, op_latency_s) + nbytes / (gbps * 1e9) + nbytes / host_link_bytes_s


def l3_crossover_gbps(
    tokens: int, recompute_s: float, bytes_per_token: int, host_link_bytes_s: float, page: int,
    op_latency_s: float,
) -> float | None:  # fmt: skip
    """The storage read bandwidth (GB/s) at which an L3 hit of ``tokens`` takes as long as
    recomputing them (``recompute_s``, s): below it the hit is slower. None when the hit is
    slower at any bandwidth."""
    nbytes = tokens * bytes_per_token
    spare = recompute_s - _fixed_s(tokens, page, op_latency_s) - nbytes / host_link_bytes_s
    return nbytes / spare / 1e9 if spare > 0 else None


def measured_crossover(
    gbps: Sequence[float], l3_s: Sequence[float], recompute_s: float
) -> float | None:
    """The bandwidth (GB/s) where the measured L3 hit time (``l3_s``, s, one per bandwidth)
    falls below ``recompute_s``: linear in log bandwidth between the last point above and the
    first point below. None when no adjacent pair of finite points straddles it."""
    pts = sorted((g, t) for g, t in zip(gbps, l3_s, strict=True) if np.isfinite(t) and g > 0)
    for (g0, t0), (g1, t1) in itertools.pairwise(pts):
        if t0 >= recompute_s > t1:
            f = (t0 - recompute_s) / (t0 - t1)
            return float(math.exp(math.log(g0) + f * (math.log(g1) - math.log(g0))))
    return None
