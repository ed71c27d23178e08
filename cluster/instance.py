"""One instance of a cluster: a full radixbench server on the cluster's simpy environment.

Each instance is what ``radixbench compare`` simulates alone (``sim.run.build_server``: its own
KV pool, request rows, cache of the variant's implementation and algorithms, scheduler and op
recorder), fed by the router instead of the trace. It counts what the router knows of it
(requests routed and not finished, their tokens) and, with KV events on, drains its cache's
events after every scheduler step (``Scheduler.after_step``, where sglang 0.5.23 publishes) to
the event bus and the ``--kv-events`` log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import simpy
import torch

from radixbench.cache.kv_events import KVEventConfig
from radixbench.sim.accounting import kv_account
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.kv_event_log import KVEventLog
from radixbench.sim.request import Req
from radixbench.sim.run import build_server

__all__ = ["Instance"]


class Instance:
    """Server ``index`` of a cluster. ``done``: its finished (and rejected) requests;
    ``outstanding`` / ``outstanding_tokens``: requests routed here and not finished, and their
    input + output tokens; ``processed``: requests routed here so far."""

    def __init__(
        self,
        index: int,
        env: simpy.Environment,
        cfg: SimConfig,
        variant: Variant,
        device: torch.device,
        on_done: Callable[[Instance, Req], None],
        kv_events: KVEventConfig | None = None,
        publish: Callable[[int, Sequence[Any]], None] | None = None,
        log: KVEventLog | None = None,
    ) -> None:
        self.index, self.env = index, env
        self.done: list[Req] = []
        self.outstanding = self.outstanding_tokens = self.processed = 0
        self._on_done = on_done
        server = build_server(env, cfg, variant, device, self._finished, kv_events)
        self.allocator, self.pool = server.allocator, server.pool
        self.cache, self.rec, self.sched = server.cache, server.rec, server.sched
        self.capacity = self.allocator.size
        if kv_events is not None and (publish is not None or log is not None):
            self.sched.after_step = self._drainer(variant.name, publish, log)
        env.process(self.sched.loop())

    def _drainer(
        self,
        name: str,
        publish: Callable[[int, Sequence[Any]], None] | None,
        log: KVEventLog | None,
    ) -> Callable[[], None]:
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
        self._on_done(self, req)

    def enqueue(self, req: Req) -> None:
        """Accept a routed request (counted outstanding until it finishes)."""
        self.outstanding += 1
        self.outstanding_tokens += req.input_len + req.output_len
        self.processed += 1
        self.sched.enqueue(req)

    def close(self) -> None:
        """No more requests will come: the scheduler ends when its work is done."""
        self.sched.close()

    def kv_used_tokens(self) -> int:
        return self.capacity - self.allocator.available_size()

    def check_kv(self) -> None:
        """The KV pool adds up (``sim.accounting.kv_account``; raises on a leak)."""
        kv_account(self.cache, self.sched.live_requests())
