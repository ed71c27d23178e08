"""Fixtures for the radixbench.cache tests.

``make_cache`` builds a ``RadixCache`` over a fresh ``TokenToKVPoolAllocator`` (and a
``ReqToTokenPool``) for the evictor x matcher pair the test is parametrized with. ``put`` inserts a
token list with freshly allocated KV slots and frees the duplicate-prefix slots exactly as a caller
of ``RadixCache.insert`` must (``p = cache.insert(key, v); alloc.free(v[:p])``), then checks the
cache's invariants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch

from radixbench.cache import (
    EVICTORS,
    MATCHERS,
    CacheConfig,
    RadixCache,
    RadixKey,
    ReqToTokenPool,
    TokenToKVPoolAllocator,
    TreeNode,
    check_integrity,
)

EVICTOR_NAMES = sorted(EVICTORS)
MATCHER_NAMES = sorted(MATCHERS)


@pytest.fixture(params=EVICTOR_NAMES)
def evictor_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=MATCHER_NAMES)
def matcher_name(request: pytest.FixtureRequest) -> str:
    return request.param


def build_cache(
    page_size: int = 1,
    evictor: str = "heapify",
    matcher: str = "linear",
    policy: str = "lru",
    kv_size: int = 256,
    max_reqs: int = 8,
    max_context_len: int = 256,
) -> tuple[RadixCache, TokenToKVPoolAllocator]:
    alloc = TokenToKVPoolAllocator(kv_size)
    pool = ReqToTokenPool(max_reqs, max_context_len)
    cfg = CacheConfig(page_size=page_size, evictor=evictor, matcher=matcher, policy=policy)
    cache = RadixCache(pool, alloc, cfg)
    check_integrity(cache)
    return cache, alloc


MakeCache = Callable[..., tuple[RadixCache, TokenToKVPoolAllocator]]


@pytest.fixture
def make_cache(evictor_name: str, matcher_name: str) -> MakeCache:
    """Factory ``make_cache(page_size=1, policy="lru", kv_size=256, ...)`` -> (cache, alloc),
    defaulting to the evictor and matcher this test instance is parametrized with."""

    def factory(**kw: object) -> tuple[RadixCache, TokenToKVPoolAllocator]:
        kw.setdefault("evictor", evictor_name)
        kw.setdefault("matcher", matcher_name)
        return build_cache(**kw)  # type: ignore[arg-type]

    return factory


def put_tokens(
    cache: RadixCache,
    alloc: TokenToKVPoolAllocator,
    tokens: Sequence[int],
    extra_key: str | None = None,
    priority: int = 0,
) -> tuple[int, torch.Tensor]:
    """Insert ``tokens`` with fresh KV slots; free the already-cached prefix's duplicates.

    Returns ``(prefix_len, slots)`` where ``slots`` are the fresh slots handed to ``insert``
    (``slots[:prefix_len]`` went back to the allocator, ``slots[prefix_len:]`` are the tree's).
    """
    slots = alloc.alloc(len(tokens))
    assert slots is not None, "test KV pool too small"
    p = cache.insert(RadixKey(list(tokens), extra_key), slots, priority=priority)
    alloc.free(slots[:p])
    check_integrity(cache)
    return p, slots


@pytest.fixture
def put() -> Callable[..., tuple[int, torch.Tensor]]:
    return put_tokens


def tree_paths(cache: RadixCache) -> dict[tuple[str | None, tuple[int, ...]], list[int]]:
    """Every root-to-node path: ``(extra_key, tokens) -> slots``, for whole-tree comparisons."""
    out: dict[tuple[str | None, tuple[int, ...]], list[int]] = {}
    stack: list[tuple[TreeNode, tuple[int, ...], list[int]]] = [(cache.root, (), [])]
    while stack:
        node, toks, slots = stack.pop()
        for child in node.children.values():
            t = toks + tuple(child.key.token_ids)
            s = slots + child.value.tolist()
            out[(child.key.extra_key, t)] = s
            stack.append((child, t, s))
    return out


@pytest.fixture
def paths() -> Callable[[RadixCache], dict]:
    return tree_paths


@pytest.fixture
def cache_builder() -> MakeCache:
    """``build_cache(page_size=1, evictor="heapify", matcher="linear", policy="lru", ...)``
    for tests that compare several evictor/matcher pairs themselves."""
    return build_cache
