"""radixbench's cache with HiCache on: the tiered tree, its host tier, its controller.

:class:`TieredRadixCache` assembles :mod:`~radixbench.cache.hicache.tree` (the tree on both
tiers), :mod:`~radixbench.cache.hicache.ops` (backup, load-back, host eviction, acks),
:mod:`~radixbench.cache.hicache.prefetch` (storage) and :mod:`~radixbench.cache.hicache.host`
(the host pool and its evictor), and is what ``radixbench.cache.registry.make_cache`` builds
for radixbench when ``CacheConfig.hicache`` is set. Besides ``PrefixCache`` it offers the
scheduler's HiCache entry points (:class:`~radixbench.cache.interface.TierOps`), as sglang
0.5.23's scheduler calls them on its ``UnifiedRadixCache``: ``check_events``
(``check_hicache_events``), ``load_back`` (``init_load_back`` from ``PrefillAdder``),
``start_loading`` (``ready_to_load_host_cache``), ``prefetch`` (``_prefetch_kvcache``),
``prefetch_ready`` (``check_prefetch_progress``) and ``pop_prefetch_loaded``.

With HiCache off radixbench builds its plain ``RadixCache``: none of this code runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig
from radixbench.cache.hicache.config import HiCacheConfig
from radixbench.cache.hicache.controller import SimController
from radixbench.cache.hicache.host import HostPool, HostTier
from radixbench.cache.hicache.prefetch import StorageOps
from radixbench.cache.hicache.storage import SimStorage
from radixbench.cache.interface import (
    CacheAction,
    CacheReq,
    MatchResult,
    OpTimer,
)
from radixbench.cache.key import RadixKey
from radixbench.cache.timing import time_standard_ops

__all__ = ["TieredRadixCache"]


class TieredRadixCache(StorageOps):
    """radixbench's cache with a host tier and optionally storage (module docstring).

    ``hicache``: the tiers' settings; ``bytes_per_token``: KV bytes of one token, all layers
    (the host and storage copies' size). Other arguments as ``RadixCache``."""

    def __init__(
        self,
        req_to_token_pool: ReqToTokenPool | None,
        token_to_kv_pool_allocator: TokenToKVPoolAllocator,
        config: CacheConfig,
        hicache: HiCacheConfig,
        bytes_per_token: int,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.hicache = hicache
        self.write_back = hicache.write_back
        self.threshold = hicache.write_through_threshold
        self.load_back_threshold = hicache.load_back_threshold
        storage = hicache.storage
        self.storage_on = storage is not None
        if storage is not None:
            self.prefetch_policy = storage.prefetch_policy
            self.prefetch_threshold = max(storage.prefetch_threshold, config.page_size)
            self.timeout_base_s = storage.timeout_base_s
            self.timeout_per_ki_s = storage.timeout_per_ki_token_s
        self.bytes_per_token = bytes_per_token
        self.host_pool = HostPool(hicache.host_tokens, config.page_size)
        self.hosts = _Unbuilt()
        self.host_victims: list[int] = []
        super().__init__(req_to_token_pool, token_to_kv_pool_allocator, config, clock)
        self.hosts = HostTier(
            self, self.host_pool, self.config.evictor, self.policy, self.write_back
        )
        self.ctrl = SimController(
            token_to_kv_pool_allocator.alloc,
            self.host_pool,
            bytes_per_token,
            hicache.write_policy,
            SimStorage(storage.backend) if storage is not None else None,
            self.hash_span,
            self.prefetch_threshold,
        )
        self.tiers = self
        self.reset()

    def reset(self) -> None:
        super().reset()
        self.reset_transfers()
        self.reset_storage()
        if isinstance(self.hosts, HostTier):
            self.hosts.reset()
            self.ctrl.reset()

    def take_actions(self) -> list[CacheAction]:
        """The transfers started since the last call (``SimController.take_actions``)."""
        return list(self.ctrl.take_actions())

    # ------------------------------------------------------------------ scheduler entry points
    def load_back(self, match: MatchResult) -> tuple[int, Any, torch.Tensor]:
        """``init_load_back`` after ``match`` (this cache's ``match_prefix`` result): ``(device
        prefix tokens, last device node, their slots)`` — the match's own when nothing was
        loaded."""
        if match.host_hit_length <= 0 and (
            match.best_node is None or match.best_node.value is not None
        ):
            return match.prefix_len, match.last_node, match.device_indices
        loaded, node = self.init_load_back(match.best_node, match.host_hit_length, match.last_node)
        if not loaded:
            return match.prefix_len, match.last_node, match.device_indices
        return match.prefix_len + loaded, node, self.path_device_indices(node)

    def prefetch(self, rid: Any, match: MatchResult, tokens: Any, namespace: Any) -> None:
        """``_prefetch_kvcache``: prefetch the part of ``tokens`` (the request's match key, its
        last token excluded) past ``match`` from storage."""
        if not self.storage_on:
            return
        start = match.prefix_len + match.host_hit_length
        self.prefetch_from_storage(rid, match.best_node, tokens[start:], start, namespace)

    def prefetch_ready(self, rid: Any, now: float) -> bool:
        return self.check_prefetch_progress(rid, now) if self.storage_on else True

    def tier_stats(self) -> dict[str, int]:
        """O(1): host pool ``host_capacity_tokens`` / ``host_used_tokens``,
        ``host_evictable_leaves``, ``prefetches`` in flight."""
        return {
            "host_capacity_tokens": self.host_pool.size,
            "host_used_tokens": self.host_pool.used(),
            "host_evictable_leaves": self.hosts.num_evictable_leaves,
            "prefetches": len(self.ongoing_prefetch),
        }

    def host_tree_stats(self) -> tuple[int, int, int]:
        """``(nodes, host slots in use, host leaves)``: the condition of an ``evict_host``."""
        return (self.num_nodes, self.host_pool.used(), self.hosts.num_evictable_leaves)

    # ------------------------------------------------------------------ requests
    def checkpoint(self, req: CacheReq, up_to: int) -> None:
        """``RadixCache.checkpoint`` where the insert may adopt the request's slots for
        host-only nodes: those are not freed as duplicates (``requests.checkpoint``'s
        ``adopted``)."""
        from radixbench.cache.requests import checkpoint

        checkpoint(self, req, up_to, adopted=lambda: list(self.adopted))

    def release(self, req: CacheReq, owned_len: int, checkpoint: bool) -> None:
        from radixbench.cache.requests import release

        release(self, req, owned_len, checkpoint)

    def instrument(self, timer: OpTimer) -> None:
        """The standard ops (``evict`` with its ``evict_kv_free`` rows), plus ``evict_host``
        (host-tier eviction, whoever asks: a backup, a prefetch) recorded with the host tier's
        condition — nodes, host slots in use, host leaves — and ``load_back``."""
        time_standard_ops(self, timer, kv_free_in_evict=True)
        evict_host = self.evict_host
        self.evict_host = timer.timed(
            "evict_host", evict_host, self.host_tree_stats, lambda n: n, lambda r, *_: r
        )
        self.load_back = timer.timed(
            "load_back",
            self.load_back,
            self.tree_stats,
            lambda m, *_: m.host_hit_length,
            lambda r, *_: r[0],
        )

    def match_key(self, tokens: Any, namespace: Any) -> RadixKey:
        return RadixKey(tokens, namespace)


class _Unbuilt:
    """Stands for the host tier while ``RadixCache.__init__`` runs (nothing touches it)."""

    duplicates: ClassVar[dict[int, Any]] = {}
    num_evictable_leaves: ClassVar[int] = 0

    def refresh(self, node: Any) -> None:
        pass

    def touched(self, node: Any) -> None:
        pass
