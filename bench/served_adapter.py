"""The adapter's overhead: sglang 0.5.23's served cache driven directly and through ``--impl
sglang`` (``sglang-python``) on the same operations, in one process.

Two caches of one implementation get the same request stream. The *direct* one is SGLang's
``UnifiedRadixCache`` alone (``radixbench.cache.sglang.DirectServed``): the instance a
``ServedSGLangCache`` built (for radixbench's allocator shim and process state), with the
adapter's wrappers taken off it, called as sglang's scheduler calls it, each call timed with
``perf_counter_ns`` around SGLang's call alone. The *adapted* one is the ``PrefixCache`` the
simulator runs (``registry.make_cache``), instrumented by the simulator's
:class:`~radixbench.sim.instrument.OpRecorder`: its rows are what a run records. Per op,
``overhead`` = median recorded ns / median direct ns - 1 (the calls pair up one to one; the
interval is the paired bootstrap of that ratio), and ``wall`` = median ns of the adapter's
whole call (key and result conversions, the shape shadow, the timer's stats read: what the
adapter costs a run's wall time, not its figures) / median direct ns. The noise floor: a
second direct cache (``aa``, the A/A replica) is measured against the first the same way;
identical code must read about 0. ``timer``: a third direct cache timed by its own
``OpRecorder`` with SGLang's calls on itself wrapped as in a run (``DirectServed(cache,
timer)``), against the first: what radixbench's timer costs SGLang's calls without the
adapter (each nested call's timer frame, beyond the bookkeeping it leaves out and its
calibrated cost, ``OpRecorder.nested_ns``, which it subtracts), part of ``overhead``. The four
caches run each request in turn, in the 24 orders in rotation (each cache as often first, and
after each other one, as the others: what ran just before a call warms or evicts the CPU
caches it uses). Each stream runs ``rounds`` times on fresh caches;
the calls of all rounds pair up and are pooled.

Streams (``bench.served._requests``: 16 chats interleaved, the KV pool two thirds of what they
add up to, so evictions run): ``mixed`` per request ``match_prefix``, ``inc_lock_ref``,
``evict`` of the shortfall, ``insert`` of prompt + reply, ``dec_lock_ref``; ``requests`` per
request a match and lock, ``checkpoint`` after the prefill, ``release`` with the final
checkpoint after the reply (as ``sim.scheduler`` drives a cache).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from itertools import permutations
from time import perf_counter_ns
from typing import Any

import numpy as np
import torch

from radixbench.bench.served import SGLANG, Row, _make, _requests
from radixbench.bench.timing import gc_paused
from radixbench.cache import RadixKey, ReqToTokenPool
from radixbench.cache.sglang import DirectServed
from radixbench.reports.bootstrap import bootstrap_ratio
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.request import Req

__all__ = ["ADAPTER_TARGET", "bench_adapter"]

#: The most a recorded op may read above SGLang's own call (issue 31 item 5).
ADAPTER_TARGET = 0.05
STREAM_OPS = {
    "mixed": ("match_prefix", "inc_lock_ref", "evict", "insert", "dec_lock_ref"),
    "requests": ("checkpoint", "release"),
}


def _shortfall(cache: Any, need: int) -> None:
    alloc = cache.allocator
    if alloc.available_size() < need:
        cache.evict(need - alloc.available_size())


def _mixed(cache: Any, prompt: array, reply: int) -> None:
    """One request of ``bench.served._serve``."""
    alloc = cache.allocator
    m = cache.match_prefix(RadixKey(prompt))
    cache.inc_lock_ref(m.last_node)
    need = len(prompt) + reply - m.prefix_len
    _shortfall(cache, need)
    new = alloc.alloc(need)
    assert new is not None, "bench served: the adapter stream's KV pool is too small"
    v = torch.cat((m.device_indices, new))
    cached = cache.insert(RadixKey(prompt + array("q", range(reply))), v)
    alloc.free(v[m.prefix_len : cached])
    cache.dec_lock_ref(m.last_node)


def _request(cache: Any, rid: int, prompt: array, reply: int) -> None:
    """One request's life: match and lock, prefill, checkpoint, decode, release."""
    alloc, pool = cache.allocator, cache.req_to_token_pool
    row = pool.alloc()
    assert row is not None
    req = Req(rid, 0.0, prompt, reply)
    req.req_pool_idx = row
    m = cache.match_prefix(RadixKey(prompt))
    req.cache_protected_len, req.last_node = m.prefix_len, m.last_node
    req.lock = cache.lock(m.last_node)
    pool.write(row, 0, m.device_indices)
    for start, end in ((m.prefix_len, len(prompt)), (len(prompt), len(prompt) + reply)):
        _shortfall(cache, end - start)
        new = alloc.alloc(end - start)
        assert new is not None, "bench served: the adapter stream's KV pool is too small"
        pool.write(row, start, new)
        if start == m.prefix_len:
            cache.checkpoint(req, len(prompt))
    req.output_ids = array("q", range(reply))
    cache.release(req, len(prompt) + reply, True)


Ns = dict[str, list[int]]


def _round(
    spec: str, stream: str, requests: list[tuple[array, int]], slots: int
) -> tuple[Ns, Ns, Ns, Ns, Ns]:
    """One run of ``stream`` through the direct cache, its A/A replica, the direct one under
    the timer and the adapted one: ns per op of each and the adapter's whole calls."""
    pool = (lambda: ReqToTokenPool(4, 1 << 16)) if stream == "requests" else (lambda: None)
    direct = DirectServed(_make(spec, slots, pool=pool()))
    replica = DirectServed(_make(spec, slots, pool=pool()))
    timer_rec = OpRecorder()
    timed = DirectServed(_make(spec, slots, pool=pool()), timer_rec)
    adapted = _make(spec, slots, pool=pool())
    rec = OpRecorder()
    adapted.instrument(rec)
    wall: dict[str, list[int]] = {}
    for op in STREAM_OPS[stream]:  # the adapter's whole call, timed from outside
        setattr(adapted, op, _walled(getattr(adapted, op), wall.setdefault(op, [])))
    orders = list(permutations((direct, replica, timed, adapted)))
    with gc_paused():
        for i, (prompt, reply) in enumerate(requests):
            for cache in orders[i % len(orders)]:
                if stream == "mixed":
                    _mixed(cache, prompt, reply)
                else:
                    _request(cache, i, prompt, reply)
    if len({c.sgl.evictable_size() for c in (direct, replica, timed, adapted)}) != 1:
        raise RuntimeError(f"bench served: {spec}: the direct and adapted trees diverged")
    return direct.ns, replica.ns, _top(timer_rec, spec, stream), _top(rec, spec, stream), wall


def _top(rec: OpRecorder, spec: str, stream: str) -> Ns:
    """The ns of the top-level rows of ``rec``, by op of ``stream``."""
    ops = rec.frame(spec)
    top = ops[ops["parent"] == ""]
    return {op: top.loc[top["op"] == op, "ns"].tolist() for op in STREAM_OPS[stream]}


def _stream(
    spec: str, stream: str, requests: list[tuple[array, int]], slots: int, rounds: int
) -> list[Row]:
    """Run ``stream`` ``rounds`` times through the three caches of ``spec``; one row per op."""
    got: list[Ns] = [{}, {}, {}, {}, {}]
    for _ in range(rounds):
        for pooled, ns in zip(got, _round(spec, stream, requests, slots), strict=True):
            for op, v in ns.items():
                pooled.setdefault(op, []).extend(v)
    direct, replica, timer, recorded, wall = got
    rows = []
    for op in STREAM_OPS[stream]:
        d = np.asarray(direct.get(op, []), np.float64)
        r = np.asarray(recorded.get(op, []), np.float64)
        a = np.asarray(replica.get(op, []), np.float64)
        t = np.asarray(timer.get(op, []), np.float64)
        if not d.size or not d.size == r.size == a.size == t.size:
            raise RuntimeError(f"bench served: {spec} {op}: {d.size} direct, {r.size} recorded")
        ratio, lo, hi = bootstrap_ratio(r, d, paired=True)
        aa, aa_lo, aa_hi = bootstrap_ratio(a, d, paired=True)
        tm, tm_lo, tm_hi = bootstrap_ratio(t, d, paired=True)
        rows.append({
            "bench": "served", "case": "adapter", "variant": SGLANG[spec], "op": op,
            "stream": stream, "calls": int(d.size), "rounds": rounds,
            "direct_ns": float(np.median(d)), "recorded_ns": float(np.median(r)),
            "overhead": ratio - 1, "overhead_lo": lo - 1, "overhead_hi": hi - 1,
            "aa": aa - 1, "aa_lo": aa_lo - 1, "aa_hi": aa_hi - 1,
            "timer": tm - 1, "timer_lo": tm_lo - 1, "timer_hi": tm_hi - 1,
            "wall": float(np.median(wall[op])) / float(np.median(d)),
        })  # fmt: skip
    return rows


def _walled(fn: Callable[..., Any], out: list[int]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        t0 = perf_counter_ns()
        r = fn(*args)
        out.append(perf_counter_ns() - t0)
        return r

    return call


def bench_adapter(requests: int, sglang: list[str], rounds: int = 3) -> list[Row]:
    """Per SGLang served implementation in ``sglang`` (``sglang``, ``sglang-python``; the
    legacy class is left out) and per op, the adapter's overhead and the A/A replica's
    (module docstring) over ``rounds`` runs of ``requests`` requests of each stream."""
    reqs, total = _requests(requests)
    slots = max(2 * max(len(p) + r for p, r in reqs), total * 2 // 3)
    rows: list[Row] = []
    for spec in [s for s in sglang if s in ("sglang", "sglang-python")]:
        for stream in STREAM_OPS:
            rows += _stream(spec, stream, reqs, slots, rounds)
    return rows
