"""Run one variant of a scenario: trace requests in, per-request and per-op tables out
(``sim.result``)."""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from time import perf_counter_ns
from typing import Any

import pandas as pd
import simpy
import torch

from radixbench.cache.kv_events import KVEventConfig
from radixbench.sim.clock import SimEnvironment
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.heap import trim_heap
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.kv_event_log import KVEventLog
from radixbench.sim.metrics import serving_metrics
from radixbench.sim.parted import PartedTable
from radixbench.sim.records import RecordLog
from radixbench.sim.request import Req
from radixbench.sim.result import VariantResult, request_frame, with_axes
from radixbench.sim.scheduler import Scheduler
from radixbench.sim.server import Server
from radixbench.sim.tier_metrics import REQUEST_TIER_COLUMNS, request_columns, run_metrics
from radixbench.sim.tiers import TIER_SCHEMA
from radixbench.sim.transfers import TRANSFER_SCHEMA
from radixbench.workloads.tokens import block_tokens
from radixbench.workloads.trace import TraceRequest

#: Rows a server's op or step log holds in memory before moving them to disk.
SPILL_ROWS = 1 << 16


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (``gc.disable``), then restore its
    previous state. Objects are still freed by reference counting as before; only cycle
    collections wait until the block ends. A simulation allocates millions of short-lived
    objects (keys, tensors, token arrays) and no reference cycles that die young (over the
    whole Mooncake trace the collector, left on, ran 201 times in 0.13 s and freed nothing),
    so results are unchanged and the measured ns of a cache operation never hold a
    collection pause. A cache plugin that leaks cycles holds them until the block ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available else cpu. Raises ``ValueError`` for an unknown name or
    for ``cuda`` on a machine without a usable CUDA device."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA device is available to torch")
        return torch.device("cuda")
    raise ValueError(f"unknown device {name!r}; known: auto, cpu, cuda")


#: Where an arriving request goes: ``dispatch(tr) -> (server index, request, hold_s)``: the
#: request reaches that server ``hold_s`` (s, >= 0) of simulated time later (a router's
#: measured decision time, when it is coupled to the clock). A negative index refuses it (a
#: gateway that finds no healthy server sheds it): it is done at once, status ``rejected``.
Dispatch = Callable[[TraceRequest], tuple[int, Req, float]]


def trace_request(tr: TraceRequest) -> Req:
    """The simulator's request for trace entry ``tr``; its prompt token ids (``block_tokens``)
    are made at its first admission attempt (``Req.on_demand``), not held while it waits."""
    expand = partial(block_tokens, tr.hash_ids, tr.input_length)
    return Req.on_demand(tr.rid, tr.arrival_s, tr.input_length, tr.output_length, expand)


def _one_server(tr: TraceRequest) -> tuple[int, Req, float]:
    return 0, trace_request(tr), 0.0


class VariantSim:
    """One variant's simulation, steppable so that several can run interleaved: the one server
    loop, for one server and for N behind a router alike.

    ``instances`` :class:`~radixbench.sim.server.Server` s on one simpy environment, fed by one
    arrival process that takes the trace in order, waits for each request's arrival, asks
    ``dispatch`` where it goes (default: the one server; a cluster passes its router) and hands
    it over; before each wait it tells every server when the next request may come, which
    bounds their schedulers' decode runs (``sim.scheduler``; ``coalesce=False``: every decode
    step its own event). Deterministic for a given trace and config: in the isolated clock
    mode nothing measured feeds back into the schedule. ``on_request_done()``: per finished or
    rejected request; ``on_done(server, req)``: the same with its server (a router's
    bookkeeping). A request ``dispatch`` refuses (index < 0) is rejected on arrival, counted
    in :attr:`done` and ``on_request_done``, and reaches no server. KV events: with
    ``kv_event_log`` every server's cache emits them in the log's format, drained after every
    scheduler step (as sglang 0.5.23's publisher) and written there with the server's index;
    ``kv_events`` / ``publish`` set the format and a publisher (a cluster's event bus) instead
    or as well.
    """

    def __init__(
        self,
        trace: Sequence[TraceRequest],
        cfg: SimConfig,
        variant: Variant,
        device: torch.device,
        on_request_done: Callable[[], None] | None = None,
        kv_event_log: KVEventLog | None = None,
        *,
        instances: int = 1,
        dispatch: Dispatch | None = None,
        on_done: Callable[[Server, Req], None] | None = None,
        kv_events: KVEventConfig | None = None,
        publish: Callable[[int, Sequence[Any]], None] | None = None,
        coalesce: bool = True,
    ) -> None:
        self.variant, self.cfg = variant, cfg
        self.env = env = SimEnvironment()
        self.events = 0
        self.wall_ns = 0
        self.refused: list[Req] = []
        self._on_request_done = on_request_done

        def finished(server: Server, req: Req) -> None:
            if on_done is not None:
                on_done(server, req)
            if on_request_done is not None:
                on_request_done()

        if kv_events is None and kv_event_log is not None:
            kv_events = kv_event_log.config
        self.servers = [
            Server(env, cfg, variant, device, i, finished, kv_events, publish, kv_event_log,
                   coalesce)
            for i in range(instances)
        ]  # fmt: skip
        env.process(self._arrivals(trace, dispatch or _one_server))

    def _arrivals(self, trace: Sequence[TraceRequest], dispatch: Dispatch) -> Any:
        env, servers = self.env, self.servers
        for tr in trace:
            delay = tr.arrival_s - env.now
            if delay > 0:
                at = env.now + delay  # the time simpy gives the timeout
                for s in servers:
                    s.next_arrival_at(at)
                yield env.timeout(delay)
            i, req, hold = dispatch(tr)
            req.session_id = tr.session_id
            if i < 0:
                req.status = "rejected"
                self.refused.append(req)
                if self._on_request_done is not None:
                    self._on_request_done()
                continue
            if hold > 0:
                at = env.now + hold
                for s in servers:
                    s.next_arrival_at(at)
                yield env.timeout(hold)
            servers[i].enqueue(req)
        for s in servers:
            s.close()

    @property
    def cache(self) -> Any:
        """The first server's cache (what code runs: every server runs the same)."""
        return self.servers[0].cache

    @property
    def sched(self) -> Scheduler:
        """The first server's scheduler (tests hook into it)."""
        return self.servers[0].sched

    @property
    def rec(self) -> OpRecorder:
        """The first server's op recorder."""
        return self.servers[0].rec

    @property
    def done(self) -> list[Req]:
        """Every finished (and rejected) request, server by server, then those the dispatch
        refused."""
        return [r for s in self.servers for r in s.done] + self.refused

    def step(self, max_events: int) -> bool:
        """Process up to ``max_events`` simpy events; ``False`` once nothing is left. Runs
        under :func:`paused_gc` and ``torch.no_grad()``, as sglang 0.5.23's scheduler loop
        (``event_loop_normal`` under ``DynamicGradMode``: ``no_grad`` unless
        ``SGLANG_ENABLE_TORCH_INFERENCE_MODE`` is set), so tensor ops skip autograd's
        bookkeeping there as here."""
        env = self.env
        t0 = perf_counter_ns()
        n = 0
        with paused_gc(), torch.no_grad():
            try:
                for n in range(1, max_events + 1):
                    if env.peek() == simpy.core.Infinity:
                        n -= 1
                        break
                    env.step()
                more = env.peek() != simpy.core.Infinity
                self.spill_logs()  # not after a failed step: its error is the one to see
                return more
            finally:
                self.events += n
                self.wall_ns += perf_counter_ns() - t0

    def spill_logs(self) -> None:
        """Move each server's op and step rows to disk once :data:`SPILL_ROWS` are held in
        memory (``RecordLog.spill``: a whole trace behind N instances logs millions of rows,
        read back chunk by chunk when the tables are written), and after a move give the
        heap's free pages back (``sim.heap.trim_heap``: ~13 ms, once per
        :data:`SPILL_ROWS` rows of a log). Between event slices: no cache call is timed."""
        moved = False
        for s in self.servers:
            moved = s.rec.spill(SPILL_ROWS) | s.step_log.spill(SPILL_ROWS) | moved
        if moved:
            trim_heap()

    def run_metrics(self) -> dict[str, Any]:
        """``events`` (simpy events processed), ``wall_s`` (s spent stepping), ``events_per_s``."""
        wall = self.wall_ns * 1e-9
        return {
            "events": self.events,
            "wall_s": wall,
            "events_per_s": self.events / max(wall, 1e-9),
        }

    def result(self) -> VariantResult:
        """The tables and metrics of the run so far (one server; a cluster builds its own from
        :attr:`servers`); checks the KV pool adds up first (``sim.accounting.kv_account``:
        raises ``KVAccountingError`` on a leak)."""
        server = self.servers[0]
        server.check_kv()
        name = self.variant.name
        done = server.done
        v = self.variant
        steps = PartedTable.of([server.step_log], name, v.axes())
        metrics = serving_metrics(done, steps, self.cfg.clock)
        requests = request_frame(name, done)
        tables: dict[str, pd.DataFrame] = {}
        io = server.sched.io
        if self.cfg.hicache is not None:  # HiCache: tier columns, transfers, host occupancy
            order = sorted(done, key=lambda r: r.rid)
            for col, values in request_columns(order).items():
                requests[col] = pd.Series(
                    values, index=requests.index, dtype=REQUEST_TIER_COLUMNS[col]
                )
            if io is not None:
                tables["transfers"] = io.engine.log.frame(name)
                tables["tiers"] = io.steps.frame(name)
            else:  # a variant with HiCache off (``hicache=off``): no transfers
                tables["transfers"] = RecordLog(TRANSFER_SCHEMA).frame(name)
                tables["tiers"] = RecordLog(TIER_SCHEMA).frame(name)
            metrics.update(
                run_metrics(
                    requests, tables["transfers"], tables["tiers"], self.cfg.host_link_bytes_s,
                    self.cfg.hicache.duplex,
                )
            )  # fmt: skip
        metrics.update(self.run_metrics())
        return VariantResult(
            name,
            with_axes(v, requests),
            PartedTable.of([server.rec], name, v.axes()),
            float(self.env.now),
            steps,
            {"variant": name, **v.axes(), **metrics},
            self.events,
            self.wall_ns * 1e-9,
            {stem: with_axes(v, df) for stem, df in tables.items()},
        )


def run_variant(
    trace: Sequence[TraceRequest],
    cfg: SimConfig,
    variant: Variant,
    device: torch.device,
    on_request_done: Callable[[], None] | None = None,
) -> VariantResult:
    """Simulate ``trace`` under one variant to the end (see ``VariantSim``)."""
    sim = VariantSim(trace, cfg, variant, device, on_request_done)
    while sim.step(1 << 30):
        pass
    return sim.result()


def run_interleaved(
    sims: Sequence[VariantSim], slice_events: int = 64, seed: int = 0
) -> list[VariantResult]:
    """Advance all ``sims`` in rounds, ``slice_events`` events each per round, until all are
    done, in counterbalanced orders: every other round runs them in an order shuffled by a
    ``random.Random(seed)`` (the same orders for the same seed), the round after it in that
    order reversed, so whatever ran right before a variant in one round runs right after it
    in the next.

    Interleaving spreads any background load on the machine evenly over the variants, so the
    ratios measured in one run compare like with like. The order is shuffled because a slice
    run right after a slice of identical code runs faster (the caches and the interpreter's
    specialisations are warm): in a fixed order the baseline, run right after its A/A replica
    at every round's wrap, read 0.5-0.8 % faster than it (paired calls of the demo; 0.992-0.994
    with the replica just before the baseline, 1.005-1.007 just after it, 0.999-1.001 with
    neither next to the other), and the A/A noise floor called identical code slower. Results
    are in the order of ``sims``.
    """
    rng = random.Random(seed)
    live = list(sims)
    last: list[VariantSim] | None = None
    while live:
        if last is None:
            order = list(live)
            rng.shuffle(order)
        else:
            order = [s for s in reversed(last) if s in live]
        last = order if last is None else None
        done = [s for s in order if not s.step(slice_events)]
        live = [s for s in live if s not in done]
    return [s.result() for s in sims]
