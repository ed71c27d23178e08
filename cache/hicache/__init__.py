"""radixbench.cache.hicache — host (L2) and storage (L3) tiers behind radixbench's radix cache.

Mirrors the HiCache of sglang 0.5.23's ``UnifiedRadixCache`` (``mem_cache/unified_radix_cache.py``,
``unified_cache/unified_tree_core.py``, ``unified_cache/components/full.py``) for full-attention
KV in cache mode. Modules, one concept each:

* :mod:`~radixbench.cache.hicache.config` — settings (``--hicache-*``) and host pool sizing;
* :mod:`~radixbench.cache.hicache.node` — nodes with host residency, and their host-tier view;
* :mod:`~radixbench.cache.hicache.host` — the host pool, host leaves, host eviction;
* :mod:`~radixbench.cache.hicache.storage` — the storage tier's keys;
* :mod:`~radixbench.cache.hicache.controller` — the simulated cache controller (queues, acks,
  transfer actions), also the stand-in of sglang's own; its records (events, acks, storage
  operations) in :mod:`~radixbench.cache.hicache.operations`;
* :mod:`~radixbench.cache.hicache.tree` — match, insert and device eviction on two tiers; its
  locks in :mod:`~radixbench.cache.hicache.locks`;
* :mod:`~radixbench.cache.hicache.ops` — backup, load-back, acks;
* :mod:`~radixbench.cache.hicache.prefetch` — storage writes and prefetch;
* :mod:`~radixbench.cache.hicache.cache` — :class:`TieredRadixCache`, the assembled cache.

Transfer *timing* is the simulator's (``radixbench.sim.transfers``).
"""

from radixbench.cache.hicache.cache import TieredRadixCache
from radixbench.cache.hicache.config import (
    PREFETCH_POLICIES,
    STORAGE_BACKENDS,
    WRITE_POLICIES,
    HiCacheConfig,
    StorageConfig,
    host_pool_tokens,
)

__all__ = [
    "PREFETCH_POLICIES",
    "STORAGE_BACKENDS",
    "WRITE_POLICIES",
    "HiCacheConfig",
    "StorageConfig",
    "TieredRadixCache",
    "host_pool_tokens",
]
