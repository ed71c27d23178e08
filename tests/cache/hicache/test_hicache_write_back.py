"""``write_back`` eviction of a device leaf whose backup finds no host room and whose subtree
drop is declined (its host-only child is pinned by an unfinished storage write).

sglang 0.5.23 (``UnifiedRadixCache._evict_components``, ``unified_radix_cache.py:1024-1056``;
``FullComponent._evict_device_next_node``, ``components/full.py:209-238``) pops the leaf from
the heap it built for the call, logs "subtree drop declined" and goes on; the leaf stays
device-resident and evictable, and the next ``evict`` call (a new heap) serves it again. Every
evictor must do the same: not loop on it (``lru-list`` did), not lose it (``persistent-heap``
did), and not list it as a victim (it freed nothing).
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
from radixbench.cache.hicache import HiCacheConfig, StorageConfig, TieredRadixCache
from radixbench.cache.key import RadixKey
from radixbench.cache.paged_allocator import make_allocator

A = array("q", range(1, 9))  # 8 tokens
B = array("q", range(9, 17))  # 8 more below A
C = array("q", range(100, 108))  # 8 tokens beside A
CALL_BUDGET = 200  # delete_leaf calls one evict may make here: far more than it needs


def _cache(evictor: str) -> Any:
    """Device pool of 64 tokens, a host pool of one 8-token node, storage on, page 1."""
    hc = HiCacheConfig("write_back", 8, storage=StorageConfig(), bytes_per_token=64)
    cfg = CacheConfig(page_size=1, evictor=evictor, hicache=hc)
    dev = torch.device("cpu")
    alloc = make_allocator(64, 1, dev)
    cache = TieredRadixCache(ReqToTokenPool(4, 64, dev), alloc, cfg, hc, hc.bytes_per_token)
    calls = [0]
    inner = cache.delete_leaf

    def delete_leaf(node: Any) -> int:  # a step budget: a hang fails instead of hanging
        calls[0] += 1
        assert calls[0] <= CALL_BUDGET, f"evict looped: {calls[0]} delete_leaf calls"
        return int(inner(node))

    cache.delete_leaf = delete_leaf
    cache.calls = calls
    return cache, alloc


def _put(cache: Any, alloc: Any, tokens: array) -> None:
    v = alloc.alloc(len(tokens))
    p = cache.insert(RadixKey(tokens), v)
    alloc.free(v[:p].clone())


def _evict(cache: Any, n: int) -> Any:
    cache.calls[0] = 0
    return cache.evict(n)


def _evictor_serves_every_device_leaf(cache: Any) -> None:
    leaves = {n.id for n in cache.collect_evictable_leaves()}
    assert cache.evictor.members(cache) == leaves


def _finish_storage_writes(cache: Any) -> None:
    for act in cache.take_actions():
        if act.kind == "l3_write":
            op = act.fields["op"]
            cache.ctrl.write_batch_done(op, 0, len(op.hash_value))
            cache.ctrl.write_done(op)
    cache.check_events()


def _declined(evictor: str, c_first: bool = False) -> tuple[Any, Any, Any, Any]:
    """A cache where device leaf A (8 tokens) cannot be backed up (the host holds only B, its
    child, pinned by B's storage write) nor dropped (B is pinned): ``(cache, alloc, a, b)``.
    ``c_first``: leaf C (8 tokens) is put after B, so A, when B's demotion makes it a leaf, is
    older than C (``lru-list``: it goes to the side heap, not the list)."""
    cache, alloc = _cache(evictor)
    _put(cache, alloc, A)
    _put(cache, alloc, A + B)
    if c_first:
        _put(cache, alloc, C)
    b = cache.root.children[A[0]].children[B[0]]
    a = b.parent
    # B backs up to the host (filling it), is demoted, and its storage write pins its copy.
    r = _evict(cache, 8)
    assert (r.num_evicted, r.victims) == (8, [b.id])
    assert b.value is None and b.host_value is not None and b.host_lock_ref == 1
    assert a.evictable  # a device leaf: its only child is host-only
    return cache, alloc, a, b


@pytest.mark.parametrize("evictor", list(EVICTORS))
def test_a_declined_leaf_is_no_victim(evictor: str) -> None:
    """Issue 31 item 2: it freed 0 tokens (and ``lru-list`` must not loop on it, item 1)."""
    cache, _, a, _ = _declined(evictor)
    r = _evict(cache, 4)
    assert (r.num_evicted, r.victims) == (0, [])
    assert a.value is not None and a.evictable


@pytest.mark.parametrize("evictor", list(EVICTORS))
def test_a_declined_leaf_is_served_again_next_call(evictor: str) -> None:
    """Issue 31 items 1-2: ``lru-list`` looped on it; ``persistent-heap`` lost it (the popped
    entry was never pushed back), so once its pin cleared ``evict(4)`` freed nothing."""
    cache, alloc, a, b = _declined(evictor)
    assert _evict(cache, 4).num_evicted == 0
    _evictor_serves_every_device_leaf(cache)
    # Once B's storage write completes, the next call serves A again: it drops A's subtree.
    _finish_storage_writes(cache)
    assert b.host_lock_ref == 0
    r = _evict(cache, 4)
    assert (r.num_evicted, r.victims) == (8, [a.id])
    assert cache.evictable_size() == 0 and alloc.available_size() == 64
    _evictor_serves_every_device_leaf(cache)


@pytest.mark.parametrize("c_first", [False, True], ids=["list", "side-heap"])
@pytest.mark.parametrize("evictor", list(EVICTORS))
def test_the_call_goes_on_past_a_declined_leaf(evictor: str, c_first: bool) -> None:
    """sglang logs "subtree drop declined" and pops the next leaf: here C, newer than A,
    whose backup finds no host room either but whose drop is allowed. The next call serves A
    again."""
    cache, alloc, a, b = _declined(evictor, c_first)
    if not c_first:
        _put(cache, alloc, C)
    c = cache.root.children[C[0]]
    r = _evict(cache, 4)
    assert (r.num_evicted, r.victims) == (8, [c.id])
    assert a.value is not None and a.evictable
    _evictor_serves_every_device_leaf(cache)
    _finish_storage_writes(cache)
    assert b.host_lock_ref == 0
    assert _evict(cache, 4).victims == [a.id]
    _evictor_serves_every_device_leaf(cache)


def _served(core: str) -> tuple[Any, Any]:
    from radixbench.cache.sglang.hicache import ServedHiCache, load_hicache

    hc = HiCacheConfig("write_back", 8, storage=StorageConfig(), bytes_per_token=64)
    cfg = CacheConfig(page_size=1, hicache=hc)
    dev = torch.device("cpu")
    alloc = make_allocator(64, 1, dev)
    spec = "sglang-python" if core == "python" else "sglang"
    return ServedHiCache(ReqToTokenPool(4, 64, dev), alloc, cfg, load_hicache(spec, core)), alloc


def _story(cache: Any, alloc: Any, c_first: bool) -> list[tuple[int, list[int]]]:
    """The calls of the tests above, as ``(tokens freed, victims)`` per ``evict``."""
    _put(cache, alloc, A)
    _put(cache, alloc, A + B)
    if c_first:
        _put(cache, alloc, C)
    out = [tuple(cache.evict(8))]
    if not c_first:
        _put(cache, alloc, C)
    out.append(tuple(cache.evict(4)))  # A declined, C dropped
    out.append(tuple(cache.evict(4)))  # A declined again (B still pinned): nothing freed
    _finish_storage_writes(cache)
    out.append(tuple(cache.evict(4)))  # A dropped
    return out  # type: ignore[return-value]


@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="needs sglang 0.5.23")
@pytest.mark.parametrize("core", ["python", "auto"])
@pytest.mark.parametrize("c_first", [False, True], ids=["list", "side-heap"])
def test_every_evictor_evicts_as_sglang_does(core: str, c_first: bool) -> None:
    """The same calls on sglang 0.5.23's ``UnifiedRadixCache`` (both tree cores; its victims
    are the leaves it freed, the declined one taken off by ``ServedHiCache``)."""
    want = _story(*_served(core), c_first)
    assert want[2] == (0, [])
    for evictor in EVICTORS:
        assert _story(*_cache(evictor), c_first) == want, evictor
