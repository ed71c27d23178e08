"""What a cluster run is: :class:`ClusterSpec` (instances, routers, their options, KV events).

A scenario's ``[cluster]`` table (or ``compare --instances N --routers A,B``) gives one. Each
router becomes a variant with the extra axes ``router`` and ``instances`` (``Variant.extra``),
so the run's tables carry them as columns and the report pairs routers like any other axis.
Validation raises :class:`ClusterError`, one line naming the key (or flag) at fault.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from radixbench.cluster.routers import ROUTERS, RouterError, router_options

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
    at the instance (so it enters TTFT)."""

    instances: int = 1
    routers: tuple[str, ...] = ("round-robin",)
    router_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    kv_events: bool = True
    dynamo_format: bool = False
    event_delay_s: float = 0.0
    event_loss: float = 0.0
    couple_router_time: bool = False

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
            if ROUTERS[name].needs_events and not self.kv_events:
                raise ClusterError(
                    f"routers: {name} is fed by KV events, which are off (--no-kv-events, "
                    "cluster.kv_events = false)"
                )
        if not (math.isfinite(self.event_delay_s) and self.event_delay_s >= 0):
            raise ClusterError(f"event_delay_s: must be >= 0, got {self.event_delay_s}")
        if not 0.0 <= self.event_loss < 1.0:
            raise ClusterError(f"event_loss: must be in [0, 1), got {self.event_loss}")
        for name, opts in self.router_options.items():
            if name not in self.routers:
                raise ClusterError(
                    f"router_options.{name}: not one of the routers run ({', '.join(self.routers)})"
                )
            try:
                router_options(name, opts, "router_options")
            except RouterError as e:
                raise ClusterError(str(e)) from None

    def options(self, name: str) -> Any:
        """The validated ``Options`` of router ``name``."""
        return router_options(name, self.router_options.get(name, {}), "router_options")

    def needs_events(self) -> bool:
        """Whether some router of the run reads KV events."""
        return any(ROUTERS[r].needs_events for r in self.routers)

    def replace(self, **changes: Any) -> ClusterSpec:
        return dataclasses.replace(self, **changes)


def router_variants(variants: Sequence[Any], spec: ClusterSpec) -> tuple[Any, ...]:
    """Every cache variant once per router: the variant with extra axes ``router`` and
    ``instances`` (in that order), routers in the order listed."""
    out = []
    for v in variants:
        for r in spec.routers:
            extra = (*v.extra, ("router", r), ("instances", str(spec.instances)))
            out.append(dataclasses.replace(v, extra=extra))
    return tuple(out)
