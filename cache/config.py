"""The configuration of one cache: :class:`CacheConfig` (algorithms, geometry, events, tiers).

The results a cache returns and what it reads of a request are the contract's
(:mod:`radixbench.cache.interface`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from radixbench.cache.evictor import EVICTORS
from radixbench.cache.kv_events import KVEventConfig
from radixbench.cache.matcher import MATCHERS
from radixbench.cache.policy import POLICIES, make_policy

#: How a split sets node times: ``served`` = sglang 0.5.23's ``UnifiedRadixCache``
#: (``unified_cache/unified_tree_core.py: UnifiedTreeCore._split_node``), ``legacy`` = its
#: ``RadixCache`` (``radix_cache.py: RadixCache._split_node``).
SPLIT_RULES = ("served", "legacy")


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """Algorithm choice and geometry of one cache. Validated on construction (``ValueError``)."""

    page_size: int = 1
    evictor: str = "heapify"
    matcher: str = "galloping"
    policy: str = "lru"
    #: keyword configuration of the policy, as ``(key, value)`` pairs (SGLang
    #: ``--radix-eviction-policy-config``), e.g. ``(("threshold", 512),)`` for ``tlru``.
    policy_config: tuple[tuple[str, int], ...] = ()
    #: the node times a split sets (:data:`SPLIT_RULES`): ``served``, as sglang 0.5.23's
    #: ``UnifiedRadixCache`` (what its scheduler builds), or ``legacy``, as its ``RadixCache``;
    #: they differ in FIFO / FILO victims after a split (``RadixCache._split_node``).
    split_rule: str = "served"
    #: KV events (``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared``, drained by
    #: ``take_actions``) and their format; ``None`` (default): off, and free.
    kv_events: KVEventConfig | None = None
    #: HiCache (host and storage tiers, ``radixbench.cache.hicache.HiCacheConfig``) or None:
    #: off, the plain one-tier cache.
    hicache: Any = None

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {self.page_size}")
        for field, known in (
            ("evictor", EVICTORS),
            ("matcher", MATCHERS),
            ("policy", POLICIES),
        ):
            value = getattr(self, field)
            if value not in known:
                raise ValueError(f"unknown {field} {value!r}; known: {', '.join(known)}")
        make_policy(self.policy, dict(self.policy_config))  # raises ValueError on a bad config
        if self.split_rule not in SPLIT_RULES:
            raise ValueError(
                f"unknown split_rule {self.split_rule!r}; known: {', '.join(SPLIT_RULES)}"
            )
