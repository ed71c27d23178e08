"""Routing policies by name: what ``--routers`` accepts, and their options.

========================= ==================================================================
``round-robin``            instances in turn
``random``                 uniform, seeded
``shortest-queue``         fewest in-flight requests (gateway min-load tie-break)
``shortest-queue-tokens``  fewest in-flight tokens
``power-of-two``           the less loaded of two random instances (KV usage or requests)
``cache-aware``            SGLang model gateway (SMG) ``cache_aware``: approximate tree, or
                           its hash index, or its event-driven mode (options)
``precise``                llm-d precise prefix-cache scorer (KV events)
``dynamo-kv``              NVIDIA Dynamo's KV router cost and temperature (KV events)
``oracle``                 longest resident prefix under a load cap (KV events; reference)
========================= ==================================================================

Each policy is a class with ``name``, ``needs_tokens``, ``needs_events``, an ``Options``
frozen dataclass (every option a field with its documented default) and a constructor
``(n instances, options, seed, page_size)`` (:class:`~radixbench.cluster.routers.base.Router`).
:func:`router_options` builds the options from TOML values or ``--router-option`` text with
one-line errors naming where they came from; :func:`make_router` builds a router;
:func:`needs_events` says whether a router with given options reads KV events. Runs put every
policy behind :class:`~radixbench.cluster.routers.gateway.Gateways` (one or many gateways).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from radixbench.cluster.routers.base import ClusterView, Router, RouteRequest
from radixbench.cluster.routers.cache_aware import CacheAware
from radixbench.cluster.routers.dynamo_kv import DynamoKv
from radixbench.cluster.routers.load import (
    PowerOfTwo,
    RandomRouter,
    RoundRobin,
    ShortestQueue,
    ShortestQueueTokens,
)
from radixbench.cluster.routers.oracle import Oracle
from radixbench.cluster.routers.precise import Precise

__all__ = [
    "ROUTERS",
    "ClusterView",
    "RouteRequest",
    "Router",
    "RouterError",
    "make_router",
    "needs_events",
    "router_options",
]

#: Router name -> its class.
ROUTERS: dict[str, Any] = {
    cls.name: cls
    for cls in (
        RoundRobin,
        RandomRouter,
        ShortestQueue,
        ShortestQueueTokens,
        PowerOfTwo,
        CacheAware,
        Precise,
        DynamoKv,
        Oracle,
    )
}


class RouterError(ValueError):
    """A router name or option that cannot be used; one line naming where it came from."""


def _convert(value: Any, tp: Any, where: str) -> Any:
    """A TOML value or command-line text as a field of type ``tp`` (bool, int, float, str)."""
    if isinstance(value, str) and tp is not str:
        text = value.strip().lower()
        try:
            if tp is bool:
                if text not in ("true", "false", "1", "0"):
                    raise ValueError(text)
                return text in ("true", "1")
            return int(text) if tp is int else float(text)
        except ValueError:
            raise RouterError(f"{where}: expected {tp.__name__}, got {value!r}") from None
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise RouterError(f"{where}: expected {tp.__name__}, got {value!r}")
    return value


def router_options(name: str, raw: Mapping[str, Any], where: str = "router_options") -> Any:
    """The ``Options`` of router ``name`` with ``raw`` (option -> value, TOML-typed or text)
    over the defaults. ``where`` prefixes the key path of error messages (``<where>.<router>
    [.<option>]: reason``). Raises :class:`RouterError` for an unknown router, an unknown
    option or a bad value."""
    cls = ROUTERS.get(name)
    if cls is None:
        raise RouterError(f"{where}.{name}: unknown router; known: {', '.join(ROUTERS)}")
    opts = cls.Options
    fields = {f.name: f for f in dataclasses.fields(opts)}
    hints = typing.get_type_hints(opts)
    kwargs = {}
    for key, value in raw.items():
        if key not in fields:
            known = ", ".join(fields) or "none"
            raise RouterError(f"{where}.{name}.{key}: no such option (options: {known})")
        kwargs[key] = _convert(value, hints[key], f"{where}.{name}.{key}")
    try:
        return opts(**kwargs)
    except ValueError as e:
        raise RouterError(f"{where}.{name}: {e}") from None


def make_router(name: str, n: int, options: Any, seed: int, page_size: int) -> Router:
    """A fresh router ``name`` for ``n`` instances (``options``: its ``Options`` or ``None``
    for the defaults)."""
    cls = ROUTERS[name]
    router: Router = cls(n, options if options is not None else cls.Options(), seed, page_size)
    return router


def needs_events(name: str, options: Any) -> bool:
    """Whether router ``name`` with ``options`` (its ``Options``) reads KV events (a class
    flag, or ``cache-aware``'s ``kv_events`` option)."""
    return bool(ROUTERS[name].needs_events or getattr(options, "kv_events", False))
