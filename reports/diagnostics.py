"""Was the run a fair test? Load (overload) and axis-exercise checks shown at a report's top.

**Overload** (:func:`load_check`), per variant, from the per-request table and the per-step
time series (docs/CONTRACTS.md). A run is flagged *overloaded* when either rule holds for any
variant:

* **queue rule** — the waiting queue grows without bound: its peak is at least
  ``max(max_running, QUEUE_FLOOR)`` requests *and* the queue at the last arrival is still at
  least :data:`QUEUE_END_SHARE` of that peak (it had not drained while requests arrived);
* **TTFT rule** — TTFT p50 exceeds :data:`TTFT_FACTOR` x the p50 prefill service time, where a
  request's service time is the prefill chunks it needs (``ceil((input_len -
  prefix_hit_tokens) / chunk)``, ``chunk`` = ``chunked_prefill_size`` or else
  ``max_prefill_tokens`` of the run's spec) times the median prefill step duration.

Utilisation is stated two ways: *busy* = summed step time / (last finish - first arrival), the
share of simulated time the GPU runs a step, and *batch occupancy* = step-time-weighted mean of
running requests / ``max_running``.

**Axis exercise** (:func:`axis_checks`): an axis whose op never ran is *not compared*; the
evictor axis on a median below :data:`TRIVIAL_EVICTABLE_LEAVES` evictable leaves and the
matcher axis on a median matched length below :data:`TRIVIAL_MATCHED_TOKENS` tokens ran on
*trivial inputs*. Either way the reports make no verdict or plot claim for that axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from radixbench.reports.record import RunMeta
from radixbench.reports.verdicts import common_call_sites

__all__ = [
    "QUEUE_END_SHARE",
    "QUEUE_FLOOR",
    "TRIVIAL_EVICTABLE_LEAVES",
    "TRIVIAL_MATCHED_TOKENS",
    "TTFT_FACTOR",
    "AxisCheck",
    "Load",
    "axis_checks",
    "load_check",
    "load_lines",
]

#: Queue rule: the peak must reach max(max_running, QUEUE_FLOOR) requests ...
QUEUE_FLOOR = 16
#: ... and the queue at the last arrival must still be this share of the peak.
QUEUE_END_SHARE = 0.5
#: TTFT rule: TTFT p50 above this many times the p50 prefill service time.
TTFT_FACTOR = 10.0
#: Evictor axis: below this median of evictable leaves per evict call the inputs are trivial.
TRIVIAL_EVICTABLE_LEAVES = 100
#: Matcher axis: below this median matched length (tokens) per match_prefix the inputs are trivial.
TRIVIAL_MATCHED_TOKENS = 128


@dataclass(frozen=True)
class Load:
    """Load figures of one variant (times in s, queue lengths in requests, shares in [0, 1]).
    ``reasons``: the overload rules that hold, one line each (empty = served)."""

    variant: str
    busy: float
    occupancy: float
    max_running: int
    peak_queue: int
    queue_at_last_arrival: int
    ttft_p50_s: float
    service_p50_s: float
    rejected: int
    reasons: tuple[str, ...]

    @property
    def overloaded(self) -> bool:
        return bool(self.reasons)


def load_check(
    requests: pd.DataFrame, timeseries: pd.DataFrame | None, meta: RunMeta
) -> list[Load]:
    """One :class:`Load` per variant (sorted by name); empty without a time series that has
    ``step`` and ``step_s`` (old runs) or a record without ``max_running`` (the batch
    occupancy and the queue rule need it). ``meta``: the run's record (``max_running``,
    ``chunked_prefill_size`` or else ``max_prefill_tokens``). Mutates nothing."""
    if timeseries is None or not {"step", "step_s", "running"} <= set(timeseries.columns):
        return []
    if meta.max_running is None:
        return []
    max_running = int(meta.max_running)
    chunk = meta.chunked_prefill_size or meta.max_prefill_tokens
    out = []
    for variant, steps in timeseries.groupby("variant", sort=True):
        reqs = requests[requests["variant"] == variant]
        done = reqs[reqs["status"] == "finished"]
        if steps.empty or done.empty:
            continue
        step_s = steps["step_s"].to_numpy(np.float64)
        span = float(done["finish_s"].max() - reqs["arrival_s"].min())
        busy = float(step_s.sum()) / span if span > 0 else float("nan")
        w = step_s.sum()
        occ = float(np.average(steps["running"], weights=step_s)) if w > 0 else float("nan")
        queue = steps["queue_len"].to_numpy(np.int64)
        t = steps["sim_time_s"].to_numpy(np.float64)
        last = float(reqs["arrival_s"].max())
        before = queue[t <= last]
        q_end = int(before[-1]) if before.size else 0
        peak = int(queue.max()) if queue.size else 0
        prefill = step_s[steps["step"].to_numpy() == "prefill"]
        p_step = float(np.median(prefill)) if prefill.size else float("nan")
        new = (done["input_len"] - done["prefix_hit_tokens"]).clip(lower=1).to_numpy()
        chunks = np.ceil(new / chunk) if isinstance(chunk, int) and chunk > 0 else np.ones(len(new))
        service = float(np.median(chunks)) * p_step
        ttft = float(done["ttft_s"].median())
        reasons = []
        if peak >= max(max_running, QUEUE_FLOOR) and q_end >= QUEUE_END_SHARE * peak:
            reasons.append(
                f"queue grows without bound: peak {peak:,} waiting requests, still {q_end:,} "
                f"at the last arrival (rule: peak >= max(max_running {max_running}, "
                f"{QUEUE_FLOOR}) and queue at last arrival >= {QUEUE_END_SHARE:.0%} of peak)"
            )
        if service > 0 and ttft > TTFT_FACTOR * service:
            reasons.append(
                f"TTFT p50 {_secs(ttft)} is {ttft / service:,.0f}x the p50 prefill service "
                f"time {_secs(service)} (rule: > {TTFT_FACTOR:g}x)"
            )
        out.append(
            Load(
                str(variant),
                busy,
                occ / max_running,
                max_running,
                peak,
                q_end,
                ttft,
                service,
                int((reqs["status"] == "rejected").sum()),
                tuple(reasons),
            )
        )
    return out


def _secs(x: float) -> str:
    if math.isnan(x):
        return "n/a"
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:,.1f} s"


def load_lines(loads: Sequence[Load]) -> list[str]:
    """Markdown-free lines for a report's top: an ``OVERLOADED`` flag per overloaded variant
    (with its rules), else one ``served`` line with utilisation, queue and TTFT figures of the
    first variant; rejected requests stated. Empty when ``loads`` is."""
    if not loads:
        return []
    bad = [ld for ld in loads if ld.overloaded]
    lines = []
    for ld in bad:
        lines.append(
            f"OVERLOADED ({ld.variant}): " + "; ".join(ld.reasons) + ". Latencies measure the "
            "queue, not the cache: lower the rate (--time-scale, --rate-scale) or the requests."
        )
    ref = bad[0] if bad else loads[0]
    state = "overloaded" if bad else "served"
    lines.append(
        f"Load: {state} — GPU busy {ref.busy:.0%} of simulated time, batches hold "
        f"{ref.occupancy * ref.max_running:.1f} of {ref.max_running} running slots on average "
        f"({ref.occupancy:.0%}), waiting queue peak {ref.peak_queue:,}, TTFT p50 "
        f"{_secs(ref.ttft_p50_s)} vs prefill service p50 {_secs(ref.service_p50_s)}."
    )
    rejected = max(ld.rejected for ld in loads)
    if rejected:
        lines.append(
            f"{rejected:,} request(s) rejected (could never fit the KV pool); hit rates and "
            "latencies cover finished requests only."
        )
    return lines


@dataclass(frozen=True)
class AxisCheck:
    """Whether ``axis`` (evictor, matcher, flatten, impl) was exercised: ``ok`` False with a
    one-line ``reason`` when its op never ran or ran on trivial inputs; ``condition`` the
    input size its calls saw (e.g. ``median 1,105 evictable leaves``) and ``conditions`` the
    same per op, for an axis compared on several ops (``impl``: match_prefix, insert, evict —
    each op's own input size)."""

    axis: str
    ok: bool
    reason: str
    condition: str
    conditions: dict[str, str] = field(default_factory=dict)


def _variants_on(ops: pd.DataFrame, axis: str) -> pd.DataFrame:
    """The rows of the variants that have ``axis`` (its column not missing): another
    implementation's rows have no evictor or matcher of radixbench's."""
    if axis in ("evictor", "matcher") and axis in ops.columns:
        return ops[ops[axis].notna()]
    return ops


def _evict_condition(ev: pd.DataFrame) -> tuple[int, float, str]:
    n = len(ev) // max(ev["variant"].nunique(), 1)
    leaves = float(ev["evictable_leaves"].median()) if n else 0.0
    return n, leaves, f"median {leaves:,.0f} evictable leaves"


def _match_condition(mp: pd.DataFrame) -> tuple[int, float, str]:
    n = len(mp)
    matched = float(mp["result"].median()) if n else 0.0
    return n, matched, f"median matched {matched:,.0f} tokens"


def _host_conditions(sel: pd.DataFrame, cond: str) -> dict[str, str]:
    """With HiCache, the input size of the host tier's evictions too (``evict_host`` rows
    record host leaves as ``evictable_leaves``)."""
    host = sel[sel["op"] == "evict_host"]
    if host.empty:
        return {}
    leaves = float(host["evictable_leaves"].median())
    return {"evict": cond, "evict_host": f"median {leaves:,.0f} evictable host leaves"}


def axis_checks(ops: pd.DataFrame, axes: Sequence[str]) -> dict[str, AxisCheck]:
    """An :class:`AxisCheck` for each of ``axes`` from the per-op table. Mutates nothing."""
    out = {}
    for axis in axes:
        sel = _variants_on(ops, axis)
        if axis == "evictor":
            n, leaves, cond = _evict_condition(sel[sel["op"] == "evict"])
            if not n:
                out[axis] = AxisCheck(
                    axis,
                    False,
                    "evict ran 0 times: the evictors were not compared (the KV pool never filled)",
                    "",
                )
            elif leaves < TRIVIAL_EVICTABLE_LEAVES:
                out[axis] = AxisCheck(
                    axis,
                    False,
                    f"evict ran {n:,} times on a median of {leaves:,.0f} evictable "
                    f"leaves (< {TRIVIAL_EVICTABLE_LEAVES}): trivial inputs, the evictors were "
                    "not meaningfully compared",
                    cond,
                )
            else:
                out[axis] = AxisCheck(axis, True, "", cond, _host_conditions(sel, cond))
        elif axis == "matcher":
            n, matched, cond = _match_condition(sel[sel["op"] == "match_prefix"])
            if not n:
                out[axis] = AxisCheck(
                    axis, False, "match_prefix ran 0 times: the matchers were not compared", ""
                )
            elif matched < TRIVIAL_MATCHED_TOKENS:
                out[axis] = AxisCheck(
                    axis,
                    False,
                    f"match_prefix matched a median of {matched:,.0f} tokens "
                    f"(< {TRIVIAL_MATCHED_TOKENS}): trivial inputs, the matchers were not "
                    "meaningfully compared",
                    cond,
                )
            else:
                out[axis] = AxisCheck(axis, True, "", cond)
        else:
            op_names = ("build_extend",) if axis == "flatten" else ("match_prefix",)
            b = sel[sel["op"].isin(op_names)]
            if b.empty:
                out[axis] = AxisCheck(
                    axis,
                    False,
                    f"{op_names[0]} ran 0 times: the {axis} variants were not compared",
                    "",
                )
                continue
            cond = f"median {float(b['key_len'].median()):,.0f} tokens per call"
            conditions = {}
            if axis == "impl":
                conditions["match_prefix"] = _match_condition(common_call_sites(b))[2]
                ins = common_call_sites(sel[sel["op"] == "insert"])
                if len(ins):
                    conditions["insert"] = (
                        f"median {float(ins['key_len'].median()):,.0f} tokens per key"
                    )
                ev = common_call_sites(sel[sel["op"] == "evict"])
                if len(ev):
                    conditions["evict"] = _evict_condition(ev)[2]
            out[axis] = AxisCheck(axis, True, "", cond, conditions)
    return out
