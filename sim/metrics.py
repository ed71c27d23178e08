"""Serving metrics of one simulated run, named as ``vllm bench serve`` names them
(vllm/benchmarks/serve.py ``BenchmarkMetrics``): request_throughput (req/s),
output_throughput (tok/s), total_token_throughput (tok/s), {mean,median,p99}_{ttft,tpot,itl,
e2el}_ms; plus prefix hit rate (all requests and the last 50% by arrival), retractions, KV
utilisation and queue length over time (time-weighted by step duration), and the clock mode.

Definitions (as vLLM): TTFT = first token - arrival; TPOT = (E2E - TTFT) / (output tokens - 1)
per request with more than one output token; ITL = every gap between consecutive output tokens
of a request (all requests pooled); E2E = finish - arrival; duration = last finish - first
arrival. Rejected requests count only in ``failed``.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from radixbench.sim.parted import PartedTable
from radixbench.sim.request import Req


def _stats(name: str, values_s: np.ndarray, out: dict[str, Any]) -> None:
    """Mean, median and p99 (ms) of ``values_s``: a temporary of the caller's, scaled and
    reordered in place (ITL of the whole Mooncake trace: 4.2 M gaps, no second copy)."""
    ms = np.multiply(values_s, 1e3, out=values_s)
    has = ms.size > 0
    out[f"mean_{name}_ms"] = float(ms.mean()) if has else float("nan")
    out[f"median_{name}_ms"] = float(np.median(ms, overwrite_input=True)) if has else float("nan")
    out[f"p99_{name}_ms"] = (
        float(np.percentile(ms, 99, overwrite_input=True)) if has else float("nan")
    )


def token_gaps(reqs: Sequence[Req]) -> tuple[np.ndarray, np.ndarray]:
    """Every gap (s) between consecutive output-token times of each request, in request order,
    concatenated (float64 ``[sum counts]``), and ``counts`` (int64 ``[len(reqs)]``: gaps per
    request, ``max(0, tokens - 1)``). Each request's gaps are subtracted straight into their
    place in the result (the values of a per-request ``np.diff``): no concatenation of all
    token times beside it (4.2 M tokens on the whole Mooncake trace: that and the ``diff``
    of it held ~100 MB more). Mutates nothing."""
    times = [
        np.frombuffer(t, dtype=np.float64)
        if isinstance(t := r.token_s, array)
        else np.asarray(t, dtype=np.float64)
        for r in reqs
    ]
    n = np.fromiter((t.size for t in times), dtype=np.int64, count=len(times))
    counts = np.maximum(n - 1, 0)
    out = np.empty(int(counts.sum()), dtype=np.float64)
    at = 0
    for ts, k in zip(times, counts.tolist(), strict=True):
        if k:
            np.subtract(ts[1:], ts[:-1], out=out[at : at + k])
            at += k
    return out, counts


def max_gaps(gaps: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """float64 ``[len(counts)]``: each request's largest gap (s) from :func:`token_gaps`'s
    result, NaN for a request with fewer than two tokens."""
    out = np.full(counts.size, np.nan)
    has = counts > 0
    if has.any():
        starts = np.cumsum(counts) - counts
        out[has] = np.maximum.reduceat(gaps, starts[has])
    return out


def serving_metrics(
    reqs: Sequence[Req], steps: pd.DataFrame | PartedTable, clock: str
) -> dict[str, Any]:
    """One row of the ``metrics`` table (docs/CONTRACTS.md) from finished ``Req`` objects and
    the run's ``timeseries`` (a frame, or the table in parts: read a column at a time). Pure:
    mutates nothing."""
    done = sorted((r for r in reqs if r.status == "finished"), key=lambda r: r.rid)
    out: dict[str, Any] = {"clock": clock, "completed": len(done)}
    out["failed"] = sum(1 for r in reqs if r.status != "finished")
    arrival = np.array([r.arrival_s for r in done], dtype=np.float64)
    finish = np.array([r.finish_s for r in done], dtype=np.float64)
    first = np.array([r.first_token_s for r in done], dtype=np.float64)
    n_out = np.array([r.output_len for r in done], dtype=np.int64)
    n_in = np.array([r.input_len for r in done], dtype=np.int64)
    hits = np.array([r.prefix_hit_tokens for r in done], dtype=np.int64)
    duration = float(finish.max() - arrival.min()) if done else 0.0
    out["duration_s"] = duration
    out["total_input_tokens"] = int(n_in.sum())
    out["total_output_tokens"] = int(n_out.sum())
    per_s = 1.0 / duration if duration > 0 else float("nan")
    out["request_throughput"] = len(done) * per_s
    out["output_throughput"] = float(n_out.sum()) * per_s
    out["total_token_throughput"] = float(n_in.sum() + n_out.sum()) * per_s
    _stats("ttft", first - arrival, out)
    multi = n_out > 1
    _stats("tpot", (finish - first)[multi] / (n_out[multi] - 1), out)
    _stats("itl", token_gaps(done)[0], out)
    _stats("e2el", finish - arrival, out)
    out["prefix_hit_rate"] = float(hits.sum() / n_in.sum()) if done else float("nan")
    half = len(done) // 2
    tail_in = n_in[half:].sum()
    out["prefix_hit_rate_last50"] = float(hits[half:].sum() / tail_in) if tail_in else float("nan")
    out["retractions"] = int(sum(r.retractions for r in reqs))
    out["retracted_requests"] = int(sum(1 for r in reqs if r.retractions))
    if len(steps):
        col = steps.column if isinstance(steps, PartedTable) else _frame_column(steps)
        w = col("step_s")
        util = col("kv_used_tokens") / col("kv_capacity_tokens")
        out["mean_kv_util"] = float(np.average(util, weights=w))
        out["max_kv_util"] = float(util.max())
        del util
        q = col("queue_len")
        out["mean_queue_len"] = float(np.average(q, weights=w))
        out["max_queue_len"] = int(q.max())
        out["steps"] = len(steps)
        out["measured_cpu_s"] = float(pd.Series(col("measured_cpu_s")).sum())
    return out


def _frame_column(steps: pd.DataFrame) -> Any:
    return lambda name: steps[name].to_numpy()
