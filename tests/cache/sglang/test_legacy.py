"""``radixbench.cache.sglang.legacy.SGLangCache``: sglang 0.5.23's ``RadixCache`` driven
through radixbench's cache API over radixbench's allocator and request table.

Skipped (with the reason shown by ``-ra``) when the ``sglang`` package is not installed.
"""

from __future__ import annotations

import importlib.util
import random
from array import array
from dataclasses import dataclass
from typing import Any

import pytest
import torch

if importlib.util.find_spec("sglang") is None:
    pytest.skip(
        "sglang is not installed (make install: pip install --no-deps 'sglang==0.5.23'); "
        "SGLang fidelity tests skipped",
        allow_module_level=True,
    )

from radixbench.cache import CacheConfig, RadixKey, ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.paged_allocator import make_allocator
from radixbench.cache.sglang.legacy import SGLangCache
from radixbench.cache.sglang.legacy_load import load_sglang
from radixbench.cache.sglang.loader import Loaded

KV = 1024


@pytest.fixture(scope="module")
def loaded() -> Loaded:
    return load_sglang("sglang")


def build(
    loaded: Loaded, page_size: int = 1, policy: str = "lru", kv: int = KV
) -> tuple[SGLangCache, TokenToKVPoolAllocator, ReqToTokenPool]:
    alloc = make_allocator(kv, page_size)
    pool = ReqToTokenPool(8, 512)
    cache = SGLangCache(pool, alloc, CacheConfig(page_size=page_size, policy=policy), loaded)
    return cache, alloc, pool


def put(cache: SGLangCache, alloc: TokenToKVPoolAllocator, tokens: list[int], **kw: Any) -> int:
    """Insert ``tokens`` (page-aligned) with fresh slots; free the already-cached part's."""
    v = alloc.alloc(len(tokens))
    assert v is not None
    p = cache.insert(RadixKey(tokens, kw.pop("extra_key", None)), v, **kw)
    alloc.free(v[:p])
    return p


def walk(cache: SGLangCache) -> tuple[int, int, int, int]:
    """(nodes excluding the root, unlocked leaves, evictable tokens, protected tokens)."""
    nodes = leaves = evictable = protected = 0
    stack = list(cache.root.children.values())
    while stack:
        node = stack.pop()
        nodes += 1
        if node.lock_ref == 0:
            evictable += len(node.key)
            leaves += not node.children
        else:
            protected += len(node.key)
        stack.extend(node.children.values())
    return nodes, leaves, evictable, protected


def check(cache: SGLangCache) -> None:
    nodes, leaves, evictable, protected = walk(cache)
    assert cache.num_nodes == nodes
    assert cache.num_evictable_leaves == leaves
    assert (cache.evictable_size(), cache.protected_size()) == (evictable, protected)
    assert cache.total_size() == evictable + protected == cache.sgl.total_size()


def test_round_trip(loaded: Loaded) -> None:
    cache, alloc, _ = build(loaded)
    assert cache.root.id == 0 and cache.num_nodes == 0
    assert put(cache, alloc, [1, 2, 3, 4, 5]) == 0  # node 1
    assert put(cache, alloc, [1, 2, 3, 9, 9]) == 3  # split: node 2 = [1 2 3], leaf 3 = [9 9]
    m = cache.match_prefix(RadixKey([1, 2, 3, 4, 7]))  # split of [4 5]: node 4 = [4]
    assert m.prefix_len == 4 and m.device_indices.dtype == torch.int64
    assert torch.equal(m.device_indices, cache.path_device_indices(m.last_node))
    assert m.last_node.id == 4
    check(cache)
    miss = cache.match_prefix(RadixKey([7, 7]))
    assert (
        miss.prefix_len == 0 and miss.last_node is cache.root and miss.device_indices.numel() == 0
    )
    assert cache.match_prefix(RadixKey([1, 2, 3], extra_key="lora")).prefix_len == 0
    handle = cache.lock(m.last_node)
    assert cache.protected_size() == 4
    check(cache)
    assert cache.evict(100) == (3, [3, 1])  # leaves [9 9] then [5]: LRU order
    check(cache)
    cache.unlock(handle)
    cache.unlock(None)
    assert cache.evict(100) == (4, [4, 2])
    assert alloc.available_size() == KV and cache.total_size() == 0
    check(cache)


def test_lock_ref_deltas(loaded: Loaded) -> None:
    cache, alloc, _ = build(loaded)
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 2, 4, 5])
    node = cache.match_prefix(RadixKey([1, 2, 4, 5])).last_node
    assert cache.inc_lock_ref(node) == -4
    assert cache.inc_lock_ref(node) == 0
    assert cache.dec_lock_ref(node) == 0
    assert cache.dec_lock_ref(node) == 4
    check(cache)


def random_ops(cache: SGLangCache, alloc: TokenToKVPoolAllocator, seed: int, n: int) -> list:
    """A seeded op stream (insert / match+lock / unlock / evict); returns every result."""
    rng = random.Random(seed)
    locks: list[Any] = []
    out: list[Any] = []
    for _ in range(n):
        op = rng.random()
        tokens = [rng.randrange(4) for _ in range(rng.randrange(1, 12))]
        if op < 0.45:
            if alloc.available_size() < len(tokens):
                out.append(cache.evict(len(tokens)))
            out.append(put(cache, alloc, tokens, priority=rng.randrange(3)))
        elif op < 0.7:
            m = cache.match_prefix(RadixKey(tokens))
            out.append((m.prefix_len, m.last_node.id, m.device_indices.tolist()))
            locks.append(cache.lock(m.last_node))
        elif op < 0.85 and locks:
            cache.unlock(locks.pop(rng.randrange(len(locks))))
        else:
            out.append(cache.evict(rng.randrange(1, 10)))
        check(cache)
    for handle in locks:
        cache.unlock(handle)
    out.append(cache.evict(KV))
    check(cache)
    assert alloc.available_size() == alloc.size
    return out


@pytest.mark.parametrize("policy", ["lru", "lfu", "fifo", "mru", "filo", "priority", "slru"])
def test_counters_and_determinism(loaded: Loaded, policy: str) -> None:
    a, alloc_a, _ = build(loaded, policy=policy, kv=64)
    b, alloc_b, _ = build(loaded, policy=policy, kv=64)
    # Interleave the two adapters call by call: each call swaps in its own clock and ids.
    ra, rb = [], []
    for seed in range(3):
        ra += random_ops(a, alloc_a, seed, 80)
        rb += random_ops(b, alloc_b, seed, 80)
    assert ra == rb
    assert any(isinstance(r, tuple) and len(r) == 2 and r[1] for r in ra)  # some victims


def test_clock(loaded: Loaded) -> None:
    ticks: list[int] = []

    def clock() -> float:
        ticks.append(len(ticks) + 100)
        return ticks[-1]

    alloc = make_allocator(64, 1)
    cache = SGLangCache(None, alloc, CacheConfig(), loaded, clock=clock)
    assert (cache.root.last_access_time, cache.root.creation_time) == (100, 101)
    put(cache, alloc, [5, 6])  # one tick for the insert, two for the new node
    (leaf,) = cache.root.children.values()
    assert (cache.root.last_access_time, leaf.last_access_time, leaf.creation_time) == (
        102,
        103,
        104,
    )
    default, _, _ = build(loaded)
    assert default.root.last_access_time == 1  # the default counter clock starts at 1
    put(cache, alloc, [5, 7])  # the first adapter's clock again, not the other's
    assert cache.root.last_access_time == 105


def test_rejects_bigram_and_tlru(loaded: Loaded) -> None:
    cache, _, _ = build(loaded)
    with pytest.raises(ValueError, match="bigram"):
        cache.match_prefix(RadixKey.bigram([1, 2, 3]))
    with pytest.raises(ValueError, match="tlru"):
        SGLangCache(None, make_allocator(16, 1), CacheConfig(policy="tlru"), loaded)


@dataclass
class FakeReq:
    """The ``CacheReq`` attributes ``checkpoint`` / ``release`` use."""

    tokens: array
    origin_input_len: int
    req_pool_idx: int
    extra_key: str | None = None
    priority: int = 0
    cache_protected_len: int = 0
    cache_inserted_len: int = 0
    last_node: Any = None
    lock: Any = None

    def token_ids(self, up_to: int | None = None) -> array:
        return self.tokens if up_to is None else self.tokens[:up_to]


def admit(
    cache: SGLangCache, alloc: TokenToKVPoolAllocator, pool: ReqToTokenPool, tokens: list[int],
    n_prompt: int,
) -> FakeReq:  # fmt: skip
    """Match the prompt, lock the match, allocate the rest's slots into a fresh row."""
    row = pool.alloc()
    assert row is not None
    req = FakeReq(array("q", tokens), n_prompt, row)
    m = cache.match_prefix(RadixKey(tokens[:n_prompt]))
    req.cache_protected_len, req.last_node, req.lock = (
        m.prefix_len,
        m.last_node,
        cache.lock(m.last_node),
    )
    pool.write(row, 0, m.device_indices)
    ps = cache.page_size
    need = len(tokens) - m.prefix_len
    new = alloc.alloc(-(-need // ps) * ps)  # whole pages; the last page's spare slots too
    assert new is not None
    pool.write(row, m.prefix_len, new[:need])
    return req


@pytest.mark.parametrize("page_size", [1, 16])
def test_checkpoint_and_release(loaded: Loaded, page_size: int) -> None:
    cache, alloc, pool = build(loaded, page_size=page_size)
    prompt = list(range(1, 41))
    a = admit(cache, alloc, pool, [*prompt, 50, 51, 52, 53, 54], 40)
    b = admit(cache, alloc, pool, [*prompt, 60, 61], 40)  # same prompt, computed twice
    assert a.cache_protected_len == b.cache_protected_len == 0
    aligned = 40 // page_size * page_size

    cache.checkpoint(a, up_to=40)  # after prefill
    assert a.cache_protected_len == a.cache_inserted_len == aligned
    assert cache.protected_size() == aligned
    row_a = pool.req_to_token[a.req_pool_idx, :aligned].to(torch.int64)
    assert torch.equal(row_a, cache.path_device_indices(a.last_node))
    check(cache)

    free_before = alloc.available_size()
    cache.checkpoint(b, up_to=40)  # b's copy of the prompt duplicates a's: freed
    assert alloc.available_size() - free_before == aligned
    assert torch.equal(
        pool.req_to_token[b.req_pool_idx, :aligned], pool.req_to_token[a.req_pool_idx, :aligned]
    )
    check(cache)

    a.tokens.append(55)  # finished: the last sampled token has no KV, so a owns 45 tokens
    cache.release(a, owned_len=45, checkpoint=True)
    assert a.lock is None and a.last_node is None
    cache.release(b, owned_len=len(b.tokens), checkpoint=False)  # retracted
    assert cache.protected_size() == 0
    assert pool.available_size() == pool.max_reqs
    assert alloc.available_size() + cache.total_size() == alloc.size
    check(cache)
    cached = cache.match_prefix(RadixKey([*prompt, 50, 51, 52, 53, 54, 55]))
    assert cached.prefix_len == 45 // page_size * page_size
    cache.evict(alloc.size)
    assert alloc.available_size() == alloc.size and cache.num_nodes == 0
    check(cache)


def test_implementation_info(loaded: Loaded) -> None:
    cache, _, _ = build(loaded)
    info = cache.info()
    assert info.label == "sglang" and info.version == "0.5.23"
    assert info.cls == "sglang.srt.mem_cache.radix_cache.RadixCache"
    assert "sglang/srt/mem_cache/radix_cache.py" in info.files
