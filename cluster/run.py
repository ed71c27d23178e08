"""A cluster run of one variant: N instances behind G gateways running one router policy, in
one simpy environment.

:class:`ClusterSim` runs the one server loop of :class:`~radixbench.sim.run.VariantSim` with N
servers and the variant's gateways (``ClusterSpec.router``: the ``router`` and ``gateways``
axes, ``routers.gateway.Gateways``) as its dispatch, steppable the same way (``step`` /
``result``), so ``compare`` interleaves router variants as it interleaves cache variants. The
variant's ``router`` axis names the policy; every instance is a
:class:`~radixbench.sim.server.Server` running the variant's cache implementation and
algorithms with the scenario's ``SimConfig``, used through its public surface only. The arrival
process takes the trace's requests in arrival order: for each the router makes the prompt
tokens (when the policy reads them), asks the policy (``route``), timing the call
with ``perf_counter_ns`` into its own op recorder (op ``route``: key_len = input tokens, result
= the instance), and hands the request to the instance (and to the policy, ``on_dispatch``:
Dynamo's router reads its first token; the request keeps the tokens the router made only when
that instance has no queue: one that waits makes them again at admission, so a queue of
thousands holds no prompts, as one server's); a request the gateway refuses (no healthy instance,
or cache-aware's overload vetoes: ``SHED``) is shed (instance -1, status ``rejected``, no
``route`` row); with ``couple_router_time`` the measured decision time passes on the simulated
clock first, so it enters TTFT (decisions are serial, as in one router process). KV events of
the instances reach event-fed routers through the :class:`~radixbench.cluster.bus.EventBus`.

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
from radixbench.cluster.routers.base import SHED, RouteRequest
from radixbench.cluster.spec import ClusterSpec
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.kv_event_log import KVEventLog
from radixbench.sim.metrics import serving_metrics
from radixbench.sim.parted import PartedTable
from radixbench.sim.request import Req
from radixbench.sim.result import VariantResult, request_frame, with_axes
from radixbench.sim.run import VariantSim
from radixbench.sim.server import Server
from radixbench.workloads.tokens import block_tokens
from radixbench.workloads.trace import TraceRequest

__all__ = ["ClusterSim", "router_seed"]

_NO_TOKENS = array("q")


def router_seed(seed: int, router: str) -> int:
    """The seed of a router's random draws: the run's seed and the router's name."""
    return (seed * 1_000_003 + zlib.crc32(router.encode())) % (1 << 63)


class _View:
    """The router's :class:`~radixbench.cluster.routers.base.ClusterView` of ``servers``."""

    def __init__(self, env: simpy.Environment, servers: list[Server]) -> None:
        self.env, self.inst, self.n = env, servers, len(servers)
        self.outstanding = [0] * self.n
        self.outstanding_tokens = [0] * self.n
        self.processed = [0] * self.n
        self.eligible = list(range(self.n))  # health windows: each gateway's own view

    @property
    def now(self) -> float:
        return float(self.env.now)

    def waiting(self, i: int) -> int:
        return self.inst[i].waiting()

    def waiting_tokens(self, i: int) -> int:
        return self.inst[i].waiting_tokens()

    def running(self, i: int) -> int:
        return self.inst[i].running()

    def kv_used_tokens(self, i: int) -> int:
        return self.inst[i].kv_used_tokens()

    def kv_usage(self, i: int) -> float:
        inst = self.inst[i]
        return inst.kv_used_tokens() / inst.capacity


class ClusterSim:
    """``spec.instances`` instances of ``variant`` behind its ``router`` axis's policy.
    ``on_request_done``: called per finished request; ``kv_event_log``: also write every
    published batch there; ``coalesce``: the servers' decode runs (``sim.scheduler``).
    Raises ``ValueError`` when the variant has no ``router`` axis."""

    def __init__(
        self,
        trace: Sequence[TraceRequest],
        cfg: SimConfig,
        variant: Variant,
        device: torch.device,
        spec: ClusterSpec,
        on_request_done: Callable[[], None] | None = None,
        kv_event_log: KVEventLog | None = None,
        coalesce: bool = True,
    ) -> None:
        axes = dict(variant.extra)
        if "router" not in axes:
            raise ValueError(f"variant {variant.name!r} has no router axis")
        name = axes["router"]
        self.variant, self.cfg, self.spec = variant, cfg, spec
        seed = router_seed(cfg.seed, name)
        self.router = router = spec.router(axes, seed, cfg.page_size)
        events = None
        if spec.kv_events and (router.needs_events or kv_event_log is not None):
            events = kv_event_log.config if kv_event_log is not None else KVEventConfig()
            events = events.with_format(spec.dynamo_format)
        self.rec = OpRecorder()  # rows written by _route, stamped with env.now
        self.routed: dict[int, int] = {}
        self.predicted: dict[int, int] = {}
        self.gateway: dict[int, int] = {}
        self._load_t: list[float] = []
        self._load: array = array("q")
        self._tokens_needed = router.needs_tokens
        self.sim = VariantSim(
            trace, cfg, variant, device, on_request_done, kv_event_log if events else None,
            instances=spec.instances, dispatch=self._route, on_done=self._done,
            kv_events=events, publish=self._publish, coalesce=coalesce,
        )  # fmt: skip
        self.env = env = self.sim.env
        self.bus = EventBus(env, spec.event_delay_s, spec.event_loss, np.random.default_rng(seed))
        if router.needs_events:
            self.bus.subscribe(router.on_events, exact=getattr(router, "exact_events", False))
        self.instances = self.sim.servers
        self.view = _View(env, self.instances)

    def _publish(self, instance: int, events: Sequence[Any]) -> None:
        if self.router.needs_events:
            self.bus.publish(instance, events)

    @property
    def cache(self) -> Any:
        """The first instance's cache (what code runs: every instance runs the same)."""
        return self.sim.cache

    @property
    def events(self) -> int:
        """Simpy events processed so far."""
        return self.sim.events

    @property
    def wall_ns(self) -> int:
        """ns spent stepping so far."""
        return self.sim.wall_ns

    def step(self, max_events: int) -> bool:
        """Process up to ``max_events`` simpy events (``VariantSim.step``)."""
        return self.sim.step(max_events)

    def _done(self, inst: Server, req: Req) -> None:
        v = self.view
        v.outstanding[inst.index] -= 1
        v.outstanding_tokens[inst.index] -= req.input_len + req.output_len
        self.router.on_finish(inst.index, req.rid)

    def _route(self, tr: TraceRequest) -> tuple[int, Req, float]:
        """The arrival step's dispatch: route ``tr`` (timed, op ``route``), count it, and say
        how long the decision holds it when coupled to the clock."""
        router, view, rec, env = self.router, self.view, self.rec, self.env
        tokens_needed = self._tokens_needed
        tokens = block_tokens(tr.hash_ids, tr.input_length) if tokens_needed else _NO_TOKENS
        rq = RouteRequest(tr.rid, tokens, tr.input_length, tr.output_length, tr.arrival_s)
        t0 = perf_counter_ns()
        i = router.route(rq, view)
        ns = perf_counter_ns() - t0
        self.gateway[tr.rid] = router.last_gateway
        if i == SHED:  # refused (no instance it may route to): recorded rejected
            self.routed[tr.rid] = self.predicted[tr.rid] = -1
            again = partial(block_tokens, tr.hash_ids, tr.input_length)
            shed = Req.on_demand(tr.rid, tr.arrival_s, tr.input_length, tr.output_length, again)
            return SHED, shed, 0.0
        if not 0 <= i < view.n:
            raise RuntimeError(f"router {router.name} chose instance {i} of {view.n}")
        rec.add("route", ns, tr.input_length, i, 0, 0, 0, float(env.now))
        self.routed[tr.rid] = i
        self.predicted[tr.rid] = getattr(router, "predicted_tokens", -1)
        view.outstanding[i] += 1
        view.outstanding_tokens[i] += tr.input_length + tr.output_length
        view.processed[i] += 1
        self._load_t.append(float(env.now))
        self._load.extend(view.outstanding)
        hold = ns * 1e-9 if self.spec.couple_router_time and ns > 0 else 0.0
        if tokens_needed and self.instances[i].waiting() == 0:
            expand: Callable[[], array] = partial(_same, tokens)  # admitted at once, likely
        else:  # it joins a queue: its prompt is made again at admission, not held meanwhile
            expand = partial(block_tokens, tr.hash_ids, tr.input_length)
        req = Req.on_demand(tr.rid, tr.arrival_s, tr.input_length, tr.output_length, expand)
        router.on_dispatch(i, req)  # a policy reading the response stream keeps the request
        return i, req, hold

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
        have instance -1, and so do shed requests; requests also ``gateway``: the gateway that
        routed it, and ``predicted_hit_tokens``: the prefix the router expected the chosen
        instance to hold, NaN where it made no prediction) and metrics, with the
        cluster's own: ``router_<branch>`` decision counts (cache-aware), ``instances``,
        ``load_imbalance`` (time-weighted mean over decisions of max / mean outstanding),
        ``route_p50_us`` / ``route_p99_us`` (decision time), ``events_published`` /
        ``events_lost`` (batches). Checks every instance's KV pool first."""
        for inst in self.instances:
            inst.check_kv()
        name = self.variant.name
        done = self.sim.done
        reqs = request_frame(name, done)
        reqs = self._with_instance(reqs, [self.routed[r] for r in reqs["rid"]])
        reqs["gateway"] = pd.Series([self.gateway[r] for r in reqs["rid"]], reqs.index, "int64")
        pred = pd.Series(
            [self.predicted[r] for r in reqs["rid"]], index=reqs.index, dtype="float64"
        )
        reqs["predicted_hit_tokens"] = pred.where(pred >= 0)
        index = [inst.index for inst in self.instances]
        v = self.variant
        axes = v.axes()
        steps = PartedTable.of([i.step_log for i in self.instances], name, axes, "instance", index)
        ops = PartedTable.of(
            [*(i.rec for i in self.instances), self.rec], name, axes, "instance", [*index, -1]
        )
        metrics = serving_metrics(done, steps, self.cfg.clock)
        metrics.update(self._cluster_metrics(ops))
        metrics.update(self.sim.run_metrics())
        return VariantResult(
            name,
            with_axes(v, reqs),
            ops,
            float(self.env.now),
            steps,
            {"variant": name, **axes, **metrics},
            self.events,
            self.wall_ns * 1e-9,
        )

    def _cluster_metrics(self, ops: PartedTable) -> dict[str, Any]:
        n = self.spec.instances
        load = np.frombuffer(self._load, dtype=np.int64).reshape(-1, n).astype(np.float64)
        mean = load.mean(axis=1)
        ratio = np.divide(load.max(axis=1), mean, out=np.ones_like(mean), where=mean > 0)
        t = np.asarray(self._load_t, dtype=np.float64)
        w = np.diff(t, append=t[-1]) if t.size else t
        route = ops.frame(["ns"], where={"op": ("route",)})["ns"].to_numpy(np.float64)
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
