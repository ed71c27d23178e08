"""The records of the simulated HiCache controller: events, acks and storage operations.

The objects sglang 0.5.23's ``UnifiedRadixCache`` reads of its cache controller's queues, with
the fields it reads (``managers/cache_controller.py``: ``HiCacheAck``, ``LayerDoneCounter``;
``mem_cache/hybrid_cache/hybrid_cache_controller.py``: ``StorageOperation``,
``PrefetchOperation``, the prefetch acks and submissions); completion events are set by the
simulator (:mod:`radixbench.cache.hicache.controller`), never by a device stream.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "Ack",
    "LayerDoneCounter",
    "PrefetchAck",
    "PrefetchOp",
    "PrefetchSubmission",
    "SimEvent",
    "StorageOp",
]

_ids = itertools.count()


class SimEvent:
    """A transfer's completion (a CUDA event in sglang): ``query()`` true once the simulator
    ``set()`` it; ``synchronize()`` on a pending event completes it at once and marks it
    ``blocking`` (the waiting step pays for it)."""

    __slots__ = ("blocking", "done")

    def __init__(self, done: bool = False) -> None:
        self.done = done
        self.blocking = False

    def query(self) -> bool:
        return self.done

    def set(self) -> None:
        self.done = True

    def synchronize(self) -> None:
        if not self.done:
            self.blocking = True
            self.done = True

    def record(self) -> None:
        pass

    def elapsed_time(self, other: SimEvent) -> float:
        return 0.0


class Ack:
    """One merged device<->host operation (``HiCacheAck``): ``node_ids`` it serves, ``tokens``,
    ``finish_event``; ``num_tokens_by_pool`` / ``num_bytes`` / ``timing_enabled`` as sglang's
    metrics read them."""

    __slots__ = ("finish_event", "node_ids", "num_bytes", "start_event", "tokens")

    def __init__(self, node_ids: list[int], tokens: int, num_bytes: int) -> None:
        self.node_ids = node_ids
        self.tokens = tokens
        self.num_bytes = num_bytes
        self.start_event = SimEvent(True)
        self.finish_event = SimEvent()

    timing_enabled = False

    @property
    def num_tokens_by_pool(self) -> dict[str, int]:
        return {"kv": self.tokens}


class _Layer:
    def __init__(self) -> None:
        self.finish_event = SimEvent(True)


class LayerDoneCounter:
    """sglang's three producer/consumer slots of layer-wise loading (``cache_controller.py:
    83-109``); a load's consumer index is the slot it was started in."""

    num_counters = 3

    def __init__(self) -> None:
        self.events = [_Layer() for _ in range(self.num_counters)]
        self.producer_index = -1

    def update_producer(self) -> int:
        self.producer_index = (self.producer_index + 1) % self.num_counters
        return self.producer_index

    def reset(self) -> None:
        self.producer_index = -1


@dataclass(eq=False)
class StorageOp:
    """A host->storage write (``StorageOperation``): ``host_indices``, ``token_ids``, page
    keys ``hash_value``; ``completed_tokens`` grows per batch written."""

    host_indices: torch.Tensor
    token_ids: Any
    hash_value: list[Any]
    prefix_keys: Any = None
    completed_tokens: int = 0
    id: int = field(default_factory=lambda: next(_ids))


@dataclass(eq=False)
class PrefetchOp:
    """A storage->host prefetch (``PrefetchOperation``, ``hybrid_cache_controller.py:145-198``)
    with the fields ``UnifiedRadixCache`` reads: ``handle`` (the request), ``token_ids`` (the
    span asked for), ``last_hash`` (the anchor's last page key), ``hash_value`` (the hit's
    page keys), ``storage_hit_count`` (tokens), ``host_indices`` (its host buffer, once
    allocated), ``completed_tokens`` (read so far)."""

    handle: Any
    token_ids: Any
    last_hash: Any = None
    prefix_keys: Any = None
    pool_transfers: Any = None
    assume_stored: bool = False
    storage_hit_count: int = 0
    hash_value: list[Any] = field(default_factory=list)
    all_hash_values: list[Any] | None = None
    host_indices: torch.Tensor | None = None
    completed_tokens: int = 0
    terminated: bool = False
    deadline_expired: bool = False
    stats_requested_tokens: int = 0
    storage_start: int = 0
    pool_transfers_done: bool = True
    ack_releases_incomplete_host_indices: bool = True
    query_pool_hit_pages: dict[Any, int] = field(default_factory=dict)
    pool_storage_result: Any = None
    sidecar_hash_values: Any = None
    sidecar_hit_pages: int = 0
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def request_id(self) -> Any:
        return getattr(self.handle, "rid", self.handle)

    def mark_terminate(self) -> None:
        self.terminated = True

    def is_terminated(self) -> bool:
        return self.terminated


@dataclass(eq=False)
class PrefetchAck:
    """``PrefetchAck`` (``cache_controller.py:201-224``)."""

    rid: Any
    operation: PrefetchOp
    completed_tokens: int | None = None
    pool_hits: dict[str, int] | None = None
    completed_req: bool | None = None


@dataclass(frozen=True)
class PrefetchSubmission:
    operation: PrefetchOp | None = None
    decision: bool | None = None
