"""What a cluster run is: :class:`ClusterSpec` (instances, routers, their options, KV events,
gateways, unhealthy windows).

A scenario's ``[cluster]`` table (or ``compare --instances N --routers A,B --gateways 1,8``)
gives one. Each router (and, when more than one gateway count is asked for or it is not 1, each
gateway count) becomes a variant with the extra axes ``router``, ``instances`` and ``gateways``
(``Variant.extra``), so the run's tables carry them as columns and the report pairs routers like
any other axis. :meth:`ClusterSpec.router` builds a variant's policy behind its gateways
(:class:`~radixbench.cluster.routers.gateway.Gateways`). Validation raises
:class:`ClusterError`, one line naming the key (or flag) at fault.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from radixbench.cluster.routers import (
    ROUTERS,
    RouterError,
    make_router,
    needs_events,
    router_options,
)
from radixbench.cluster.routers.gateway import Gateways

__all__ = ["ClusterError", "ClusterSpec", "router_variants"]


class ClusterError(ValueError):
    """A cluster setting that cannot be used: ``"<key or flag>: <reason>"``."""


@dataclass(frozen=True)
class ClusterSpec:
    """``instances``: servers behind the router (each a full radixbench server: its own
    scheduler, KV pool, cache, clocks; the scenario's ``[cache]`` / ``[scheduler]`` per
    instance). ``routers``: policy names (``radixbench.cluster.routers.ROUTERS``), one variant
    each. ``router_options``: router name -> option -> value (TOML-typed or text).
    ``kv_events``: the instances' caches emit KV events (needed by ``precise`` / ``oracle``;
    default on); ``dynamo_format``: their ids in the Dynamo namespace format.
    ``event_delay_s``: simulated delay from an instance's publication to the router (s);
    ``event_loss``: probability that a published batch never reaches the router (seeded).
    ``couple_router_time``: the router's measured decision time delays the request's arrival
    at the instance (so it enters TTFT). ``gateways``: gateway counts, one variant each (the
    requests spread over that many router replicas, seeded); ``gateway_index``: ``own`` (each
    replica its own state) or ``shared`` (one index for all). ``unhealthy``: windows
    ``[instance, start s, end s)`` during which every gateway takes the instance out of
    routing (fault injection)."""

    instances: int = 1
    routers: tuple[str, ...] = ("round-robin",)
    router_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    kv_events: bool = True
    dynamo_format: bool = False
    event_delay_s: float = 0.0
    event_loss: float = 0.0
    couple_router_time: bool = False
    gateways: tuple[int, ...] = (1,)
    gateway_index: str = "own"
    unhealthy: tuple[tuple[float, ...], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.instances, bool) or self.instances < 1:
            raise ClusterError(f"instances: must be >= 1, got {self.instances}")
        if not self.routers:
            raise ClusterError("routers: at least one router is needed")
        if len(set(self.routers)) != len(self.routers):
            raise ClusterError(f"routers: listed twice: {', '.join(self.routers)}")
        for name in self.routers:
            if name not in ROUTERS:
                raise ClusterError(f"routers: unknown router {name!r}; known: {', '.join(ROUTERS)}")
            if needs_events(name, self._options(name)) and not self.kv_events:
                raise ClusterError(
                    f"routers: {name} is fed by KV events, which are off (--no-kv-events, "
                    "cluster.kv_events = false)"
                )
        if not (math.isfinite(self.event_delay_s) and self.event_delay_s >= 0):
            raise ClusterError(f"event_delay_s: must be >= 0, got {self.event_delay_s}")
        if not 0.0 <= self.event_loss < 1.0:
            raise ClusterError(f"event_loss: must be in [0, 1), got {self.event_loss}")
        if not self.gateways or any(
            isinstance(g, bool) or not isinstance(g, int) or g < 1 for g in self.gateways
        ):
            raise ClusterError(f"gateways: each must be an int >= 1, got {list(self.gateways)}")
        if len(set(self.gateways)) != len(self.gateways):
            raise ClusterError(f"gateways: listed twice: {list(self.gateways)}")
        if self.gateway_index not in ("own", "shared"):
            raise ClusterError(f"gateway_index: must be own or shared, got {self.gateway_index!r}")
        object.__setattr__(self, "unhealthy", tuple(self._window(w) for w in self.unhealthy))

    def _options(self, name: str) -> Any:
        for key in self.router_options:
            if key not in self.routers:
                raise ClusterError(
                    f"router_options.{key}: not one of the routers run ({', '.join(self.routers)})"
                )
        try:
            return router_options(name, self.router_options.get(name, {}), "router_options")
        except RouterError as e:
            raise ClusterError(str(e)) from None

    def _window(self, w: Sequence[float]) -> tuple[int, float, float]:
        if len(w) != 3:
            raise ClusterError(f"unhealthy: window {list(w)} is not [instance, start_s, end_s]")
        where = f"unhealthy: window {w[0]:g}:{w[1]:g}-{w[2]:g}"
        i, a, b = w
        if float(i) != int(i) or not 0 <= int(i) < self.instances:
            raise ClusterError(f"{where}: instance must be in 0..{self.instances - 1}")
        if not (math.isfinite(a) and math.isfinite(b) and 0 <= a < b):
            raise ClusterError(f"{where}: needs 0 <= start_s < end_s")
        return int(i), float(a), float(b)

    def check_run(self, last_arrival_s: float) -> None:
        """Raise :class:`ClusterError` when an unhealthy window starts after the run's last
        arrival (``last_arrival_s``): it would change nothing."""
        for i, a, b in self.unhealthy:
            if a > last_arrival_s:
                raise ClusterError(
                    f"unhealthy (--unhealthy): window {i}:{a:g}-{b:g} starts after the run's "
                    f"last arrival at {last_arrival_s:.3g} s"
                )

    def options(self, name: str) -> Any:
        """The validated ``Options`` of router ``name``."""
        return self._options(name)

    def needs_events(self) -> bool:
        """Whether some router of the run reads KV events."""
        return any(needs_events(r, self.options(r)) for r in self.routers)

    def router(self, axes: Mapping[str, str], seed: int, page_size: int) -> Gateways:
        """The policy of a variant with ``axes`` (``router``, ``gateways``) behind its
        gateways, seeded with ``seed``, for engines of ``page_size`` tokens per page."""
        name = axes["router"]
        opts = self.options(name)
        return Gateways(
            lambda s: make_router(name, self.instances, opts, s, page_size),
            self.instances,
            seed,
            int(axes.get("gateways", "1")),
            self.gateway_index == "shared",
            [(int(i), a, b) for i, a, b in self.unhealthy],
        )

    def replace(self, **changes: Any) -> ClusterSpec:
        return dataclasses.replace(self, **changes)


def router_variants(variants: Sequence[Any], spec: ClusterSpec) -> tuple[Any, ...]:
    """Every cache variant once per router (and gateway count): the variant with extra axes
    ``router``, ``instances`` and, unless the only count is 1, ``gateways`` (in that order),
    routers in the order listed, then gateway counts."""
    out = []
    axis = spec.gateways != (1,)
    for v in variants:
        for r in spec.routers:
            for g in spec.gateways:
                extra = (*v.extra, ("router", r), ("instances", str(spec.instances)))
                if axis:
                    extra = (*extra, ("gateways", str(g)))
                out.append(dataclasses.replace(v, extra=extra))
    return tuple(out)
