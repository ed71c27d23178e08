"""Gateways: G router replicas in front of the instances, and what each of them sees.

A deployment runs several gateway (router) processes behind an L4 balancer; each request
reaches one of them. :class:`Gateways` is that tier: it draws each request's gateway uniformly
at random (seeded), asks that gateway's policy, and records the gateway per request
(``last_gateway``). Each gateway keeps:

* its own policy state (``index = "own"``: its own approximate tree, its own copy of the KV-event
  index), or one state shared by all (``index = "shared"``: one index every gateway queries and
  feeds, as SMG's shared prefix-cache index, smg#2394 / #2438);
* always its own load counts: in-flight requests and tokens it sent and not yet completed, and
  requests it sent (SMG's per-process ``Worker::load`` / ``processed``, the ``(load, processed,
  index)`` min-load key). The engines' own signals (queue, KV use) are the same for all.

Every gateway marks an instance unhealthy during the run's unhealthy windows (``unhealthy``:
``(instance, start s, end s)``, start inclusive, end exclusive): its policy sees only the
eligible (healthy) instances, as SMG's policies gather ``healthy && can_execute`` workers
(lightseekorg/smg ``model_gateway/src/policies/cache_aware.rs:785-804`` @73da68c,
``round_robin.rs:28-44``) and answer None (the gateway's 503) when there is none: the request
is shed. The instance itself keeps serving what it already has (its health check failed; it did
not crash). With one gateway and no windows, every decision and count equals the bare
policy's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from radixbench.cluster.routers.base import SHED, ClusterView, Router, RouteRequest

__all__ = ["GatewayView", "Gateways"]


class GatewayView:
    """One gateway's :class:`~radixbench.cluster.routers.base.ClusterView` over the cluster's
    ``base`` view (bound per decision): its own ``outstanding`` / ``outstanding_tokens`` /
    ``processed`` and the ``eligible`` instances (healthy now)."""

    def __init__(self, n: int, windows: Sequence[tuple[int, float, float]]) -> None:
        self.n = n
        self.outstanding = [0] * n
        self.outstanding_tokens = [0] * n
        self.processed = [0] * n
        self.windows = [(int(i), float(a), float(b)) for i, a, b in windows]
        self.eligible = list(range(n))
        self.base: ClusterView | None = None

    def bind(self, base: ClusterView) -> None:
        """Use ``base`` for the engines' signals and time; recompute ``eligible``."""
        self.base = base
        if self.windows:
            now = base.now
            down = {i for i, a, b in self.windows if a <= now < b}
            self.eligible = [i for i in range(self.n) if i not in down]

    def healthy(self, i: int) -> bool:
        return i in self.eligible

    @property
    def now(self) -> float:
        assert self.base is not None
        return self.base.now

    def waiting(self, i: int) -> int:
        assert self.base is not None
        return self.base.waiting(i)

    def waiting_tokens(self, i: int) -> int:
        assert self.base is not None
        return self.base.waiting_tokens(i)

    def running(self, i: int) -> int:
        assert self.base is not None
        return self.base.running(i)

    def kv_usage(self, i: int) -> float:
        assert self.base is not None
        return self.base.kv_usage(i)

    def kv_used_tokens(self, i: int) -> int:
        assert self.base is not None
        return self.base.kv_used_tokens(i)


def gateway_seed(seed: int, g: int) -> int:
    """The seed of gateway ``g``'s policy (gateway 0 keeps the run's: one gateway decides as
    the bare policy does)."""
    return seed if g == 0 else (seed * 1_000_033 + g) % (1 << 63)


class Gateways:
    """``count`` gateways running ``make(seed)`` policies (module docstring). Quacks like a
    :class:`~radixbench.cluster.routers.base.Router`; ``last_gateway`` / ``predicted_tokens``:
    of the last decision; ``stats``: the policies' decision counts summed."""

    def __init__(
        self,
        make: Callable[[int], Router],
        n: int,
        seed: int,
        count: int = 1,
        shared: bool = False,
        unhealthy: Sequence[tuple[int, float, float]] = (),
    ) -> None:
        if count < 1:
            raise ValueError(f"gateways must be >= 1, got {count}")
        first = make(seed)
        self.policies = (
            [first] * count
            if shared
            else [first] + [make(gateway_seed(seed, g)) for g in range(1, count)]
        )
        self.unique = list({id(p): p for p in self.policies}.values())
        self.views = [GatewayView(n, unhealthy) for _ in range(count)]
        self.rng = np.random.default_rng((seed * 7919 + 17) % (1 << 63))
        self.name = first.name
        self.needs_tokens = first.needs_tokens
        self.needs_events = first.needs_events
        self.exact_events = getattr(first, "exact_events", False)
        self.owner: dict[int, tuple[int, int]] = {}  # rid -> (gateway, tokens)
        self.last_gateway = 0
        self.predicted_tokens = -1
        self.shed = 0

    @property
    def stats(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.unique:
            for k, v in getattr(p, "stats", {}).items():
                out[k] = out.get(k, 0) + v
        out["shed"] = self.shed
        return out

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        g = int(self.rng.integers(len(self.views))) if len(self.views) > 1 else 0
        gv, policy = self.views[g], self.policies[g]
        gv.bind(view)
        i = policy.route(req, gv) if gv.eligible else SHED
        self.last_gateway = g
        self.predicted_tokens = getattr(policy, "predicted_tokens", -1)
        if i == SHED:
            self.shed += 1
            return SHED
        tokens = req.input_len + req.output_len
        gv.outstanding[i] += 1
        gv.outstanding_tokens[i] += tokens
        if not getattr(policy, "skip_processed", False):
            gv.processed[i] += 1
        self.owner[req.rid] = (g, tokens)
        return i

    def on_events(self, instance: int, events: Sequence[Any]) -> None:
        for p in self.unique:
            p.on_events(instance, events)

    def on_dispatch(self, instance: int, req: Any) -> None:
        """The request object dispatched to ``instance`` (a policy reading its response
        stream, e.g. its first token, gets it through its own ``on_dispatch``)."""
        g = self.owner[req.rid][0]
        hook = getattr(self.policies[g], "on_dispatch", None)
        if hook is not None:
            hook(instance, req)

    def on_finish(self, instance: int, rid: int) -> None:
        g, tokens = self.owner.pop(rid)
        gv = self.views[g]
        gv.outstanding[instance] -= 1
        gv.outstanding_tokens[instance] -= tokens
        self.policies[g].on_finish(instance, rid)
