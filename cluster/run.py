"""A cluster run of one variant: N instances behind one router, in one simpy environment.

:class:`ClusterSim` is :class:`~radixbench.sim.run.VariantSim` for a cluster, steppable the same
way (``step`` / ``result``), so ``compare`` interleaves router variants as it interleaves cache
variants. The variant's ``router`` axis names the policy; every instance runs the variant's
cache implementation and algorithms with the scenario's ``SimConfig`` (``Instance``). The
router is a simpy process that takes the trace's requests in arrival order: for each it makes
the prompt tokens (when the policy reads them), asks the policy (``route``), timing the call
with ``perf_counter_ns`` into its own op recorder (op ``route``: key_len = input tokens, result
= the instance), and hands the request to the instance; with ``couple_router_time`` the
measured decision time passes on the simulated clock first, so it enters TTFT (decisions are
serial, as in one router process). KV events of the instances reach event-fed routers through
the :class:`~radixbench.cluster.bus.EventBus`.

Determinism: the router's and the bus's random draws come from generators seeded by the run's
seed and the router's name; in the isolated clock without coupling nothing measured feeds back.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Callable, Sequence
from functools import partial
from time import perf_counter_ns
from typing import Any

import numpy as np
import pandas as pd
import simpy
import torch

from radixbench.cache.kv_events import KVEventConfig
from radixbench.cluster.bus import EventBus
from radixbench.cluster.instance import Instance
from radixbench.cluster.routers import make_router
from radixbench.cluster.routers.base import RouteRequest
from radixbench.cluster.spec import ClusterSpec
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.kv_event_log import KVEventLog
from radixbench.sim.metrics import serving_metrics
from radixbench.sim.request import Req
from radixbench.sim.run import VariantResult, VariantSim, _request_frame
from radixbench.workloads.tokens import block_tokens
from radixbench.workloads.trace import TraceRequest

__all__ = ["ClusterSim", "router_seed"]

_NO_TOKENS = array("q")


def router_seed(seed: int, router: str) -> int:
    """The seed of a router's random draws: the run's seed and the router's name."""
    return (seed * 1_000_003 + zlib.crc32(router.encode())) % (1 << 63)


class _View:
    """The router's :class:`~radixbench.cluster.routers.base.ClusterView` of ``instances``."""

    def __init__(self, env: simpy.Environment, instances: list[Instance]) -> None:
        self.env, self.inst, self.n = env, instances, len(instances)
        self.outstanding = [0] * self.n
        self.outstanding_tokens = [0] * self.n
        self.processed = [0] * self.n

    @property
    def now(self) -> float:
        return float(self.env.now)

    def waiting(self, i: int) -> int:
        return len(self.inst[i].sched.waiting)

    def waiting_tokens(self, i: int) -> int:
        return sum(r.input_len for r in self.inst[i].sched.waiting)

    def running(self, i: int) -> int:
        return len(self.inst[i].sched.arr.reqs)

    def kv_used_tokens(self, i: int) -> int:
        return self.inst[i].kv_used_tokens()

    def kv_usage(self, i: int) -> float:
        inst = self.inst[i]
        return inst.kv_used_tokens() / inst.capacity


class ClusterSim:
    """``spec.instances`` instances of ``variant`` behind its ``router`` axis's policy.
    ``on_request_done``: called per finished request; ``kv_event_log``: also write every
    published batch there. Raises ``ValueError`` when the variant has no ``router`` axis."""

    def __init__(
        self,
        trace: Sequence[TraceRequest],
        cfg: SimConfig,
        variant: Variant,
        device: torch.device,
        spec: ClusterSpec,
        on_request_done: Callable[[], None] | None = None,
        kv_event_log: KVEventLog | None = None,
    ) -> None:
        axes = dict(variant.extra)
        if "router" not in axes:
            raise ValueError(f"variant {variant.name!r} has no router axis")
        name = axes["router"]
        self.variant, self.cfg, self.spec = variant, cfg, spec
        self.env = env = simpy.Environment()
        seed = router_seed(cfg.seed, name)
        self.router = router = make_router(
            name, spec.instances, spec.options(name), seed, cfg.page_size
        )
        events = None
        if spec.kv_events and (router.needs_events or kv_event_log is not None):
            events = kv_event_log.config if kv_event_log is not None else KVEventConfig()
            events = events.with_format(spec.dynamo_format)
        self.bus = EventBus(env, spec.event_delay_s, spec.event_loss, np.random.default_rng(seed))
        if router.needs_events:
            self.bus.subscribe(router.on_events, exact=getattr(router, "exact_events", False))
        publish = self.bus.publish if router.needs_events else None
        self.instances: list[Instance] = []
        self.instances = [
            Instance(i, env, cfg, variant, device, self._done, events, publish, kv_event_log)
            for i in range(spec.instances)
        ]
        self.view = view = _View(env, self.instances)
        self.rec = OpRecorder(lambda: float(env.now))
        self.routed: dict[int, int] = {}
        self.predicted: dict[int, int] = {}
        self._on_request_done = on_request_done
        self._load_t: list[float] = []
        self._load: array = array("q")
        self.events = 0
        self.wall_ns = 0
        env.process(self._arrivals(trace, router, view))

    @property
    def cache(self) -> Any:
        """The first instance's cache (what code runs: every instance runs the same)."""
        return self.instances[0].cache

    def _done(self, inst: Instance, req: Req) -> None:
        v = self.view
        v.outstanding[inst.index] -= 1
        v.outstanding_tokens[inst.index] -= req.input_len + req.output_len
        self.router.on_finish(inst.index, req.rid)
        if self._on_request_done is not None:
            self._on_request_done()

    def _arrivals(
        self, trace: Sequence[TraceRequest], router: Any, view: _View
    ) -> simpy.events.ProcessGenerator:
        env, rec, couple = self.env, self.rec, self.spec.couple_router_time
        code = rec.code("route")
        tokens_needed = router.needs_tokens
        for tr in trace:
            delay = tr.arrival_s - env.now
            if delay > 0:
                yield env.timeout(delay)
            tokens = block_tokens(tr.hash_ids, tr.input_length) if tokens_needed else _NO_TOKENS
            rq = RouteRequest(tr.rid, tokens, tr.input_length, tr.output_length, tr.arrival_s)
            t0 = perf_counter_ns()
            i = router.route(rq, view)
            ns = perf_counter_ns() - t0
            if not 0 <= i < view.n:
                raise RuntimeError(f"router {router.name} chose instance {i} of {view.n}")
            rec.floats.append(float(env.now))
            rec.ints.extend((code, ns, tr.input_length, i, 0, 0, 0, rec.top))
            self.routed[tr.rid] = i
            self.predicted[tr.rid] = getattr(router, "predicted_tokens", -1)
            view.outstanding[i] += 1
            view.outstanding_tokens[i] += tr.input_length + tr.output_length
            view.processed[i] += 1
            self._load_t.append(float(env.now))
            self._load.extend(view.outstanding)
            if couple and ns > 0:
                yield env.timeout(ns * 1e-9)
            if tokens_needed:
                expand: Callable[[], array] = partial(_same, tokens)
            else:
                expand = partial(block_tokens, tr.hash_ids, tr.input_length)
            req = Req.on_demand(tr.rid, tr.arrival_s, tr.input_length, tr.output_length, expand)
            req.session_id = tr.session_id
            self.instances[i].enqueue(req)
        for inst in self.instances:
            inst.close()

    step = VariantSim.step

    # ------------------------------------------------------------------ results
    def _with_instance(self, df: pd.DataFrame, values: Any) -> pd.DataFrame:
        df.insert(len(df.columns), "instance", pd.Series(values, index=df.index, dtype="int64"))
        return df

    def load_frame(self) -> pd.DataFrame:
        """Outstanding requests per instance after every routing decision (long format:
        ``variant``, ``sim_time_s``, ``instance``, ``outstanding``)."""
        n = self.spec.instances
        load = np.frombuffer(self._load, dtype=np.int64).reshape(-1, n)
        t = np.repeat(np.asarray(self._load_t, dtype=np.float64), n)
        return pd.DataFrame(
            {
                "variant": self.variant.name,
                "sim_time_s": t,
                "instance": np.tile(np.arange(n, dtype=np.int64), len(self._load_t)),
                "outstanding": load.reshape(-1),
            }
        )

    def result(self) -> VariantResult:
        """The run's tables (each with an ``instance`` column; the router's ``route`` rows
        have instance -1; requests also ``predicted_hit_tokens``: the prefix the router expected
        the chosen instance to hold, NaN where it made no prediction) and metrics, with the
        cluster's own: ``router_<branch>`` decision counts (cache-aware), ``instances``,
        ``load_imbalance`` (time-weighted mean over decisions of max / mean outstanding),
        ``route_p50_us`` / ``route_p99_us`` (decision time), ``events_published`` /
        ``events_lost`` (batches). Checks every instance's KV pool first."""
        for inst in self.instances:
            inst.check_kv()
        name = self.variant.name
        done = [r for inst in self.instances for r in inst.done]
        reqs = _request_frame(name, done)
        reqs = self._with_instance(reqs, [self.routed[r] for r in reqs["rid"]])
        pred = pd.Series(
            [self.predicted[r] for r in reqs["rid"]], index=reqs.index, dtype="float64"
        )
        reqs["predicted_hit_tokens"] = pred.where(pred >= 0)
        steps = [
            self._with_instance(inst.sched.steps.frame(name), inst.index) for inst in self.instances
        ]
        timeseries = pd.concat(steps, ignore_index=True)
        ops = [self._with_instance(inst.rec.frame(name), inst.index) for inst in self.instances]
        ops.append(self._with_instance(self.rec.frame(name), -1))
        ops_df = pd.concat(ops, ignore_index=True)
        metrics = serving_metrics(done, timeseries, self.cfg.clock)
        metrics.update(self._cluster_metrics(ops_df))
        metrics["events"] = self.events
        metrics["wall_s"] = self.wall_ns * 1e-9
        metrics["events_per_s"] = self.events / max(self.wall_ns * 1e-9, 1e-9)
        axes = self.variant.axes()
        with_axes: Callable[[Any, pd.DataFrame], pd.DataFrame] = VariantSim._with_axes
        return VariantResult(
            name,
            with_axes(self, reqs),
            with_axes(self, ops_df),
            float(self.env.now),
            with_axes(self, timeseries),
            {"variant": name, **axes, **metrics},
            self.events,
            self.wall_ns * 1e-9,
        )

    def _cluster_metrics(self, ops: pd.DataFrame) -> dict[str, Any]:
        n = self.spec.instances
        load = np.frombuffer(self._load, dtype=np.int64).reshape(-1, n).astype(np.float64)
        mean = load.mean(axis=1)
        ratio = np.divide(load.max(axis=1), mean, out=np.ones_like(mean), where=mean > 0)
        t = np.asarray(self._load_t, dtype=np.float64)
        w = np.diff(t, append=t[-1]) if t.size else t
        route = ops.loc[ops["op"] == "route", "ns"].to_numpy(np.float64)
        return {
            "instances": n,
            "load_imbalance": float(np.average(ratio, weights=w)) if w.sum() > 0 else 1.0,
            "route_p50_us": float(np.percentile(route, 50) / 1e3) if route.size else 0.0,
            "route_p99_us": float(np.percentile(route, 99) / 1e3) if route.size else 0.0,
            "events_published": self.bus.published,
            "events_lost": self.bus.lost,
            **{f"router_{k}": v for k, v in getattr(self.router, "stats", {}).items()},
        }


def _same(tokens: array) -> array:
    return tokens
