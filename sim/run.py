"""Run one variant of a scenario: trace requests in, per-request and per-op tables out."""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter_ns
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
from radixbench.sim.config import HICACHE_AXIS, SimConfig, Variant
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.kv_event_log import KVEventLog
from radixbench.sim.metrics import max_gaps, serving_metrics, token_gaps
from radixbench.sim.records import RecordLog
from radixbench.sim.request import Req
from radixbench.sim.scheduler import Scheduler
from radixbench.sim.tier_metrics import REQUEST_TIER_COLUMNS, request_columns, run_metrics
from radixbench.sim.tiers import TIER_SCHEMA
from radixbench.sim.transfers import TRANSFER_SCHEMA
from radixbench.workloads.tokens import block_tokens
from radixbench.workloads.trace import TraceRequest


@dataclass(frozen=True, slots=True)
class VariantResult:
    """``requests``/``ops``/``timeseries``: the per-request, per-op and per-step tables;
    ``metrics``: the serving metrics (one ``metrics`` row, docs/CONTRACTS.md); ``sim_end_s``:
    simulated time of the last event; ``events``: simpy events processed; ``wall_s``: wall
    time spent stepping this simulation (s)."""

    variant: str
    requests: pd.DataFrame
    ops: pd.DataFrame
    sim_end_s: float
    timeseries: pd.DataFrame
    metrics: dict[str, Any]
    events: int
    wall_s: float
    #: further tables by stem: with HiCache ``transfers`` and ``tiers``
    #: (``radixbench.sim.tier_metrics``); empty without
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


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


def _request_frame(variant: str, reqs: Sequence[Req]) -> pd.DataFrame:
    df = pd.DataFrame(
        {
            "rid": [r.rid for r in reqs],
            "arrival_s": [r.arrival_s for r in reqs],
            "input_len": [r.input_len for r in reqs],
            "output_len": [r.output_len for r in reqs],
            "prefix_hit_tokens": [r.prefix_hit_tokens for r in reqs],
            "first_token_s": [r.first_token_s for r in reqs],
            "finish_s": [r.finish_s for r in reqs],
            "status": [r.status for r in reqs],
            "retractions": [r.retractions for r in reqs],
            "itl_max_s": max_gaps(*token_gaps(reqs)),
        }
    )
    df = df.astype(
        {
            "rid": "int64",
            "input_len": "int64",
            "output_len": "int64",
            "prefix_hit_tokens": "int64",
            "arrival_s": "float64",
            "first_token_s": "float64",
            "finish_s": "float64",
            "retractions": "int64",
            "itl_max_s": "float64",
        }
    )
    df["ttft_s"] = df["first_token_s"] - df["arrival_s"]
    df["e2e_s"] = df["finish_s"] - df["arrival_s"]
    n_dec = (df["output_len"] - 1).where(df["output_len"] > 1)
    df["tpot_s"] = (df["finish_s"] - df["first_token_s"]) / n_dec
    df.insert(0, "variant", variant)
    return df.sort_values("rid", kind="stable").reset_index(drop=True)


@dataclass(frozen=True, slots=True)
class Server:
    """One simulated server on a simpy environment: its KV ``allocator``, ``pool`` of
    request rows, ``cache`` (instrumented by ``rec``) and ``sched`` (the scheduler process, not
    started)."""

    allocator: Any
    pool: ReqToTokenPool
    cache: Any
    rec: OpRecorder
    sched: Scheduler


def build_server(
    env: simpy.Environment,
    cfg: SimConfig,
    variant: Variant,
    device: torch.device,
    on_finish: Callable[[Req], None],
    kv_events: KVEventConfig | None = None,
) -> Server:
    """A fresh pool, allocator and cache of ``variant``'s implementation and algorithms
    (``radixbench.cache.registry.make_cache``: any registered implementation, driven alike
    through ``PrefixCache``), instrumented by a new :class:`OpRecorder` stamped with
    ``env.now``, and a :class:`Scheduler` over them calling ``on_finish`` per finished or
    rejected request. ``kv_events``: the cache emits KV events in that format (off: None).
    Raises ``ImplError`` / ``ValueError`` when the implementation cannot run ``cfg``."""
    hicache = cfg.hicache_for(dict(variant.extra).get(HICACHE_AXIS))
    if kv_events is not None and hicache is not None:
        # both would be drained from take_actions: the transfers and the events would mix
        raise ValueError(
            "KV events (--kv-events, a cluster) and HiCache cannot run together yet: "
            "leave out one of them"
        )
    allocator = make_allocator(cfg.kv_capacity_tokens, cfg.page_size, device, check_repeats=False)
    pool = ReqToTokenPool(cfg.max_running, cfg.max_context_len_tokens, device)
    cache = make_cache(
        variant.impl,
        pool,
        allocator,
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
    rec = OpRecorder(lambda: float(env.now))
    cache.instrument(rec)
    builder = BatchBuilder(pool, variant.flatten)
    sched = Scheduler(env, cfg, cache, allocator, pool, builder, rec, on_finish)
    return Server(allocator, pool, cache, rec, sched)


class VariantSim:
    """One variant's simulation, steppable so that several can run interleaved.

    Builds one server (:func:`build_server`). A request's prompt token ids (``block_tokens``)
    are made when the scheduler first reads them, at its first admission attempt
    (``Req.on_demand``), not on arrival: the same tokens, but a long waiting queue holds none.
    Deterministic for a given trace and config: in the isolated clock mode nothing measured
    feeds back into the schedule. ``kv_event_log``: with it, the cache emits KV events,
    drained after every scheduler step (as sglang 0.5.23's publisher) and written there as
    instance 0 (``sim.kv_event_log.KVEventLog``).
    """

    def __init__(
        self,
        trace: Sequence[TraceRequest],
        cfg: SimConfig,
        variant: Variant,
        device: torch.device,
        on_request_done: Callable[[], None] | None = None,
        kv_event_log: KVEventLog | None = None,
    ) -> None:
        self.variant = variant
        self.env = env = simpy.Environment()
        self.done: list[Req] = []

        def finished(req: Req) -> None:
            self.done.append(req)
            if on_request_done is not None:
                on_request_done()

        events = None if kv_event_log is None else kv_event_log.config
        server = build_server(env, cfg, variant, device, finished, events)
        self.cache, self.rec, self.sched = server.cache, server.rec, server.sched
        sched = self.sched
        if kv_event_log is not None:
            sched.after_step = kv_event_log.drainer(variant.name, 0, self.cache, env)
        self.cfg = cfg
        self.events = 0
        self.wall_ns = 0

        def arrivals() -> simpy.events.ProcessGenerator:
            for tr in trace:
                delay = tr.arrival_s - env.now
                if delay > 0:
                    yield env.timeout(delay)
                # prompt tokens are made at the first admission attempt, not held while waiting
                expand = partial(block_tokens, tr.hash_ids, tr.input_length)
                req = Req.on_demand(tr.rid, tr.arrival_s, tr.input_length, tr.output_length, expand)
                req.session_id = tr.session_id
                sched.enqueue(req)
            sched.close()

        env.process(arrivals())
        env.process(sched.loop())

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
                        return False
                    env.step()
                return env.peek() != simpy.core.Infinity
            finally:
                self.events += n
                self.wall_ns += perf_counter_ns() - t0

    def _with_axes(self, df: pd.DataFrame) -> pd.DataFrame:
        """``df`` with the variant's axis columns (``Variant.axes``: impl, evictor, matcher,
        flatten, extra axes; string dtype, missing where the implementation runs its own
        algorithm) inserted after ``variant``."""
        for i, (axis, value) in enumerate(self.variant.axes().items(), start=1):
            df.insert(i, axis, pd.Series([value] * len(df), index=df.index, dtype="string"))
        return df

    def result(self) -> VariantResult:
        """The tables and metrics of the run so far; checks the KV pool adds up first
        (``sim.accounting.kv_account``: raises ``KVAccountingError`` on a leak)."""
        kv_account(self.cache, self.sched.live_requests())
        name = self.variant.name
        steps = self.sched.steps.frame(name)
        metrics = serving_metrics(self.done, steps, self.cfg.clock)
        requests = _request_frame(name, self.done)
        tables: dict[str, pd.DataFrame] = {}
        io = self.sched.io
        if self.cfg.hicache is not None:  # HiCache: tier columns, transfers, host occupancy
            order = sorted(self.done, key=lambda r: r.rid)
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
        metrics["events"] = self.events
        metrics["wall_s"] = self.wall_ns * 1e-9
        metrics["events_per_s"] = self.events / max(self.wall_ns * 1e-9, 1e-9)
        return VariantResult(
            name,
            self._with_axes(requests),
            self._with_axes(self.rec.frame(name)),
            float(self.env.now),
            self._with_axes(steps),
            {"variant": name, **self.variant.axes(), **metrics},
            self.events,
            self.wall_ns * 1e-9,
            {stem: self._with_axes(df) for stem, df in tables.items()},
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
