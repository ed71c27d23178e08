"""The scheduler's side of HiCache: when it polls the tiers, what a request waits for, how long
a prefill step takes when it loads KV back.

:class:`TierDriver` is built by the scheduler for a cache that offers the HiCache entry points
(``cache.tiers``, :class:`~radixbench.cache.interface.TierOps`) and calls them where sglang
0.5.23's scheduler does (``managers/scheduler.py``):

* **poll** — at the top of every iteration, ``check_hicache_events`` (``_process_hicache_events``,
  ``:3875-3890``), after the transfer engine has run to now;
* **arrival** — with storage, a request's prefix is matched and the rest prefetched when it
  joins the waiting queue (``_prefetch_kvcache``, ``:3342-3392``);
* **admission** — a waiting request whose prefetch may not be cut yet is skipped this pass
  (``check_prefetch_progress``, ``:4240-4248``); the L3 tokens it brought are popped
  (``pop_prefetch_loaded_span``);
* **load-back** — ``PrefillAdder`` loads a host hit back (``schedule_policy.py:1470-1560``,
  :mod:`radixbench.sim.adder`); the batch's loads start as one operation when it is formed
  (``ready_to_load_host_cache``, ``:4350-4356``);
* **step time** — the forward pass waits for a load layer by layer (layer ``i + 1`` loads while
  layer ``i`` computes; ``LayerDoneCounter``, ``cache_controller.py:83-109``): with ``L``
  layers, compute ``C`` starting at ``s``, a load started at ``t0`` and ending at ``t1``, the
  step ends at ``max(s + C, t0 + (t1 - t0) / L + C, t1 + C / L)`` — it waits only for what the
  compute does not hide. A blocking transfer (``write_back``'s synchronous backup during an
  eviction) delays the step's start.

Per request (``Req.tier``, :class:`TierStats`): prefix tokens hit on the device, loaded from the
host, and of those brought from storage by its prefetch; its prefetch's time, its batch's load
time, and the time it waited on I/O (stalled in its prefill by the load, and held at admission
by its prefetch). Per step (:attr:`TierDriver.steps`): host pool occupancy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import simpy

from radixbench.cache.key import RadixKey
from radixbench.sim.records import RecordLog
from radixbench.sim.request import Req
from radixbench.sim.transfers import TransferEngine

__all__ = ["TierDriver", "TierStats"]

#: One row per scheduler step (stem ``tiers``): host pool and the tiers' work in flight.
TIER_SCHEMA = (
    ("sim_time_s", "float64"),
    ("host_used_tokens", "int64"),
    ("host_capacity_tokens", "int64"),
    ("prefetches", "int64"),
    ("load_tokens", "int64"),
    ("stall_s", "float64"),
)


@dataclass(slots=True)
class TierStats:
    """A request's HiCache record (tokens; seconds)."""

    device_hit: int = 0
    host_hit: int = 0
    storage_hit: int = 0
    prefetched: int = 0
    load_s: float = 0.0
    prefetch_s: float = 0.0
    io_wait_s: float = 0.0
    prefetch_from: float = -1.0
    admitted: bool = False


class TierDriver:
    """HiCache in the scheduler (module docstring). ``cache``: the ``PrefixCache``;
    ``tiers``: its entry points; ``bytes_per_token``, ``host_bytes_s``, ``duplex``,
    ``storage``: the transfer engine's settings; ``layers``: the model's (layer-wise load);
    ``rec``: the op recorder (``check_events`` is timed)."""

    def __init__(
        self,
        env: simpy.Environment,
        cache: Any,
        tiers: Any,
        bytes_per_token: int,
        host_bytes_s: float,
        storage: Any,
        layers: int,
        rec: Any,
        duplex: bool = False,
    ) -> None:
        self.env, self.cache, self.tiers = env, cache, tiers
        self.engine = TransferEngine(
            bytes_per_token, host_bytes_s, cache.page_size, storage, duplex
        )
        self.storage = storage is not None
        self.layers = max(1, layers)
        self.cursor = 0.0
        self.blocked: set[int] = set()
        self.steps = RecordLog(TIER_SCHEMA)
        self._check = rec.timed(
            "check_events", tiers.check_events, cache.tree_stats, lambda: 0, lambda *_: 0
        )

    # ------------------------------------------------------------------ time
    def flush(self) -> float:
        """Start the transfers the cache asked for since the last flush, at the scheduler's
        cursor; returns the cursor (later when one of them blocks the scheduler)."""
        self.cursor = self.engine.submit(self.cache.take_actions(), max(self.cursor, self.env.now))
        return self.cursor

    def poll(self) -> None:
        """Top of a scheduler iteration: run the transfers to now, poll the tiers' events."""
        now = self.env.now
        self.cursor = max(self.cursor, now)
        self.engine.advance(self.cursor)
        self._check()
        self.flush()

    def wake_at(self) -> float | None:
        """When an idle scheduler should look again: a blocked request's next chance (the next
        transfer's end, or its timeout), None when nothing waits on I/O."""
        if not self.blocked:
            return None
        nxt = self.engine.next_time()
        for rid in self.blocked:
            d = self.tiers.prefetch_deadline(rid)
            if d is not None:
                nxt = min(nxt, d + 1e-9)
        return nxt if nxt != float("inf") else None

    # ------------------------------------------------------------------ requests
    def arrived(self, req: Req) -> None:
        """``_prefetch_kvcache``: match the request and prefetch the rest from storage."""
        if not self.storage:
            return
        req.tier = st = TierStats()
        full = req.full_ids()
        key = RadixKey(full, req.extra_key, limit=len(full) - 1)
        match = self.cache.match_prefix(key)
        self.tiers.prefetch(req.rid, match, full[: len(full) - 1], req.extra_key)
        st.prefetch_from = self.env.now
        self.flush()

    def admissible(self, req: Req) -> bool:
        """``check_prefetch_progress``: may ``req`` be admitted now? Records what its prefetch
        brought (``pop_prefetch_loaded_span``) once it may."""
        if not self.storage:
            return True
        st = req.tier
        now = self.env.now
        if not self.tiers.prefetch_ready(req.rid, now):
            self.blocked.add(req.rid)
            self.flush()
            return False
        if st is not None and not st.admitted:
            st.admitted = True
            st.prefetched = self.tiers.pop_prefetch_loaded(req.rid)
            if st.prefetch_from >= 0:
                st.prefetch_s = now - st.prefetch_from
                if req.rid in self.blocked:
                    st.io_wait_s += now - st.prefetch_from
        self.blocked.discard(req.rid)
        self.flush()
        return True

    def admitted(self, req: Req, device: int, loaded: int) -> None:
        """``req`` was admitted with ``device`` tokens hit on the device and ``loaded`` loaded
        back from the host (first admission only)."""
        st = req.tier
        if st is None:
            req.tier = st = TierStats()
        st.device_hit, st.host_hit = device, loaded
        st.storage_hit = min(loaded, st.prefetched)

    # ------------------------------------------------------------------ steps
    def prefill_time(self, forward_s: float, batch: list[Req]) -> tuple[float, float]:
        """The prefill step's duration from now, with its loads started: ``(step s, stall s)``
        (stall: waiting for the load beyond the compute)."""
        self.tiers.start_loading()
        start = self.flush()
        load = self.engine.take_load()
        end = start + forward_s
        stall = 0.0
        tokens = 0
        if load is not None:
            t0, t1 = load
            per_layer_compute = forward_s / self.layers
            end = max(end, t0 + (t1 - t0) / self.layers + forward_s, t1 + per_layer_compute)
            stall = end - (start + forward_s)
            for r in batch:
                st = r.tier
                if st is not None and st.host_hit and st.load_s == 0.0:
                    st.load_s = t1 - t0
                    st.io_wait_s += stall
                    tokens += st.host_hit
        now = self.env.now
        self._log(now, tokens, stall)
        return end - now, stall

    def decode_delay(self) -> float:
        """Seconds a decode step starts late (blocking transfers while allocating)."""
        delay = self.flush() - self.env.now
        self._log(self.env.now, 0, 0.0)
        return delay

    def _log(self, now: float, load_tokens: int, stall: float) -> None:
        s = self.tiers.tier_stats()
        log = self.steps
        log.ints.extend(
            (s["host_used_tokens"], s["host_capacity_tokens"], s["prefetches"], load_tokens)
        )
        log.floats.extend((now, stall))
