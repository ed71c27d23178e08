"""The requests a run simulates, and the bounds on their prefix hits.

:func:`load_requests` loads or generates a scenario's requests (``compare``, ``replay``,
``scenarios --ceiling``); :func:`check_fits` refuses a KV pool no request fits in;
:func:`served_ceiling` and :func:`served_belady` bound the hit rate of the requests a run
finished (the infinite-cache ceiling, Belady's optimal eviction at the run's KV capacity).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from radixbench.harness.config.scenario import Scenario, load_scenario
from radixbench.sim.belady import belady_bound
from radixbench.sim.config import SimConfig
from radixbench.workloads.ceiling import hit_ceiling
from radixbench.workloads.sources import load_workload
from radixbench.workloads.trace import TraceError, TraceRequest

__all__ = [
    "Workload",
    "check_fits",
    "describe_selection",
    "load_requests",
    "scenario_ceiling",
    "served_belady",
    "served_ceiling",
]


@dataclass(frozen=True)
class Workload:
    """The requests to simulate (first arrival at 0 s), the malformed lines skipped while
    loading them, and a one-line label of where they came from."""

    requests: list[TraceRequest]
    skipped: list[TraceError]
    label: str


def load_requests(scenario: Scenario, on_bad_line: str | None = None) -> Workload:
    """Load or generate ``scenario``'s requests (deterministic for a given seed).

    ``on_bad_line``: "error" / "skip" for a malformed trace line (None = the scenario's own
    setting). Raises ``ValueError`` (an empty selection, bad parameters) or :class:`TraceError`
    (file:line of a malformed line, unless bad lines are skipped).
    """
    skipped: list[TraceError] = []
    sc = scenario
    try:
        requests = _load(sc, sc.arrivals, on_bad_line, skipped)
    except ValueError as e:  # TraceError too
        if "no request" not in str(e) or not (sc.arrivals.start_s or sc.arrivals.window_s):
            raise
        raise ValueError(_empty_selection(sc, on_bad_line) or str(e)) from None
    return Workload(requests, skipped, f"{sc.name}: {describe_selection(sc, len(requests))}")


def _load(
    sc: Scenario, arrivals: Any, on_bad_line: str | None, skipped: list[TraceError]
) -> list[TraceRequest]:
    return load_workload(
        sc.kind,
        sc.workload,
        arrivals,
        np.random.default_rng(sc.seed),
        on_bad_line=on_bad_line or sc.on_bad_line,
        skipped=skipped,
        base_dir=sc.base_dir,
    )


def _empty_selection(sc: Scenario, on_bad_line: str | None) -> str | None:
    """Why ``--start`` / ``--window`` selected no request, naming the one at fault and the
    span the trace's arrivals cover (s after its first request, before ``--time-scale``); None
    when the whole trace is empty too."""
    a = sc.arrivals
    whole = dataclasses.replace(
        a, start_s=0.0, window_s=None, max_requests=None, time_scale=1.0, rate_scale=1.0
    )
    try:
        everything = _load(sc, whole, on_bad_line, [])
    except ValueError:
        return None
    last = max(r.arrival_s for r in everything) - min(r.arrival_s for r in everything)
    span = f"its {len(everything):,} requests arrive 0-{last:,.1f} s after the first"
    if a.start_s > last:
        return f"{sc.named('arrivals.start_s')} {a.start_s:g}: past the end of the trace ({span})"
    return (
        f"{sc.named('arrivals.window_s')} {a.window_s:g}: no request arrives in "
        f"[{a.start_s:g}, {a.start_s + (a.window_s or 0):g}) s ({span})"
    )


#: A request count in a scenario's description: "first 1,000 requests", "3,000 requests".
_COUNT = re.compile(r"\b(first )?(\d[\d,]*) requests\b")


#: A KV pool size in a scenario's description: "96k-token KV pool", "400,000-token KV pool".
_POOL = re.compile(r"\b(\d[\d,]*(?:\.\d+)?)(k|M)?-token KV pool\b")


#: An instance count in a scenario's description: "on 8 simulated H100s".
_INSTANCES = re.compile(r"\b(\d+) simulated (\w+?)s?\b(?= behind)")


def describe_selection(scenario: Scenario, n: int) -> str:
    """``scenario``'s description with the request count and KV pool it states made true of
    the ``n`` requests loaded and the pool simulated: ``--all`` or ``--requests 50`` select
    other requests than the scenario's "first 1,000 requests", and the label must not repeat
    its count ("all 12,031 requests", "first 50 requests", "2,310 selected requests" for a
    window or a start); ``--kv-capacity 50000`` makes "96k-token KV pool" "50,000-token KV
    pool"; ``--instances 4`` makes "8 simulated H100s behind a router" "4 simulated H100s
    behind a router"."""
    a = scenario.arrivals

    def fix(m: re.Match[str]) -> str:
        if int(m[2].replace(",", "")) == n:
            return m[0]
        if a.window_s is None and not a.start_s:
            return f"first {n:,} requests" if a.max_requests is not None else f"all {n:,} requests"
        return f"{n:,} selected requests"

    kv = scenario.sim.kv_capacity_tokens

    def fix_pool(m: re.Match[str]) -> str:
        stated = float(m[1].replace(",", "")) * {"k": 1e3, "M": 1e6}.get(m[2] or "", 1)
        return m[0] if round(stated) == kv else f"{kv:,}-token KV pool"

    def fix_instances(m: re.Match[str]) -> str:
        k = scenario.cluster.instances
        return m[0] if int(m[1]) == k else f"{k} simulated {m[2]}{'s' if k != 1 else ''}"

    text = _POOL.sub(fix_pool, _COUNT.sub(fix, scenario.description, count=1))
    return _INSTANCES.sub(fix_instances, text) if scenario.cluster is not None else text


def scenario_ceiling(ref: str) -> tuple[int, dict[str, float]]:
    """(requests, :func:`~radixbench.workloads.ceiling.hit_ceiling`) of scenario ``ref`` (a
    bundled name or a TOML path) as ``compare`` would load it. Raises what
    :func:`load_requests` and ``load_scenario`` raise."""
    reqs = load_requests(load_scenario(ref)).requests
    return len(reqs), hit_ceiling(reqs)


def check_fits(requests: list[TraceRequest], sim: SimConfig) -> None:
    """Raise ``ValueError`` (one line naming ``--kv-capacity`` and the smallest capacity that
    admits a request) when the scheduler would reject every request: it admits only a request
    with fewer input + output tokens than the KV pool (whole pages) and than
    ``max_context_len_tokens`` (``_get_new_batch_prefill`` in :mod:`radixbench.sim.scheduler`,
    after sglang 0.5.23), so such a run would measure nothing."""
    if not requests:
        return
    pool = sim.kv_capacity_tokens // sim.page_size * sim.page_size
    cap = min(pool, sim.max_context_len_tokens)
    need = min(r.input_length + r.output_length for r in requests)
    if need < cap:
        return
    if pool <= sim.max_context_len_tokens:
        raise ValueError(
            f"--kv-capacity {sim.kv_capacity_tokens} (kv_capacity_tokens): every request would be "
            f"rejected: the smallest request has {need} input + output tokens and the scheduler "
            "admits only requests with fewer tokens than the pool; use --kv-capacity "
            f"{(need // sim.page_size + 1) * sim.page_size} or more"
        )
    raise ValueError(
        f"max_context_len_tokens {sim.max_context_len_tokens}: every request would be rejected: "
        f"the smallest request has {need} input + output tokens and the scheduler admits only "
        "requests with fewer tokens than the context length"
    )


def served_ceiling(trace: list[TraceRequest], requests: pd.DataFrame) -> dict[str, Any]:
    """Infinite-cache hit-rate ceiling (:func:`hit_ceiling`) over the requests the first
    variant finished, as if the rejected ones never arrived, so it covers the same requests as
    the achieved hit rate (over finished requests); plus ``requests`` (covered) and
    ``rejected`` (left out) counts."""
    served = _served(trace, requests)
    return {**hit_ceiling(served), "requests": len(served), "rejected": len(trace) - len(served)}


def served_belady(
    trace: list[TraceRequest], requests: pd.DataFrame, sim: SimConfig
) -> dict[str, Any]:
    """Belady's bound (:func:`radixbench.sim.belady.belady_bound`: optimal offline eviction,
    requests one at a time with the whole KV pool as cache) at the run's KV capacity and page
    size, over the same finished requests as :func:`served_ceiling`."""
    return belady_bound(_served(trace, requests), sim.kv_capacity_tokens, sim.page_size)


def _served(trace: list[TraceRequest], requests: pd.DataFrame) -> list[TraceRequest]:
    """The requests of ``trace`` the first variant of the per-request table finished."""
    first = requests["variant"].iloc[0] if len(requests) else None
    mine = requests[(requests["variant"] == first) & (requests["status"] == "finished")]
    done = set(mine["rid"].tolist())
    return [r for r in trace if r.rid in done]
