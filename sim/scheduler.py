"""Continuous-batching scheduler as one simpy process.

Modeled on the non-overlap event loop of ``Scheduler`` in sglang 0.5.23
(``sglang/srt/managers/scheduler.py``; batch results as ``process_batch_result_prefill`` /
``_decode`` in ``managers/scheduler_components/batch_result_processor.py``), for one GPU and plain
generation requests: no overlap scheduling, mixed chunked prefill, priority preemption, PD
disaggregation, speculative decoding, hierarchical cache or prefill delayers. Differences that
stay are listed in docs/SGLANG-FIDELITY.md.

Each iteration (0.5.23 ``get_next_batch_to_run``) either runs a prefill (extend) step — the chunked
request first, then waiting requests in the ``sched_policy`` order admitted by ``PrefillAdder`` —
or, when nothing is admitted, one decode step of every running request. Before a decode step
``update_running_batch`` checks that the pages the step opens are free (one slot per request when
``page_size`` is 1; evicting if not) and otherwise *retracts* requests (``retract_decode``): fewest
decoded tokens first, longest input on ties; their uncached KV is freed (whole pages), their prefix
unlocked, and they go back to the end of the waiting queue to be re-prefilled with input + output
so far. After every extend step each request that did not finish publishes what it computed
(``RadixCache.checkpoint``, as sglang 0.5.23's ``checkpoint_kv_cache``), so requests arriving
meanwhile can match it; a finished request is released with a final checkpoint, a retracted one
without (``release_kv_cache``). The chunked request is checkpointed right after its extend, in
batch order (a continued chunk is first in its batch); 0.5.23 checkpoints it at the start of the
next iteration (``stash_chunked_request`` in ``get_next_batch_to_run``), after the batch's other
requests, so the order of those inserts (and of their clock readings) can differ. After a
retraction ``new_token_ratio`` jumps to ``(decoded + retract_decode_steps * bs) / max_new`` (0.5.23
divides by ``max_new + 1``) and otherwise decays each decode step; it is not reset when the server
goes idle (0.5.23 ``on_idle`` resets it). KV slots are allocated per token or per page by
``sim.kv_alloc.SlotAllocator`` (0.5.23 ``alloc_for_extend`` / ``alloc_for_decode``).

Step time = cost model forward time (includes ``step_overhead_s``) + in the ``coupled`` clock
mode the measured CPU time of the step's top-level cache operations and batch builds (work done
after a step, e.g. ``release`` of a finished request, is charged to the next step).

Decode runs: a decode step whose end changes nothing the schedule depends on is followed at
once, in the same simpy event, by the next one (``Scheduler.coalesce``, on by default): the
step ends before the next arrival the driver announced (``next_arrival_s``), finishes no
request, leaves no prefill to start (no chunked request, no admission pending), and the free
KV slots cover the most the next step's checks ask for (``bs * page_size``), so nothing is
evicted or retracted and the tree, hence its KV events, does not change; HiCache runs step by
step. Every step of a run still does its own real work at its own time: its slot allocation
and ``ScheduleBatch`` build run and are timed (their op rows stamped with the step's start,
through the recorder's ``StepClock``), its step-log row is written, and its tokens get its
end time; only the simpy event between two steps is skipped, and the loop's per-iteration
hooks (``after_step``, ``before_step``) still run between them. Under the ``coupled`` clock a
step's duration is known only once its work has been measured: each step of a run takes its
own measured CPU (``OpRecorder.take_charge_ns`` right after its work), exactly as step by
step, and the next step starts at its end. Under the isolated clock (the default) with the KV
pool on the CPU, the steps of a run after its first are done in blocks (``sim.decode_block``):
planned with the same checks, then allocated, built and logged as ``[m, bs]`` array operations,
each step charged an equal share of the block's measured allocation and build time. Results are
the same as step by step (the request, step and op tables, the measured ``ns`` aside;
tests/sim/test_coalesce.py runs every bundled scenario both ways, tests/sim/test_decode_block.py
each page size), with fewer simpy events.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import simpy
import torch

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.interface import PrefixCache
from radixbench.sim.admission import get_new_batch_prefill, retract_decode
from radixbench.sim.batch import BatchBuilder
from radixbench.sim.clock import StepClock
from radixbench.sim.config import SimConfig
from radixbench.sim.decode_block import blocks_apply, run_block
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.kv_alloc import SlotAllocator
from radixbench.sim.request import Req
from radixbench.sim.running import RunningArrays
from radixbench.sim.sched_policy import SchedPolicy
from radixbench.sim.tiers import TierDriver
from radixbench.sim.timeseries import StepLog
from radixbench.workloads.tokens import output_tokens


def _locs(reqs: list[Req], loc: torch.Tensor, *_: Any) -> int:
    """A batch build's recorded ``key_len``: the KV slots it writes."""
    return loc.numel()


class Scheduler:
    """Owns the waiting queue, the running batch and the step loop. Simulated time in s.

    ``before_step``: optional callable run with the scheduler at the top of every loop
    iteration, when every live request's KV is consistent (tests check invariants there).
    ``after_step``: optional callable run at the top of every loop iteration too (after the
    previous step's results were processed, before the next batch is formed): where sglang
    0.5.23 publishes the cache's KV events (``publish_kv_events`` at the end of
    ``report_prefill_stats`` / ``report_decode_stats`` and when idle).
    ``clock``: the ``StepClock`` of ``rec`` (decode runs stamp their steps' rows through it);
    without one every decode step is its own event. ``coalesce``: run decode steps in runs
    (module docstring); ``next_arrival_s``: simulated time (s) of the next event that may hand
    this server a request, which a decode run never passes: the driver of the arrivals sets it
    (-inf until it does: every step its own event; +inf after :meth:`close`).
    """

    def __init__(
        self,
        env: simpy.Environment,
        cfg: SimConfig,
        cache: PrefixCache,
        allocator: TokenToKVPoolAllocator,
        pool: ReqToTokenPool,
        builder: BatchBuilder,
        rec: OpRecorder,
        on_finish: Callable[[Req], None],
        clock: StepClock | None = None,
        coalesce: bool = True,
    ) -> None:
        self.env, self.cfg, self.cache = env, cfg, cache
        self.clock = clock
        # decode runs need the clock and an environment that wakes at an exact time
        self._wake_at: Callable[[float], simpy.Event] | None = getattr(env, "timeout_at", None)
        self.coalesce = coalesce and clock is not None and self._wake_at is not None
        self.next_arrival_s = -math.inf
        self.allocator, self.pool, self.builder, self.rec = allocator, pool, builder, rec
        self.on_finish = on_finish
        self.policy = SchedPolicy(cfg.sched_policy, cache, cfg.seed)
        self.steps = StepLog()
        self.waiting: deque[Req] = deque()
        self.arr = RunningArrays()  # the running batch; its Req fields are synced lazily
        self.chunked_req: Req | None = None
        self.new_token_ratio = cfg.init_new_token_ratio
        self.retractions = 0
        self.coupled = cfg.clock == "coupled"
        self.arrivals_done = False
        self.admission_dirty = True  # 0.5.23's ``not running_batch.batch_is_full``
        self._wake: simpy.Event | None = None
        self.slots = SlotAllocator(cache, rec)
        stats = cache.tree_stats
        # the batch builds, timed; without the builder (--no-batch-builder) the rows only
        self._build_extend: Callable[..., Any] = builder.write_extend_rows
        self._build_decode: Callable[..., Any] = builder.write_decode_rows
        if cfg.batch_builder:
            self._build_extend = rec.timed(
                "build_extend", builder.build_extend, stats, _locs, lambda _, r, *__: len(r)
            )
            self._build_decode = rec.timed(
                "build_decode", builder.build_decode, stats, _locs, lambda _, r, *__: len(r)
            )
        self.capacity = allocator.size  # tokens: whole pages only when paged
        # HiCache: the cache's tier entry points, driven as sglang's scheduler drives them
        tiers = cache.tiers
        self.io: TierDriver | None = None
        if tiers is not None:
            self.io = TierDriver(
                env, cache, tiers, cfg.hicache_bytes_per_token, cfg.host_link_bytes_s,
                cfg.hicache.storage if cfg.hicache else None, cfg.model_layers, rec,
                duplex=cfg.hicache.duplex if cfg.hicache else False,
            )  # fmt: skip
        self.before_step: Callable[[Scheduler], None] | None = None
        self.after_step: Callable[[], None] | None = None
        self.paged = self.slots.page_size > 1
        self._decode_time = cfg.cost.decode_time_fn()
        self._ratio_decay = cfg.new_token_ratio_decay  # per decode step
        self._ratio_min = cfg.min_new_token_ratio

    @property
    def running(self) -> list[Req]:
        """The running (decode) batch, in order. Its requests' ``seq_len`` / ``output_ids`` /
        ``token_s`` may lag behind (``self.arr``): call ``self.arr.sync()`` before reading
        them."""
        return self.arr.reqs

    def live_requests(self) -> list[Req]:
        """Requests holding KV between steps: the running batch and the chunked request
        (their fields brought up to date)."""
        self.arr.sync()
        return self.running + ([self.chunked_req] if self.chunked_req is not None else [])

    # ------------------------------------------------------------------ events
    def enqueue(self, req: Req) -> None:
        if self.io is not None:
            self.io.arrived(req)
        self.waiting.append(req)
        self.admission_dirty = True
        self._notify()

    def close(self) -> None:
        self.arrivals_done = True
        self.next_arrival_s = math.inf
        self._notify()

    def _notify(self) -> None:
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    # ------------------------------------------------------------------ helpers
    def _step_time(self, forward_s: float) -> tuple[float, float]:
        """(simulated step duration, measured CPU s of the step) for the clock mode."""
        cpu_s = self.rec.take_charge_ns() * 1e-9
        return (forward_s + cpu_s if self.coupled else forward_s), cpu_s

    def _log(self, step: str, bs: int, new: int, step_s: float, cpu_s: float, now: float) -> None:
        c, cap = self.cache, self.capacity
        self.steps.append(
            now,
            step,
            step_s,
            cpu_s,
            bs,
            new,
            len(self.waiting),
            len(self.arr.reqs),
            cap - self.allocator.available_size(),
            cap,
            c.evictable_size(),
            c.protected_size(),
            self.retractions,
        )

    def _reject(self, req: Req) -> None:
        req.status = "rejected"
        self.on_finish(req)

    # ------------------------------------------------------------------ admission
    def _get_new_batch_prefill(self) -> list[Req]:
        """sglang 0.5.23 ``get_new_batch_prefill``: the extend batch (maybe empty)
        (``sim.admission``)."""
        return get_new_batch_prefill(self)

    # ------------------------------------------------------------------ steps
    def _finish(self, req: Req) -> None:
        req.finish_s = self.env.now
        req.status = "finished"
        # 0.5.23 release_kv_cache(checkpoint=True): the KV of every token but the last sampled
        self.cache.release(req, req.seq_len, True)
        req.release_tokens()
        self.admission_dirty = True
        self.on_finish(req)

    def _publish_chunk(self, req: Req, n: int) -> None:
        """Checkpoint the chunked request's first ``n`` tokens; its next chunk extends from the
        row's first ``n`` slots (the tree's, then its own unaligned tail)."""
        self.cache.checkpoint(req, n)
        req.prefix_indices = self.pool.req_to_token[req.req_pool_idx, :n].to(torch.int64)

    def _prefill(self, batch: list[Req]) -> Generator[simpy.Event, Any, None]:
        prefix = [r.prefix_indices.numel() for r in batch]
        extend = [len(r.fill_ids) - p for r, p in zip(batch, prefix)]
        loc = self.slots.extend(batch, prefix)
        self._build_extend(batch, loc)
        forward_s = self.cfg.cost.prefill_time(extend, prefix)
        if self.io is not None:  # loads back (layer by layer) and blocking copies
            forward_s = self.io.prefill_time(forward_s, batch)[0]
        step_s, cpu_s = self._step_time(forward_s)
        self._log("prefill", len(batch), sum(extend), step_s, cpu_s, float(self.env.now))
        yield self.env.timeout(step_s)
        now = self.env.now
        cache = self.cache
        joined: list[Req] = []
        for r in batch:
            n = r.seq_len = len(r.fill_ids)
            more_chunks = r is self.chunked_req
            if more_chunks:  # publish what is computed so far
                self._publish_chunk(r, n)
                continue
            if not r.output_plan:
                r.output_plan = output_tokens(r.rid, r.output_len)
                r.first_token_s = now
            r.output_ids.append(r.output_plan[len(r.output_ids)])
            r.token_s.append(now)
            r.fill_ids = r.input_ids
            if len(r.output_ids) >= r.output_len:
                self._finish(r)
            else:
                cache.checkpoint(r, n)  # 0.5.23 checkpoint_kv_cache: others can match it now
                joined.append(r)
        self.arr.add(joined)  # the running batch, after the requests already in it

    def _retract_decode(self) -> None:
        """sglang 0.5.23 ``ScheduleBatch.retract_decode`` (``sim.admission``)."""
        retract_decode(self)

    def _decode(self, now: float, fits: bool = False) -> float:
        """Start one decode step of the running batch at simulated time ``now`` (slots, batch
        build, step log); returns its simulated duration (s). ``fits``: the free slots are
        known to cover the step's worst case (:meth:`_run_on`), so ``check_decode_mem`` would
        evict nothing and pass: it is not asked. Per-request state advances in ``self.arr``
        (numpy, O(1) calls per step); a request's ``Req`` fields are synced when it finishes,
        as the per-request loop of 0.5.23's ``process_batch_result_decode`` would have left
        them."""
        arr, slots, builder = self.arr, self.slots, self.builder
        seq = arr.seq_now() if self.paged else None
        if not (fits or slots.decode_fits(arr.reqs, seq)):
            self._retract_decode()
            seq = arr.seq_now() if self.paged else None
        else:
            self.new_token_ratio = max(self.new_token_ratio - self._ratio_decay, self._ratio_min)
        running = arr.reqs
        bs = len(running)
        loc = slots.decode(running, seq, arr.rows)
        meta = arr.decode_inputs(builder.decode_meta(bs))
        self._build_decode(running, loc, meta)
        decode_s = self._decode_time(bs, arr.seq_total + bs)
        if self.io is not None:
            decode_s += self.io.decode_delay()
        step_s, cpu_s = self._step_time(decode_s)
        self._log("decode", bs, bs, step_s, cpu_s, now)
        return step_s

    def _run_on(self, t: float) -> bool:
        """Whether the decode step ending at ``t`` may be followed by the next one in the same
        event (module docstring: nothing that step's end brings can change the schedule)."""
        arr = self.arr
        return (
            t < self.next_arrival_s
            and arr.steps + 1 != arr.next_done
            and self.chunked_req is None
            and not (self.waiting and self.admission_dirty)
            and self.allocator.available_size() >= len(arr.reqs) * self.slots.page_size
        )

    def _decode_run(self) -> float:
        """Start a decode step now and, while :meth:`_run_on` allows, each next one at the end
        of the one before, doing at each end what the loop does there (advance the batch, the
        hooks); returns the simulated end (s) of the last, whose end the loop waits for. The
        steps' rows are stamped with their own start through ``self.clock``."""
        t = float(self.env.now)
        end = t + self._decode(t)
        if self.io is not None:
            return end
        clock = self.clock
        assert clock is not None
        arr = self.arr
        if blocks_apply(self):  # the same steps, as array operations (sim.decode_block)
            m = 1
            while m:
                m, end = run_block(self, end)
            return end
        try:
            while self._run_on(end):
                t = clock.at = end
                arr.advance(t)  # finishes nobody (checked)
                if self.after_step is not None:
                    self.after_step()
                if self.before_step is not None:
                    arr.sync()
                    self.before_step(self)
                end = t + self._decode(t, fits=True)
        finally:
            clock.at = None
        return end

    def _decode_done(self) -> None:
        """The decode step started by :meth:`_decode` ended now: advance the batch, finish the
        requests that sampled their last token (batch order)."""
        arr = self.arr
        done = arr.advance(self.env.now)
        if done:
            for i in done:  # batch order, as the per-request loop
                self._finish(arr.sync_one(i))
            arr.drop(done)

    def loop(self) -> Generator[simpy.Event, Any, None]:
        """The simpy process: runs until arrivals are closed and every request is done."""
        while True:
            if self.after_step is not None:
                self.after_step()
            if self.before_step is not None:
                self.arr.sync()
                self.before_step(self)
            if self.io is not None:
                self.io.poll()  # check_hicache_events
                if self.waiting:
                    self.admission_dirty = True
            # _get_new_batch_prefill returns [] at once unless one of these holds
            if self.chunked_req is not None or (self.waiting and self.admission_dirty):
                batch = self._get_new_batch_prefill()
            else:
                batch = []
            if batch:
                yield from self._prefill(batch)
            elif self.arr.reqs:
                if self.coalesce and self._wake_at is not None:
                    yield self._wake_at(self._decode_run())
                else:
                    yield self.env.timeout(self._decode(float(self.env.now)))
                self._decode_done()
            elif self.arrivals_done and not self.waiting and self.chunked_req is None:
                return
            else:
                self._wake = self.env.event()
                wake_at = self.io.wake_at() if self.io is not None else None
                if wake_at is not None:  # a request waits on I/O: look again when it may end
                    delay = max(wake_at - self.env.now, 1e-6)
                    yield self._wake | self.env.timeout(delay)
                else:
                    yield self._wake
                self._wake = None
