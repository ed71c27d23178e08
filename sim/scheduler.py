"""Continuous-batching scheduler as one simpy process (SGLang ``Scheduler`` event loop, reduced).

Each iteration either runs a prefill step (waiting requests admitted FCFS under a token budget
and a cap on running requests) or, when nothing can be admitted, one decode step of every
running request; the step's simulated duration comes from the cost model. Finished requests go
into the cache through ``cache_finished_req``, which unlocks their prefix.

Admission reserves each request's whole output (``output_len - 1`` decode slots), counting as
free only ``available + evictable`` tokens *after* locking the request's own prefix; so decode
never runs out of KV slots and no retraction is needed (retraction comes later).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from time import perf_counter_ns
from typing import Any

import simpy
import torch

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.key import RadixKey
from radixbench.cache.radix_cache import RadixCache
from radixbench.sim.batch import BatchBuilder
from radixbench.sim.config import SimConfig
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.request import Req
from radixbench.workloads.tokens import output_tokens


class Scheduler:
    """Owns the waiting queue, the running batch and the step loop. Simulated time in s."""

    def __init__(
        self,
        env: simpy.Environment,
        cfg: SimConfig,
        cache: RadixCache,
        allocator: TokenToKVPoolAllocator,
        pool: ReqToTokenPool,
        builder: BatchBuilder,
        rec: OpRecorder,
        on_finish: Callable[[Req], None],
    ) -> None:
        self.env, self.cfg, self.cache = env, cfg, cache
        self.allocator, self.pool, self.builder, self.rec = allocator, pool, builder, rec
        self.on_finish = on_finish
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.reserved_decode = 0  # decode slots promised to running requests
        self.arrivals_done = False
        self.admission_dirty = True  # something changed since the last failed admission
        self._wake: simpy.Event | None = None

    # ------------------------------------------------------------------ events
    def enqueue(self, req: Req) -> None:
        self.waiting.append(req)
        self.admission_dirty = True
        self._notify()

    def close(self) -> None:
        self.arrivals_done = True
        self._notify()

    def _notify(self) -> None:
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    # ------------------------------------------------------------------ helpers
    def _stats(self) -> tuple[int, int, int]:
        c = self.cache
        return c.num_nodes, c.total_size(), c.num_evictable_leaves

    def _alloc(self, need: int) -> torch.Tensor:
        """KV slots for ``need`` tokens, evicting first when the pool is short."""
        short = need - self.allocator.available_size()
        if short > 0:
            self.cache.evict(short)
        n, t, lv = self._stats()
        t0 = perf_counter_ns()
        out = self.allocator.alloc(need)
        self.rec.add("alloc", perf_counter_ns() - t0, need, need, n, t, lv, self.env.now)
        if out is None:  # the admission reservation makes this unreachable
            raise RuntimeError(f"out of KV slots: need {need}, reservation violated")
        return out

    def _timed_build(
        self, op: str, fn: Callable[..., Any], reqs: list[Req], loc: torch.Tensor
    ) -> None:
        n, t, lv = self._stats()
        t0 = perf_counter_ns()
        fn(reqs, loc)
        self.rec.add(
            op, perf_counter_ns() - t0, int(loc.numel()), len(reqs), n, t, lv, self.env.now
        )

    def _reject(self, req: Req) -> None:
        req.status = "rejected"
        self.on_finish(req)

    # ------------------------------------------------------------------ admission
    def _admit(self) -> list[Req]:
        """Take waiting requests FCFS into a prefill batch; returns it (maybe empty)."""
        cfg, cache = self.cfg, self.cache
        batch: list[Req] = []
        budget = cfg.max_prefill_tokens
        batch_extend = 0  # KV slots the batch so far will allocate
        while self.waiting and len(self.running) + len(batch) < cfg.max_running:
            req = self.waiting[0]
            total = req.input_len + req.output_len
            if total > cfg.max_context_len_tokens or total > cfg.kv_capacity_tokens:
                self.waiting.popleft()
                self._reject(req)
                continue
            # As SGLang, at least one input token is always computed (it yields the logits).
            match = cache.match_prefix(RadixKey(req.input_ids[: req.input_len - 1]))
            extend = req.input_len - match.prefix_len
            if batch and extend > budget:
                break
            cache.inc_lock_ref(match.last_node)
            need = extend + (req.output_len - 1) + self.reserved_decode + batch_extend
            if self.allocator.available_size() + cache.evictable_size() < need:
                cache.dec_lock_ref(match.last_node)
                break
            row = self.pool.alloc()
            assert row is not None  # rows == max_running
            self.waiting.popleft()
            req.req_pool_idx = row
            req.prefix_indices = match.device_indices
            req.last_node = match.last_node
            req.prefix_hit_tokens = match.prefix_len
            req.status = "running"
            self.reserved_decode += req.output_len - 1
            budget -= extend
            batch_extend += extend
            batch.append(req)
        if not batch:
            self.admission_dirty = False
        return batch

    # ------------------------------------------------------------------ steps
    def _finish(self, req: Req) -> None:
        req.finish_s = self.env.now
        req.status = "finished"
        self.cache.cache_finished_req(req)
        self.admission_dirty = True
        self.on_finish(req)

    def _prefill(self, batch: list[Req]) -> Generator[simpy.Event, Any, None]:
        extend = sum(r.input_len - r.prefix_hit_tokens for r in batch)
        loc = self._alloc(extend)
        self._timed_build("build_extend", self.builder.build_extend, batch, loc)
        cached = sum(r.prefix_hit_tokens for r in batch)
        yield self.env.timeout(self.cfg.cost.prefill_time(extend, cached))
        for r in batch:
            r.seq_len = r.input_len
            r.output_plan = output_tokens(r.rid, r.output_len)
            r.output_ids = r.output_plan[:1]
            r.first_token_s = self.env.now
            if r.output_len == 1:
                self._finish(r)
            else:
                self.running.append(r)

    def _decode(self) -> Generator[simpy.Event, Any, None]:
        running = self.running
        loc = self._alloc(len(running))
        self.reserved_decode -= len(running)
        self._timed_build("build_decode", self.builder.build_decode, running, loc)
        context = sum(r.seq_len for r in running) + len(running)
        yield self.env.timeout(self.cfg.cost.decode_time(len(running), context))
        still: list[Req] = []
        for r in running:
            r.seq_len += 1
            r.output_ids.append(r.output_plan[len(r.output_ids)])
            if len(r.output_ids) >= r.output_len:
                self._finish(r)
            else:
                still.append(r)
        self.running = still

    def loop(self) -> Generator[simpy.Event, Any, None]:
        """The simpy process: runs until arrivals are closed and every request is done."""
        while True:
            batch = self._admit() if (self.waiting and self.admission_dirty) else []
            if batch:
                yield from self._prefill(batch)
            elif self.running:
                yield from self._decode()
            elif self.arrivals_done and not self.waiting:
                return
            else:
                self._wake = self.env.event()
                yield self._wake
                self._wake = None
