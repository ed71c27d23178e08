"""One simulated server: KV pool, request rows, cache, batch builder and scheduler on a simpy
environment, with the public surface every driver uses (one server alone, or N behind a
router: ``sim.run.VariantSim``).

A :class:`Server` takes requests (:meth:`Server.enqueue`), is told when the next may come
(:meth:`Server.next_arrival_at`: its scheduler's decode runs never pass that time) and when
none will (:meth:`Server.close`), and answers what a router may ask (queue, running batch, KV
in use, what is routed here and not finished). With KV events on it drains its cache's events
after every scheduler step (``Scheduler.after_step``, where sglang 0.5.23 publishes them) to a
publisher (a cluster's event bus) and to a ``--kv-events`` log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import simpy
import torch

from radixbench.cache.allocator import ReqToTokenPool
from radixbench.cache.kv_events import KVEventConfig
from radixbench.cache.paged_allocator import make_allocator
from radixbench.cache.radix_cache import CacheConfig
from radixbench.cache.registry import make_cache
from radixbench.sim.accounting import kv_account
from radixbench.sim.batch import BatchBuilder
from radixbench.sim.clock import StepClock
from radixbench.sim.config import HICACHE_AXIS, SimConfig, Variant
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.kv_event_log import KVEventLog
from radixbench.sim.records import RecordLog
from radixbench.sim.request import Req
from radixbench.sim.scheduler import Scheduler

__all__ = ["Server"]

Publish = Callable[[int, Sequence[Any]], None]


class Server:
    """Server ``index`` of a run on ``env``: a fresh pool, allocator and cache of ``variant``'s
    implementation and algorithms (``radixbench.cache.registry.make_cache``: any registered
    implementation, driven alike through ``PrefixCache``), instrumented by its own
    :class:`OpRecorder` (stamped by a :class:`StepClock`), and a :class:`Scheduler` over them,
    started as a simpy process. ``on_done(server, req)``: called per finished or rejected
    request, after it is counted in ``done``. ``kv_events``: the cache emits KV events in that
    format, drained after every step to ``publish(index, events)`` and ``log`` (each optional).
    ``coalesce``: decode runs (``sim.scheduler``). Raises ``ImplError`` / ``ValueError`` when
    the implementation cannot run ``cfg``, or for KV events with HiCache.

    ``done``: finished (and rejected) requests in finishing order; ``outstanding`` /
    ``outstanding_tokens``: requests handed here and not finished, and their input + output
    tokens; ``processed``: requests handed here so far; ``capacity``: KV slots (tokens)."""

    def __init__(
        self,
        env: simpy.Environment,
        cfg: SimConfig,
        variant: Variant,
        device: torch.device,
        index: int = 0,
        on_done: Callable[[Server, Req], None] | None = None,
        kv_events: KVEventConfig | None = None,
        publish: Publish | None = None,
        log: KVEventLog | None = None,
        coalesce: bool = True,
    ) -> None:
        hicache = cfg.hicache_for(dict(variant.extra).get(HICACHE_AXIS))
        if kv_events is not None and hicache is not None:
            # both would be drained from take_actions: the transfers and the events would mix
            raise ValueError(
                "KV events (--kv-events, a cluster) and HiCache cannot run together yet: "
                "leave out one of them"
            )
        self.index, self.env, self.variant = index, env, variant
        self.done: list[Req] = []
        self.outstanding = self.outstanding_tokens = self.processed = 0
        self._on_done = on_done
        self.allocator = make_allocator(
            cfg.kv_capacity_tokens, cfg.page_size, device, check_repeats=False
        )
        self.pool = ReqToTokenPool(cfg.max_running, cfg.max_context_len_tokens, device)
        self.cache = make_cache(
            variant.impl,
            self.pool,
            self.allocator,
            CacheConfig(
                cfg.page_size,
                variant.evictor,
                variant.matcher,
                cfg.policy,
                split_rule=cfg.split_rule,
                kv_events=kv_events,
                hicache=hicache,
            ),
        )
        self.clock = StepClock(env)
        self.rec = OpRecorder(self.clock)
        self.cache.instrument(self.rec)
        builder = BatchBuilder(self.pool, variant.flatten)
        self.sched = Scheduler(
            env, cfg, self.cache, self.allocator, self.pool, builder, self.rec, self._finished,
            self.clock, coalesce,
        )  # fmt: skip
        self.capacity = self.allocator.size
        if kv_events is not None and (publish is not None or log is not None):
            self.sched.after_step = self._drainer(variant.name, publish, log)
        env.process(self.sched.loop())

    def _drainer(self, name: str, publish: Publish | None, log: KVEventLog | None) -> Callable:
        cache, env, index = self.cache, self.env, self.index

        def drain() -> None:
            events = cache.take_actions()
            if events:
                if log is not None:
                    log.write(name, index, float(env.now), events)
                if publish is not None:
                    publish(index, events)

        return drain

    def _finished(self, req: Req) -> None:
        self.outstanding -= 1
        self.outstanding_tokens -= req.input_len + req.output_len
        self.done.append(req)
        if self._on_done is not None:
            self._on_done(self, req)

    # ------------------------------------------------------------------ requests in
    def enqueue(self, req: Req) -> None:
        """Accept a request now (counted outstanding until it finishes)."""
        self.outstanding += 1
        self.outstanding_tokens += req.input_len + req.output_len
        self.processed += 1
        self.sched.enqueue(req)

    def next_arrival_at(self, t: float) -> None:
        """The next request may reach this server at simulated time ``t`` (s), not before."""
        self.sched.next_arrival_s = t

    def close(self) -> None:
        """No more requests will come: the scheduler ends when its work is done."""
        self.sched.close()

    # ------------------------------------------------------------------ what a router sees
    def waiting(self) -> int:
        """Requests in the waiting queue."""
        return len(self.sched.waiting)

    def waiting_tokens(self) -> int:
        """Prompt tokens of the waiting queue."""
        return sum(r.input_len for r in self.sched.waiting)

    def running(self) -> int:
        """Requests in the running (decode) batch."""
        return len(self.sched.running)

    def kv_used_tokens(self) -> int:
        """KV slots in use (tokens): the tree's and the live requests'."""
        return self.capacity - self.allocator.available_size()

    # ------------------------------------------------------------------ results
    def check_kv(self) -> None:
        """The KV pool adds up (``sim.accounting.kv_account``; raises on a leak)."""
        kv_account(self.cache, self.sched.live_requests())

    @property
    def step_log(self) -> RecordLog:
        """The scheduler's per-step log (``sim.timeseries.StepLog``)."""
        return self.sched.steps

    def steps_frame(self, name: str) -> pd.DataFrame:
        """The per-step table (docs/CONTRACTS.md, ``timeseries``) under variant ``name``."""
        return self.sched.steps.frame(name)

    def ops_frame(self, name: str) -> pd.DataFrame:
        """The per-op table (docs/CONTRACTS.md, ``ops``) under variant ``name``."""
        return self.rec.frame(name)
