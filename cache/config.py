"""Configuration and result types of ``RadixCache`` (re-exported by ``radix_cache``)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import torch

from radixbench.cache.evictor import EVICTORS
from radixbench.cache.kv_events import KVEventConfig
from radixbench.cache.matcher import MATCHERS
from radixbench.cache.policy import POLICIES, make_policy

if TYPE_CHECKING:
    from radixbench.cache.node import TreeNode


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


class MatchResult(NamedTuple):
    """``device_indices``: int64 ``[prefix_len]`` KV slots of the matched prefix on the device;
    ``last_node``: deepest matched node (the root when nothing matched); ``prefix_len``: tokens."""

    device_indices: torch.Tensor
    last_node: TreeNode
    prefix_len: int


class EvictResult(NamedTuple):
    """``num_evicted``: tokens freed; ``victims``: evicted node ids in eviction order."""

    num_evicted: int
    victims: list[int]


class CacheReq(Protocol):
    """What ``checkpoint`` / ``release`` read and write of a request: the fields of sglang
    0.5.23's ``Req`` and its ``req.kv`` record that ``RadixCache.checkpoint`` and
    ``release_kv_cache`` use, flattened. ``lock`` is the handle the cache's ``lock`` returned
    (opaque to the caller; ``None`` when nothing is locked)."""

    req_pool_idx: int
    extra_key: str | None
    priority: int
    origin_input_len: int
    cache_protected_len: int
    cache_inserted_len: int
    lock: Any
    last_node: Any

    def token_ids(self, up_to: int | None = None) -> array:
        """``array('q')``: prompt followed by the output tokens so far (0.5.23
        ``Req.full_untruncated_fill_ids``), cut to the first ``up_to`` tokens when given
        (0.5.23 ``full_untruncated_fill_ids[:up_to]``). Not to be mutated: it may be the
        request's own array."""
        ...
