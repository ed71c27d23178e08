"""Configuration and result types of ``RadixCache`` (re-exported by ``radix_cache``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

import torch

from radixbench.cache.evictor import EVICTORS
from radixbench.cache.matcher import MATCHERS
from radixbench.cache.policy import POLICIES

if TYPE_CHECKING:
    from radixbench.cache.key import RadixKey
    from radixbench.cache.node import TreeNode


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """Algorithm choice and geometry of one cache. Validated on construction (``ValueError``)."""

    page_size: int = 1
    evictor: str = "heapify"
    matcher: str = "linear"
    policy: str = "lru"

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
    """What ``cache_finished_req`` / ``cache_unfinished_req`` need of a request (SGLang ``Req``).
    ``cache_unfinished_req`` rewrites ``prefix_indices`` and ``last_node``."""

    req_pool_idx: int
    prefix_indices: torch.Tensor
    last_node: TreeNode
    extra_key: str | None

    def committed_token_ids(self) -> RadixKey:
        """Tokens whose KV is written in ``req_to_token[req_pool_idx, :len]`` (input + output
        except the last sampled token)."""
        ...
