"""The HiCache cache controller, simulated: queues and acks, no bytes moved.

A stand-in for sglang 0.5.23's ``HybridCacheController`` / ``HiCacheController``
(``mem_cache/hybrid_cache/hybrid_cache_controller.py``, ``managers/cache_controller.py``) with
the surface ``UnifiedRadixCache`` calls for a FULL-only tree in cache mode, so one object
serves both radixbench's tiered cache and sglang's own tree (``--impl sglang
--enable-hierarchical-cache``). It keeps sglang's queues and their order and moves nothing:

* ``write(device_indices, node_id)`` allocates host slots and queues a device->host copy;
  ``start_writing()`` merges the queue into one operation with one ack appended to
  ``ack_write_queue`` (``cache_controller.py:864-920``); ``load(host_indices, node_id)``
  allocates device slots and queues a host->device copy, ``start_loading()`` merges them into
  one ack in ``ack_load_queue`` (``:928-1069``);
* storage: ``submit_prefetch`` queues a hit query, ``allocate_storage_hit`` sizes the host
  buffer of a hit (``hybrid_cache_controller.py:796-829``) and ``prefetch_buffer.put`` queues
  its read; ``write_storage`` queues a host->storage write; acks come back through
  ``prefetch_hit_queue``, ``ack_prefetch_queue`` (progressive ``PrefetchAck`` s, the last with
  ``completed_req``) and ``ack_backup_queue``, released host slots through
  ``host_mem_release_queue`` (one page per item, ``:462-497``).

Every copy the tree starts becomes one :class:`~radixbench.cache.interface.CacheAction` in
``take_actions()``: ``d2h`` / ``h2d`` (``tokens``, ``ack``), ``l3_query`` / ``l3_read`` /
``l3_write`` (``op``, and ``ctrl``: this controller, to report to). The simulator times them
(``radixbench.sim.transfers``) and reports completion here — ``ack.finish_event.set()``,
:meth:`query_done`, :meth:`read_batch_done`, :meth:`write_batch_done` — so the tree learns
completions only when it polls its events, as sglang's ``check_hicache_events`` does. An ack
the tree *synchronizes* on before it completed (``write_back``'s blocking copy,
``unified_radix_cache.py:3482-3491``) completes at once and is marked ``blocking``: the
simulator charges its time to the step that waited.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from queue import Queue
from typing import Any

import torch

from radixbench.cache.hicache.host import HostPool
from radixbench.cache.hicache.operations import (
    Ack,
    LayerDoneCounter,
    PrefetchAck,
    PrefetchOp,
    PrefetchSubmission,
    StorageOp,
)
from radixbench.cache.hicache.storage import STORAGE_BATCH_PAGES, SimStorage
from radixbench.cache.interface import CacheAction

__all__ = ["SimController"]


class SimController:
    """The simulated controller (module docstring). ``device_alloc(n)`` / ``device_free(t)``:
    the device KV allocator; ``host``: the host pool; ``bytes_per_token``: KV bytes of one
    token (all layers); ``storage``: the L3 backend or None; ``hash_pages(token_ids,
    last_hash)``: page keys of a span; ``prefetch_threshold``: tokens."""

    def __init__(
        self,
        device_alloc: Callable[[int], torch.Tensor | None],
        host: HostPool,
        bytes_per_token: int,
        write_policy: str,
        storage: SimStorage | None = None,
        hash_pages: Callable[[Any, Any], list[Any]] | None = None,
        prefetch_threshold: int = 256,
    ) -> None:
        self.device_alloc = device_alloc
        self.mem_pool_host = host
        self.bytes_per_token = bytes_per_token
        self.write_policy = write_policy
        self.page_size = host.page_size
        self.storage_backend = storage
        self.storage_backend_type = None if storage is None else storage.name
        self.enable_storage = storage is not None
        self.hash_pages = hash_pages
        self.prefetch_threshold = max(prefetch_threshold, self.page_size)
        #: "Leave half the pool for write-back" (``cache_controller.py:631-636``).
        self.prefetch_capacity_limit = int(0.5 * host.size)
        self.layer_done_counter = LayerDoneCounter()
        self.pp_prefetch_command_group = None
        self.pp_prefetch_decisions: dict[Any, Any] = {}
        self.extra_host_mem_release_queues: dict[Any, Queue[Any]] = {}
        self.host_write_staged_tokens_fn = None
        self.actions: list[CacheAction] = []
        self.reset()

    def reset(self) -> None:
        self.write_queue: list[tuple[torch.Tensor, torch.Tensor, int]] = []
        self.load_queue: list[tuple[torch.Tensor, torch.Tensor, int]] = []
        self.ack_write_queue: list[Ack] = []
        self.ack_load_queue: list[Ack] = []
        self.prefetch_hit_queue: Queue[PrefetchOp] = Queue()
        self.ack_prefetch_queue: Queue[PrefetchAck] = Queue()
        self.ack_backup_queue: Queue[StorageOp] = Queue()
        self.host_mem_release_queue: Queue[torch.Tensor] = Queue()
        self.prefetch_buffer = _Outbox(self, "l3_read")
        self.prefetch_tokens_occupied = 0
        self.layer_done_counter.reset()

    def take_actions(self) -> list[CacheAction]:
        out, self.actions = self.actions, []
        return out

    # ------------------------------------------------------------------ device <-> host
    def write(
        self,
        device_indices: torch.Tensor,
        priority: int | None = None,
        node_id: int = -1,
        extra_pools: Sequence[Any] | None = None,
        flush: bool = True,
        **_: Any,
    ) -> torch.Tensor | None:
        """Host slots for a copy of ``device_indices`` (``None`` if the host pool is full),
        the copy queued; ``flush`` starts it now."""
        host = self.mem_pool_host.alloc(len(device_indices))
        if host is None:
            return None
        self.write_queue.append((host, device_indices, node_id))
        if flush:
            self.start_writing()
        return host

    def start_writing(self) -> None:
        if not self.write_queue:
            return
        tokens = sum(len(d) for _, d, _ in self.write_queue)
        ack = Ack([n for _, _, n in self.write_queue], tokens, tokens * self.bytes_per_token)
        self.write_queue = []
        self.ack_write_queue.append(ack)
        self.actions.append(CacheAction("d2h", {"tokens": tokens, "ack": ack}))

    def load(
        self,
        host_indices: torch.Tensor,
        priority: int | None = None,
        node_id: int = -1,
        extra_pools: Sequence[Any] | None = None,
        **_: Any,
    ) -> torch.Tensor | None:
        """Device slots for ``host_indices`` (``None`` when the allocator is short), the copy
        queued until :meth:`start_loading`."""
        device: torch.Tensor | None
        if host_indices.numel() == 0:
            device = torch.empty((0,), dtype=torch.int64)
        else:
            device = self.device_alloc(len(host_indices))
            if device is None:
                return None
        self.load_queue.append((host_indices, device, node_id))
        return device

    def start_loading(self) -> int:
        """Start the queued loads as one operation; its layer-counter slot, or -1."""
        if not self.load_queue:
            return -1
        producer = self.layer_done_counter.update_producer()
        tokens = sum(len(h) for h, _, _ in self.load_queue)
        ack = Ack([n for _, _, n in self.load_queue], tokens, tokens * self.bytes_per_token)
        self.load_queue = []
        self.ack_load_queue.append(ack)
        self.actions.append(CacheAction("h2d", {"tokens": tokens, "ack": ack}))
        return producer

    def has_inflight_device_transfers(self) -> bool:
        return bool(
            self.write_queue or self.load_queue or self.ack_write_queue or self.ack_load_queue
        )

    # ------------------------------------------------------------------ storage
    def prefetch_rate_limited(self) -> bool:
        return self.prefetch_tokens_occupied >= self.prefetch_capacity_limit

    def get_prefetch_submission(self, rid: Any) -> PrefetchSubmission | None:
        return None

    def submit_prefetch(
        self,
        handle: Any,
        prefetch_key: Any,
        last_hash: Any,
        prefix_keys: Any,
        matched_prefix_tokens: Any = None,
        pool_transfers: Any = None,
        assume_stored: bool = False,
    ) -> PrefetchSubmission:
        op = PrefetchOp(handle, prefetch_key, last_hash, prefix_keys, pool_transfers, assume_stored)
        op.pool_storage_result = _PoolResult()
        assert self.hash_pages is not None
        op.all_hash_values = self.hash_pages(prefetch_key, last_hash)
        pages = len(op.all_hash_values)
        self.actions.append(CacheAction("l3_query", {"op": op, "pages": pages, "ctrl": self}))
        return PrefetchSubmission(operation=op)

    def query_batch(self, op: PrefetchOp, start: int, n: int) -> int:
        """Pages of ``op``'s keys ``[start, start + n)`` present in storage, counted from
        ``start`` up to the first absent one (``batch_exists``)."""
        assert self.storage_backend is not None and op.all_hash_values is not None
        return self.storage_backend.exists_prefix(op.all_hash_values[start : start + n])

    def query_done(self, op: PrefetchOp, hit_pages: int) -> None:
        """The hit query ended with ``hit_pages`` pages present (``prefetch_thread_func``)."""
        assert op.all_hash_values is not None
        if op.terminated:
            hit_pages = 0
        op.hash_value = op.all_hash_values[:hit_pages]
        op.storage_hit_count = hit_pages * self.page_size
        op.pool_storage_result.update_kv_hit_pages(hit_pages)
        self.prefetch_hit_queue.put(op)

    def terminate_prefetch(self, op: PrefetchOp) -> tuple[int, list[Any]]:
        op.mark_terminate()
        return op.completed_tokens, op.hash_value

    def allocate_storage_hit(
        self,
        operation: PrefetchOp,
        hit_tokens: int,
        *,
        allow_partial: bool,
        min_tokens: int,
        evict_host: Callable[[int], int],
    ) -> tuple[torch.Tensor | None, int]:
        """``hybrid_cache_controller.py:796-829`` without a shared arena."""
        pool = self.mem_pool_host
        host = pool.alloc(hit_tokens)
        if host is None:
            evict_host(hit_tokens)
            host = pool.alloc(hit_tokens)
        if host is not None or not allow_partial:
            return host, hit_tokens
        available = pool.available_size()
        alloc_len = min(hit_tokens, available - available % self.page_size)
        if alloc_len >= min_tokens:
            host = pool.alloc(alloc_len)
        return host, alloc_len

    def read_batch_done(self, op: PrefetchOp, pages_read: int) -> None:
        """One read batch of ``op`` ended; ``pages_read`` of its pages landed in total."""
        self.ack_prefetch_queue.put(
            PrefetchAck(op.request_id, op, completed_tokens=pages_read * self.page_size)
        )

    def read_done(self, op: PrefetchOp) -> None:
        """``op``'s read ended (all batches, or cut by termination): the final ack."""
        self.ack_prefetch_queue.put(PrefetchAck(op.request_id, op, completed_req=True))

    def append_host_mem_release(
        self, host_indices: torch.Tensor | None = None, extra_pools: Any = None
    ) -> None:
        if host_indices is None or host_indices.numel() == 0:
            return
        for page in host_indices.split(self.page_size):
            self.host_mem_release_queue.put(page)

    def write_storage(
        self,
        host_indices: torch.Tensor,
        token_ids: Any,
        hash_value: list[Any] | None = None,
        prefix_keys: Any = None,
        extra_pools: Any = None,
    ) -> int:
        op = StorageOp(host_indices, token_ids, list(hash_value or []), prefix_keys)
        self.actions.append(CacheAction("l3_write", {"op": op, "ctrl": self}))
        return op.id

    def write_batch_done(self, op: StorageOp, start: int, n: int) -> None:
        """Pages ``[start, start + n)`` of ``op`` are stored."""
        assert self.storage_backend is not None
        self.storage_backend.store(op.hash_value[start : start + n])
        op.completed_tokens += n * self.page_size

    def write_done(self, op: StorageOp) -> None:
        self.ack_backup_queue.put(op)

    # ------------------------------------------------------------------ inert sglang surface
    def release_pp_prefetch(self, rid: Any) -> bool:
        return False

    def register_host_pool_entry(self, entry: Any) -> None:
        pass


class _Outbox:
    """``prefetch_buffer``: a put becomes an ``l3_read`` action."""

    def __init__(self, ctrl: SimController, kind: str) -> None:
        self.ctrl, self.kind = ctrl, kind
        self.queue: list[Any] = []

    def put(self, op: PrefetchOp) -> None:
        self.ctrl.actions.append(CacheAction(self.kind, {"op": op, "ctrl": self.ctrl}))


class _PoolResult:
    """``PoolTransferResult`` (``mem_cache/hicache_storage.py:171-198``) of a FULL-only tree."""

    def __init__(self) -> None:
        self.kv_hit_pages = 0
        self.extra_pool_hit_pages: dict[str, int] = {}
        self.restorable_prefix_pages = None

    def update_extra_pool_hit_pages(self, hits: dict[str, int]) -> None:
        self.extra_pool_hit_pages.update(hits)

    def update_kv_hit_pages(self, pages: int) -> None:
        self.kv_hit_pages = max(self.kv_hit_pages, pages)


STORAGE_BATCH = STORAGE_BATCH_PAGES
