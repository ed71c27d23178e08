"""Cache-blind routers: round-robin, random, shortest-queue (requests or tokens), power-of-two.

Each follows the policy of the same name in the SGLang model gateway (lightseekorg/smg
``model_gateway/src/policies/``, read at commit 73da68c): ``round_robin.rs:28-44`` (a counter
modulo the workers), ``random.rs`` (uniform), ``power_of_two.rs:34-110`` (two distinct workers
drawn at random, the lower load wins, the first drawn on ties; load = the backend's KV token
usage when both report it, else in-flight requests). ``shortest-queue`` is the gateway's min-load
pick (``least_loaded``: in-flight requests, ties by requests processed, then index), the
load-only routing of the comparisons; ``shortest-queue-tokens`` weighs the in-flight requests
by their input + output tokens. Each picks among the eligible (healthy) instances of its view,
as SMG's policies among ``get_healthy_worker_indices``, and sheds the request when there is none.
Random draws come from one ``numpy.random.Generator`` seeded by the run (deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from radixbench.cluster.routers.base import SHED, ClusterView, RouteRequest, least_loaded

__all__ = ["PowerOfTwo", "RandomRouter", "RoundRobin", "ShortestQueue", "ShortestQueueTokens"]


@dataclass(frozen=True)
class NoOptions:
    """A router without options."""


class _Blind:
    """Shared plumbing of the cache-blind routers: no tokens, no events."""

    name = ""
    needs_tokens = False
    needs_events = False

    def on_events(self, instance: int, events: Sequence[Any]) -> None:
        pass

    def on_finish(self, instance: int, rid: int) -> None:
        pass


class RoundRobin(_Blind):
    """Instances in turn: a counter modulo the eligible instances (``round_robin.rs:28-44``)."""

    name = "round-robin"
    Options = NoOptions

    def __init__(self, n: int, options: NoOptions, seed: int, page_size: int) -> None:
        self.count = 0

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        elig = view.eligible
        if not elig:
            return SHED
        i = elig[self.count % len(elig)]
        self.count += 1
        return i


class RandomRouter(_Blind):
    """A uniformly random instance (seeded)."""

    name = "random"
    Options = NoOptions

    def __init__(self, n: int, options: NoOptions, seed: int, page_size: int) -> None:
        self.rng = np.random.default_rng(seed)

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        elig = view.eligible
        return elig[int(self.rng.integers(len(elig)))] if elig else SHED


class ShortestQueue(_Blind):
    """The instance with the fewest outstanding requests (ties: fewer processed, lower
    index)."""

    name = "shortest-queue"
    Options = NoOptions

    def __init__(self, n: int, options: NoOptions, seed: int, page_size: int) -> None:
        pass

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        return least_loaded(view)


class ShortestQueueTokens(_Blind):
    """The instance with the fewest outstanding tokens (input + output of its unfinished
    requests; ties: fewer outstanding requests, lower index)."""

    name = "shortest-queue-tokens"
    Options = NoOptions

    def __init__(self, n: int, options: NoOptions, seed: int, page_size: int) -> None:
        pass

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        tok, load = view.outstanding_tokens, view.outstanding
        return min(view.eligible, key=lambda i: (tok[i], load[i], i), default=SHED)


@dataclass(frozen=True)
class PowerOfTwoOptions:
    """``metric``: ``kv_usage`` (the backend's KV token usage, as the gateway when every
    worker reports it) or ``requests`` (in-flight requests, its fallback)."""

    metric: str = "kv_usage"

    def __post_init__(self) -> None:
        if self.metric not in ("kv_usage", "requests"):
            raise ValueError(f"metric must be kv_usage or requests, got {self.metric!r}")


class PowerOfTwo(_Blind):
    """Two distinct random instances; the one with the lower load (the first on ties)."""

    name = "power-of-two"
    Options = PowerOfTwoOptions

    def __init__(self, n: int, options: PowerOfTwoOptions, seed: int, page_size: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.kv = options.metric == "kv_usage"

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        elig = view.eligible
        n = len(elig)
        if n <= 1:
            return elig[0] if elig else SHED
        a = int(self.rng.integers(n))
        a, b = elig[a], elig[(a + 1 + int(self.rng.integers(n - 1))) % n]
        if self.kv:
            la, lb = view.kv_usage(a), view.kv_usage(b)
            return a if la <= lb else b
        return a if view.outstanding[a] <= view.outstanding[b] else b
