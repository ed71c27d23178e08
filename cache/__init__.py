"""radixbench.cache — a radix prefix cache faithful to ``RadixCache`` of sglang 0.5.23.

The tree follows ``sglang/srt/mem_cache/radix_cache.py`` of sglang 0.5.23 (match, insert, split,
evict, locks, hit counts, priorities, access times), the request paths its ``checkpoint`` and
``release_kv_cache`` (``mem_cache/common.py``), the allocators ``mem_cache/allocator/token.py``,
``mem_cache/allocator/paged.py`` and ``ReqToTokenPool`` (``mem_cache/memory_pool.py``) except
for their free-list orders; every difference that stays on purpose is listed in
``docs/SGLANG-FIDELITY.md``. Pluggable by name: matchers (``linear``, ``galloping``,
``memview``, ``numpy``, ``memcmp``), evictors (``heapify``, ``heapify-walk``,
``persistent-heap``, ``lru-list``) and eviction policies (``lru``, ``lfu``, ``fifo``, ``mru``,
``filo``, ``priority``, ``slru``, ``tlru``). KV-slot indices live in torch tensors on the
cache's device.
"""

from radixbench.cache.allocator import DoubleFreeError, ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig
from radixbench.cache.evictor import EVICTORS, Evictor
from radixbench.cache.integrity import IntegrityError, check_integrity
from radixbench.cache.interface import (
    CacheAction,
    CacheReq,
    EvictResult,
    ImplInfo,
    MatchResult,
    PrefixCache,
)
from radixbench.cache.key import RadixKey
from radixbench.cache.matcher import MATCHERS, Matcher
from radixbench.cache.node import TreeNode
from radixbench.cache.paged_allocator import PagedTokenToKVPoolAllocator, make_allocator
from radixbench.cache.policy import POLICIES, EvictionPolicy
from radixbench.cache.radix_cache import RadixCache

__all__ = [
    "EVICTORS",
    "MATCHERS",
    "POLICIES",
    "CacheAction",
    "CacheConfig",
    "CacheReq",
    "DoubleFreeError",
    "EvictResult",
    "EvictionPolicy",
    "Evictor",
    "ImplInfo",
    "IntegrityError",
    "MatchResult",
    "Matcher",
    "PagedTokenToKVPoolAllocator",
    "PrefixCache",
    "RadixCache",
    "RadixKey",
    "ReqToTokenPool",
    "TokenToKVPoolAllocator",
    "TreeNode",
    "check_integrity",
    "make_allocator",
]
