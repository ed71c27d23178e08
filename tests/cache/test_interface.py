"""Conformance: every registered implementation (radixbench.cache.registry) satisfies the
``PrefixCache`` protocol the simulator drives — the same script of operations, through the
protocol only (node handles opaque), gives the same observable results, and ``instrument``
times every required op under radixbench's op names."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from radixbench.cache import CacheConfig, RadixKey, ReqToTokenPool, make_allocator
from radixbench.cache.interface import PrefixCache
from radixbench.cache.registry import ImplError, entries, make_cache, resolve
from radixbench.sim.instrument import OpRecorder

REQUIRED_OPS = {"match_prefix", "insert", "evict", "checkpoint", "release"}


def _specs() -> list[str]:
    """Every registered name (one that cannot load here is skipped, with the reason)."""
    return list(entries())


@dataclass
class Req:
    """A ``CacheReq``."""

    tokens: array
    origin_input_len: int
    req_pool_idx: int
    extra_key: str | None = None
    priority: int = 0
    cache_protected_len: int = 0
    cache_inserted_len: int = 0
    lock: Any = None
    last_node: Any = None

    def token_ids(self, up_to: int | None = None) -> array:
        return self.tokens if up_to is None else self.tokens[:up_to]


def _build(spec: str, page: int) -> tuple[PrefixCache, Any, ReqToTokenPool]:
    try:
        resolve(spec)
    except ImplError as e:
        pytest.skip(str(e))
    alloc = make_allocator(64 * page, page)
    pool = ReqToTokenPool(4, 16 * page)
    return make_cache(spec, pool, alloc, CacheConfig(page_size=page)), alloc, pool


def _script(cache: PrefixCache, alloc: Any, pool: ReqToTokenPool, page: int) -> list[Any]:
    """A request's life through the protocol: admit (match + lock), write KV, checkpoint,
    finish (release with checkpoint); a second request sharing the prefix; raw insert and
    evict. Returns what a caller observes."""
    seen: list[Any] = []
    prompt = array("q", range(1, 4 * page + 1))
    for rid in range(2):
        row = pool.alloc()
        assert row is not None
        m = cache.match_prefix(RadixKey(prompt, limit=len(prompt) - 1))
        seen.append(("match", rid, m.prefix_len))
        req = Req(prompt, len(prompt), row, cache_protected_len=m.prefix_len)
        req.lock, req.last_node = cache.lock(m.last_node), m.last_node
        pool.write(row, 0, m.device_indices)
        kv = alloc.alloc(len(prompt) - m.prefix_len)
        assert kv is not None
        pool.write(row, m.prefix_len, kv)
        cache.checkpoint(req, len(prompt))
        seen.append(("protected", rid, req.cache_protected_len, cache.total_size()))
        cache.release(req, len(prompt), True)
        seen.append(("sizes", rid, cache.evictable_size(), cache.protected_size()))
    other = array("q", [99] * (2 * page))
    v = alloc.alloc(len(other))
    assert v is not None
    seen.append(("insert", cache.insert(RadixKey(other), v)))
    nodes, tokens, leaves = cache.tree_stats()
    seen.append(("stats", nodes, tokens, leaves))
    walk = list(cache.walk())
    assert len(walk) == nodes and len({n for n, _ in walk}) == nodes
    assert {p for _, p in walk} <= {0} | {n for n, _ in walk}  # parents are nodes or the root
    held = cache.held_slots()
    assert held.dtype == torch.int64 and held.numel() == tokens == cache.total_size()
    assert not bool(alloc.is_free[held].any())  # the tree's slots are not free
    assert alloc.available_size() + tokens == alloc.size  # nothing leaked
    ev = cache.evict(cache.evictable_size())
    seen.append(("evict", ev.num_evicted, len(ev.victims)))
    assert cache.total_size() == 0 and alloc.available_size() == alloc.size
    assert cache.take_actions() == []
    return seen


@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("spec", _specs())
def test_every_registered_implementation_conforms(spec: str, page: int) -> None:
    cache, alloc, pool = _build(spec, page)
    assert isinstance(cache, PrefixCache)
    info = cache.info()
    assert info.label and info.cls and info.files is not None
    rec = OpRecorder()
    cache.instrument(rec)
    seen = _script(cache, alloc, pool, page)
    ref, ref_alloc, ref_pool = _build("radixbench", page)
    assert seen == _script(ref, ref_alloc, ref_pool, page)
    assert set(rec.frame("x")["op"]) >= REQUIRED_OPS


@pytest.mark.parametrize("spec", _specs())
def test_every_implementation_declares_its_tiers(spec: str) -> None:
    """Capabilities are declared on the protocol, not probed: every implementation has
    ``tiers`` (``None``: one tier), so the scheduler reads ``cache.tiers`` directly."""
    cache, _, _ = _build(spec, 1)
    assert cache.tiers is None


def test_a_tiered_cache_offers_every_tier_entry_point() -> None:
    """radixbench's cache with HiCache on declares its tiers: every ``TierOps`` entry point."""
    from radixbench.cache.hicache import HiCacheConfig, host_pool_tokens
    from radixbench.cache.interface import TierOps

    alloc = make_allocator(64, 1)
    hc = HiCacheConfig("write_through", host_pool_tokens(64, 1, 2.0), bytes_per_token=64)
    cache = make_cache("radixbench", ReqToTokenPool(4, 16), alloc, CacheConfig(hicache=hc))
    assert cache.tiers is not None
    ops = [n for n in vars(TierOps) if not n.startswith("_")]
    assert len(ops) == 8 and all(callable(getattr(cache.tiers, n)) for n in ops)
    m = cache.match_prefix(RadixKey(array("q", [1, 2, 3])))
    assert (m.prefix_len, m.host_hit_length) == (0, 0)  # one result type, host part included


def test_the_contract_is_defined_once() -> None:
    """The result types and ``CacheReq`` live next to ``PrefixCache`` and are what
    ``radixbench.cache`` exports; the configuration module holds no copy."""
    import radixbench.cache as cache_pkg
    from radixbench.cache import config, interface

    for name in ("MatchResult", "EvictResult", "CacheReq", "PrefixCache", "ImplInfo"):
        assert getattr(cache_pkg, name) is getattr(interface, name)
        assert name not in vars(config)
