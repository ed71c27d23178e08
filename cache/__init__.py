"""radixbench.cache — a radix prefix cache faithful to SGLang ``RadixCache`` @ a7ec6b97.

Pluggable by name: matchers (``linear``, ``galloping``, ``memview``, ``numpy``), evictors
(``heapify``, ``persistent-heap``, ``lru-list``) and eviction policies (``lru``, ``lfu``,
``fifo``, ``mru``, ``filo``, ``priority``, ``slru``). KV-slot indices live in torch tensors on the
cache's device.
"""

from radixbench.cache.allocator import DoubleFreeError, ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.evictor import EVICTORS, Evictor
from radixbench.cache.integrity import IntegrityError, check_integrity
from radixbench.cache.key import RadixKey
from radixbench.cache.matcher import MATCHERS, Matcher
from radixbench.cache.node import TreeNode
from radixbench.cache.paged_allocator import PagedTokenToKVPoolAllocator, make_allocator
from radixbench.cache.policy import POLICIES, EvictionPolicy
from radixbench.cache.radix_cache import (
    CacheConfig,
    CacheReq,
    EvictResult,
    MatchResult,
    RadixCache,
)

__all__ = [
    "EVICTORS",
    "MATCHERS",
    "POLICIES",
    "CacheConfig",
    "CacheReq",
    "DoubleFreeError",
    "EvictResult",
    "EvictionPolicy",
    "Evictor",
    "IntegrityError",
    "MatchResult",
    "Matcher",
    "PagedTokenToKVPoolAllocator",
    "RadixCache",
    "RadixKey",
    "ReqToTokenPool",
    "TokenToKVPoolAllocator",
    "TreeNode",
    "check_integrity",
    "make_allocator",
]
