"""What a router sees and decides: :class:`RouteRequest`, :class:`ClusterView`, :class:`Router`.

A router process (``radixbench.cluster.run.ClusterSim``) asks its router, for every arriving
request in arrival order, which instance serves it: ``route(req, view) -> instance index``.
The view is the router's knowledge of the instances at that simulated moment — what a gateway
knows without asking the engines (requests it sent and not yet completed: ``outstanding``) and
what an engine's load report gives (waiting queue, running batch, KV use: llm-d's queue and
KV-utilisation scorers, Dynamo's active blocks). Routers fed by KV events
(``needs_events``) also get every delivered batch through ``on_events``; ``on_finish`` tells a
router that a request it routed has completed (SGLang router's ``on_request_complete``).

The view a policy gets is its gateway's (:class:`~radixbench.cluster.routers.gateway.
GatewayView`): ``eligible`` lists the instances the gateway may route to (healthy, in index
order: SMG's ``get_healthy_worker_indices``) and the load counts are that gateway's own. A
policy returns :data:`SHED` when it refuses the request (no eligible instance: the gateway
answers 503), which the run records as rejected.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["SHED", "ClusterView", "RouteRequest", "Router", "least_loaded"]

#: What ``route`` returns for a request the gateway refuses (no instance serves it).
SHED = -1


@dataclass(slots=True)
class RouteRequest:
    """One request as the router gets it: ``rid``, prompt ``tokens`` (``array('q')``; empty
    for a router that does not read them, ``needs_tokens`` False), ``input_len`` /
    ``output_len`` (tokens) and the simulated ``arrival_s``."""

    rid: int
    tokens: array
    input_len: int
    output_len: int
    arrival_s: float


class ClusterView(Protocol):
    """The instances as the router knows them at the moment of a decision (index ``i`` in
    ``range(n)``). ``outstanding[i]``: requests routed to ``i`` and not yet finished (the
    gateway's ``worker.load()``); ``outstanding_tokens[i]``: their input + output tokens;
    ``processed[i]``: requests routed to ``i`` so far; ``eligible``: the instances that may be
    chosen now (healthy), ascending."""

    n: int
    eligible: list[int]
    outstanding: list[int]
    outstanding_tokens: list[int]
    processed: list[int]

    @property
    def now(self) -> float:
        """Simulated time (s)."""
        ...

    def waiting(self, i: int) -> int:
        """Requests in ``i``'s waiting queue (the engine's ``num_requests_waiting``)."""
        ...

    def waiting_tokens(self, i: int) -> int:
        """Prompt tokens of the requests in ``i``'s waiting queue (O(queue))."""
        ...

    def running(self, i: int) -> int:
        """Requests in ``i``'s running batch."""
        ...

    def kv_usage(self, i: int) -> float:
        """Fraction of ``i``'s KV slots in use, in [0, 1] (the engine's ``token_usage``)."""
        ...

    def kv_used_tokens(self, i: int) -> int:
        """KV slots of ``i`` in use (tokens)."""
        ...


class Router(Protocol):
    """A routing policy. ``name``: its registry name; ``needs_tokens``: ``route`` reads
    ``req.tokens`` (else they are not made); ``needs_events``: fed by KV events. A policy that
    predicts the prefix the chosen instance holds sets ``predicted_tokens`` after each
    ``route`` (tokens; -1: no prediction made), which the run records per request."""

    name: str
    needs_tokens: bool
    needs_events: bool

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        """The instance that serves ``req``; may update the router's own state."""
        ...

    def on_events(self, instance: int, events: Sequence[Any]) -> None:
        """A batch of KV events of ``instance`` was delivered (routers with ``needs_events``)."""
        ...

    def on_finish(self, instance: int, rid: int) -> None:
        """Request ``rid`` routed to ``instance`` completed."""
        ...


def least_loaded(view: ClusterView, candidates: Sequence[int] | None = None) -> int:
    """The instance with the fewest outstanding requests, ties by fewer requests processed,
    then by lower index: the gateway's min-load pick with its ``(load, processed, idx)``
    tie-break (lightseekorg/smg ``model_gateway/src/policies/cache_aware.rs:781-797`` @73da68c,
    #1714). ``candidates``: restrict to these (default: the eligible ones; none: :data:`SHED`)."""
    load, done = view.outstanding, view.processed
    pool = view.eligible if candidates is None else candidates
    if not pool:
        return SHED
    return min(pool, key=lambda i: (load[i], done[i], i))
