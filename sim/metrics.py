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

from radixbench.sim.request import Req


def _stats(name: str, values_s: np.ndarray, out: dict[str, Any]) -> None:
    ms = values_s * 1e3  # a temporary: the median and percentile may reorder it in place
    has = ms.size > 0
    out[f"mean_{name}_ms"] = float(ms.mean()) if has else float("nan")
    out[f"median_{name}_ms"] = float(np.median(ms, overwrite_input=True)) if has else float("nan")
    out[f"p99_{name}_ms"] = (
        float(np.percentile(ms, 99, overwrite_input=True)) if has else float("nan")
    )


def token_gaps(reqs: Sequence[Req]) -> tuple[np.ndarray, np.ndarray]:
    """Every gap (s) between consecutive output-token times of each request, in request order,
    concatenated (float64 ``[sum counts]``), and ``counts`` (int64 ``[len(reqs)]``: gaps per
    request, ``max(0, tokens - 1)``). One concatenation and one ``diff`` for all requests; the
    values are those of a per-request ``np.diff`` (the same subtractions). Mutates nothing."""
    times = [
        np.frombuffer(t, dtype=np.float64)
        if isinstance(t := r.token_s, array)
        else np.asarray(t, dtype=np.float64)
        for r in reqs
    ]
    n = np.fromiter((t.size for t in times), dtype=np.int64, count=len(times))
    counts = np.maximum(n - 1, 0)
    if not times or not counts.any():
        return np.empty(0, dtype=np.float64), counts
    d = np.diff(np.concatenate(times))
    cross = np.cumsum(n)[:-1] - 1  # index in d of the gap from a request's last token onwards
    cross = cross[(cross >= 0) & (cross < d.size)]
    keep = np.ones(d.size, dtype=bool)
    keep[cross] = False
    return d[keep], counts


def max_gaps(gaps: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """float64 ``[len(counts)]``: each request's largest gap (s) from :func:`token_gaps`'s
    result, NaN for a request with fewer than two tokens."""
    out = np.full(counts.size, np.nan)
    has = counts > 0
    if has.any():
        starts = np.cumsum(counts) - counts
        out[has] = np.maximum.reduceat(gaps, starts[has])
    return out


def serving_metrics(reqs: Sequence[Req], steps: pd.DataFrame, clock: str) -> dict[str, Any]:
    """One row of the ``metrics`` table (docs/CONTRACTS.md) from finished ``Req`` objects and
    the run's ``timeseries`` frame. Pure: mutates nothing."""
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
        w = steps["step_s"].to_numpy()
        util = steps["kv_used_tokens"].to_numpy() / steps["kv_capacity_tokens"].to_numpy()
        q = steps["queue_len"].to_numpy()
        out["mean_kv_util"] = float(np.average(util, weights=w))
        out["max_kv_util"] = float(util.max())
        out["mean_queue_len"] = float(np.average(q, weights=w))
        out["max_queue_len"] = int(q.max())
        out["steps"] = len(steps)
        out["measured_cpu_s"] = float(steps["measured_cpu_s"].sum())
    return out
