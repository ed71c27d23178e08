"""The tiered tree tells its evictor when a device leaf's sort key changes.

An insert walk counts a hit on every node it passes (``_inc_hit_count_and_check``), and the
LFU and SLRU keys read ``hit_count``: the evictors that keep keys across calls
(``persistent-heap``, ``lru-list``'s side heap) evicted by the count before the hit, so LFU
took a twice-hit leaf before a once-hit one. ``heapify`` reads keys at each call and was right;
sglang 0.5.23's ``UnifiedRadixCache`` is the reference.
"""

from __future__ import annotations

import importlib.util
from array import array
from typing import Any

import pytest
import torch

from radixbench.cache import EVICTORS
from radixbench.cache.allocator import ReqToTokenPool
from radixbench.cache.config import CacheConfig
from radixbench.cache.hicache import HiCacheConfig, TieredRadixCache
from radixbench.cache.key import RadixKey
from radixbench.cache.paged_allocator import make_allocator

X = array("q", range(1, 9))
Y = array("q", range(20, 28))


def _config(policy: str) -> tuple[CacheConfig, HiCacheConfig]:
    hc = HiCacheConfig("write_through", 64, bytes_per_token=64)
    return CacheConfig(page_size=1, policy=policy, hicache=hc), hc


def _ours(evictor: str, policy: str) -> tuple[Any, Any]:
    cfg, hc = _config(policy)
    cfg = CacheConfig(page_size=1, policy=policy, evictor=evictor, hicache=hc)
    alloc = make_allocator(64, 1, torch.device("cpu"))
    pool = ReqToTokenPool(4, 64, torch.device("cpu"))
    return TieredRadixCache(pool, alloc, cfg, hc, hc.bytes_per_token), alloc


def _sglang(core: str, policy: str) -> tuple[Any, Any]:
    from radixbench.cache.sglang.hicache import ServedHiCache, load_hicache

    cfg, _ = _config(policy)
    alloc = make_allocator(64, 1, torch.device("cpu"))
    pool = ReqToTokenPool(4, 64, torch.device("cpu"))
    spec = "sglang-python" if core == "python" else "sglang"
    return ServedHiCache(pool, alloc, cfg, load_hicache(spec, core)), alloc


def _put(cache: Any, alloc: Any, tokens: array) -> None:
    v = alloc.alloc(len(tokens))
    p = cache.insert(RadixKey(tokens), v)
    alloc.free(v[:p].clone())
    cache.check_events()  # submits the backup's copy
    for act in cache.take_actions():  # which completes: the leaf is unlocked
        act.fields["ack"].finish_event.set()
    cache.check_events()


def _victims(cache: Any, alloc: Any) -> list[list[int]]:
    """X put twice (2 hits), then Y once (1 hit, newer); evict 4 tokens, then 4 more."""
    _put(cache, alloc, X)
    _put(cache, alloc, X)
    _put(cache, alloc, Y)
    return [cache.evict(4).victims, cache.evict(4).victims]


@pytest.mark.parametrize("policy", ["lfu", "slru"])
@pytest.mark.parametrize("evictor", list(EVICTORS))
def test_a_hit_re_keys_the_leaf(evictor: str, policy: str) -> None:
    cache, alloc = _ours(evictor, policy)
    x_then_y = _victims(cache, alloc)
    y = cache.root.children[Y[0]].id
    x = cache.root.children[X[0]].id
    assert x_then_y == [[y], [x]]  # Y has fewer hits (LFU) / is still probationary (SLRU)


@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="needs sglang 0.5.23")
@pytest.mark.parametrize("core", ["python", "auto"])
@pytest.mark.parametrize("policy", ["lfu", "slru"])
def test_sglang_evicts_alike(core: str, policy: str) -> None:
    want = _victims(*_sglang(core, policy))
    for evictor in EVICTORS:
        assert _victims(*_ours(evictor, policy)) == want, evictor
