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
adapter costs a run's wall time, not its figures) / median direct ns. The two caches run each
request in turn, the first alternating between them from one request to the next.

Streams (``bench.served._requests``: 16 chats interleaved, the KV pool two thirds of what they
add up to, so evictions run): ``mixed`` per request ``match_prefix``, ``inc_lock_ref``,
``evict`` of the shortfall, ``insert`` of prompt + reply, ``dec_lock_ref``; ``requests`` per
request a match and lock, ``checkpoint`` after the prefill, ``release`` with the final
checkpoint after the reply (as ``sim.scheduler`` drives a cache).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
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


def _stream(spec: str, stream: str, requests: list[tuple[array, int]], slots: int) -> list[Row]:
    """Run ``stream`` through both caches of ``spec``; one row per op."""
    pool = (lambda: ReqToTokenPool(4, 1 << 16)) if stream == "requests" else (lambda: None)
    direct = DirectServed(_make(spec, slots, pool=pool()))
    adapted = _make(spec, slots, pool=pool())
    rec = OpRecorder()
    adapted.instrument(rec)
    wall: dict[str, list[int]] = {}
    for op in STREAM_OPS[stream]:  # the adapter's whole call, timed from outside
        setattr(adapted, op, _walled(getattr(adapted, op), wall.setdefault(op, [])))
    step = _mixed if stream == "mixed" else None
    with gc_paused():
        for i, (prompt, reply) in enumerate(requests):
            pair = (direct, adapted) if i % 2 == 0 else (adapted, direct)
            for cache in pair:
                if step is not None:
                    step(cache, prompt, reply)
                else:
                    _request(cache, i, prompt, reply)
    if direct.sgl.evictable_size() != adapted.sgl.evictable_size():
        raise RuntimeError(f"bench served: {spec}: the direct and adapted trees diverged")
    ops = rec.frame(spec)
    top = ops[ops["parent"] == ""]
    rows = []
    for op in STREAM_OPS[stream]:
        d = np.asarray(direct.ns.get(op, []), np.float64)
        r = top.loc[top["op"] == op, "ns"].to_numpy(np.float64)
        if not d.size or d.size != r.size:
            raise RuntimeError(f"bench served: {spec} {op}: {d.size} direct, {r.size} recorded")
        ratio, lo, hi = bootstrap_ratio(r, d, paired=True)
        rows.append({
            "bench": "served", "case": "adapter", "variant": SGLANG[spec], "op": op,
            "stream": stream, "calls": int(d.size), "direct_ns": float(np.median(d)),
            "recorded_ns": float(np.median(r)), "overhead": ratio - 1, "overhead_lo": lo - 1,
            "overhead_hi": hi - 1, "wall": float(np.median(wall[op])) / float(np.median(d)),
        })  # fmt: skip
    return rows


def _walled(fn: Callable[..., Any], out: list[int]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        t0 = perf_counter_ns()
        r = fn(*args)
        out.append(perf_counter_ns() - t0)
        return r

    return call


def bench_adapter(requests: int, sglang: list[str]) -> list[Row]:
    """Per SGLang served implementation in ``sglang`` (``sglang``, ``sglang-python``; the
    legacy class is left out) and per op, the adapter's overhead (module docstring) over
    ``requests`` requests of each stream."""
    reqs, total = _requests(requests)
    slots = max(2 * max(len(p) + r for p, r in reqs), total * 2 // 3)
    rows: list[Row] = []
    for spec in [s for s in sglang if s in ("sglang", "sglang-python")]:
        for stream in STREAM_OPS:
            rows += _stream(spec, stream, reqs, slots)
    return rows
