"""KV events of radixbench's cache: hashing against sglang 0.5.23's own helpers, emission
points, and that events off cost nothing observable (no events, no digests)."""

from __future__ import annotations

import importlib.util
import random

import pytest
import torch

from radixbench.cache import CacheConfig, RadixCache, RadixKey, ReqToTokenPool, make_allocator
from radixbench.cache.kv_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEventConfig,
    block_id,
    block_ids,
    event_to_wire,
    namespace_seed,
    namespaced,
    page_digests,
)

_ON = KVEventConfig()


def _cache(page: int = 1, events: KVEventConfig | None = _ON) -> RadixCache:
    return RadixCache(
        ReqToTokenPool(4, 256),
        make_allocator(256 * page, page),
        CacheConfig(page_size=page, kv_events=events),
    )


def _insert(cache: RadixCache, tokens: list[int], **ns: str) -> int:
    slots = cache.allocator.alloc(len(tokens))
    assert slots is not None
    n = cache.insert(RadixKey(tokens, **ns), slots)
    cache.allocator.free(slots[:n])
    return n


def test_events_off_by_default_and_free() -> None:
    cache = _cache(events=None)
    _insert(cache, [1, 2, 3])
    cache.evict(3)
    assert cache.take_actions() == []
    assert cache.kv_events is None
    _insert(cache, [4, 5])
    assert all(n.page_digests is None for n in cache.root.children.values())


def test_emission_points() -> None:
    """A store per new node (nothing for a cached key, a match or a split), removals of the
    evicted nodes (one event: consecutive removals coalesce), children before a parent that
    becomes a leaf, AllBlocksCleared on reset."""
    cache = _cache(page=2)
    assert [type(e) for e in cache.take_actions()] == [AllBlocksCleared]
    _insert(cache, [1, 2, 3, 4, 5, 6])
    (stored,) = cache.take_actions()
    assert isinstance(stored, BlockStored) and stored.parent_block_hash is None
    assert len(stored.block_hashes) == 3 and stored.token_ids == [1, 2, 3, 4, 5, 6]
    assert _insert(cache, [1, 2, 3, 4, 5, 6]) == 6 and cache.take_actions() == []
    assert cache.match_prefix(RadixKey([1, 2, 3, 4, 9, 9])).prefix_len == 4  # splits
    assert cache.take_actions() == []
    _insert(cache, [1, 2, 7, 8])
    (child,) = cache.take_actions()
    assert isinstance(child, BlockStored)
    assert child.parent_block_hash == stored.block_hashes[0]
    assert child.block_hashes != stored.block_hashes[1:2]  # same position, other tokens
    cache.evict(100)
    removed = cache.take_actions()
    assert all(isinstance(e, BlockRemoved) for e in removed)
    order = [h for e in removed for h in e.block_hashes]
    assert sorted(order) == sorted([*stored.block_hashes, *child.block_hashes])
    assert order.index(stored.block_hashes[0]) > order.index(stored.block_hashes[2])
    assert order.index(stored.block_hashes[0]) > order.index(child.block_hashes[0])
    cache.reset()
    assert [type(e) for e in cache.take_actions()] == [AllBlocksCleared]


def test_same_prefix_same_ids_across_caches() -> None:
    """Block ids depend on the tokens and their prefix only: two caches agree (what a router's
    index relies on)."""
    a, b = _cache(page=4), _cache(page=4)
    a.take_actions(), b.take_actions()
    _insert(a, list(range(16)))
    _insert(b, list(range(8)))
    _insert(b, list(range(16)))
    ids_a = [h for e in a.take_actions() for h in e.block_hashes]
    ids_b = [h for e in b.take_actions() for h in e.block_hashes]
    assert ids_a == ids_b


def test_wire_format() -> None:
    ev = BlockStored([1, 2], None, [5, 6], 1)
    assert event_to_wire(ev) == {
        "type": "BlockStored",
        "block_hashes": [1, 2],
        "parent_block_hash": None,
        "token_ids": [5, 6],
        "block_size": 1,
        "lora_id": None,
        "medium": "GPU",
    }
    assert event_to_wire(BlockRemoved([3], None)) == {"type": "BlockRemoved", "block_hashes": [3]}
    assert event_to_wire(AllBlocksCleared()) == {"type": "AllBlocksCleared"}
    with pytest.raises(TypeError):
        event_to_wire(object())


# ------------------------------------------------------------------- against sglang's helpers
needs_sglang = pytest.mark.skipif(
    importlib.util.find_spec("sglang") is None, reason="sglang is not installed (make install)"
)


@pytest.fixture(scope="module")
def sgl() -> object:
    from radixbench.cache.sglang.events import enable_native_hash
    from radixbench.cache.sglang.legacy_load import SGLangLoadError
    from radixbench.cache.sglang.unified_load import load_unified

    try:
        loaded = load_unified("sglang-python", "python")
        enable_native_hash(loaded)
    except SGLangLoadError as e:
        pytest.skip(str(e))
    return loaded


@needs_sglang
@pytest.mark.parametrize("page", [1, 3, 16])
@pytest.mark.parametrize("wide", [False, True])
def test_page_digests_match_native_hash(sgl: object, page: int, wide: bool) -> None:
    """``page_digests`` equals sglang's ``get_hash_str`` (its compiled ``hash_binding.cpp``),
    a partial last page and tokens >= 2**32 (``0xff`` + uint64 pages) included."""
    utils = sgl.modules["sglang.srt.mem_cache.utils"]  # type: ignore[attr-defined]
    rng = random.Random(page * 2 + wide)
    for n in (1, page, 5 * page + 1, 40):
        tokens = [rng.randrange(0, 1 << 17) for _ in range(n)]
        if wide:
            tokens[rng.randrange(n)] = (1 << 33) + rng.randrange(99)
        for prior in (None, bytes(range(32))):
            ours = [d.hex() for d in page_digests(tokens, page, prior)]
            theirs = utils.get_hash_str(tokens, prior.hex() if prior else None, page_size=page)
            assert ours == theirs
            want = [utils.hash_str_to_int64(h) for h in theirs]
            assert [block_id(d) for d in page_digests(tokens, page, prior)] == want
            assert block_ids(page_digests(tokens, page, prior)) == want


@needs_sglang
def test_namespace_helpers_match(sgl: object) -> None:
    kv = sgl.modules["sglang.srt.disaggregation.kv_events"]  # type: ignore[attr-defined]
    for extra, salt in ((None, None), ("lora", None), (None, "s"), ("a", "bc"), ("ab", "c")):
        seed = namespace_seed(extra, salt)
        assert seed == kv.kv_event_namespace_seed(extra_key=extra, cache_salt=salt)
        for h in (0, -1, 2**63 - 1, -(2**63), 123456789):
            assert namespaced(h, seed) == kv.namespaced_block_hash(h, namespace_seed=seed)
        digests = page_digests(list(range(1, 50)), 4, None)
        assert block_ids(digests, seed) == [
            kv.namespaced_block_hash(block_id(d), namespace_seed=seed) for d in digests
        ]


@needs_sglang
def test_wide_tokens_through_the_served_cache(sgl: object) -> None:
    """A key holding a token >= 2**32: radixbench's events equal both unified cores'."""
    from radixbench.cache.sglang.served import ServedSGLangCache
    from radixbench.cache.sglang.unified_load import load_unified

    tokens = [1, 2, (1 << 32) + 7, 4, 5, 6, 7, 8]
    got = []
    for loaded in (None, load_unified("sglang", "auto"), sgl):
        for page in (1, 4):
            alloc, pool = make_allocator(64, page), ReqToTokenPool(4, 64)
            conf = CacheConfig(page_size=page, kv_events=KVEventConfig())
            cache = (
                RadixCache(pool, alloc, conf)
                if loaded is None
                else ServedSGLangCache(pool, alloc, conf, loaded)
            )
            cache.take_actions()
            slots = alloc.alloc(8)
            with torch.inference_mode():
                cache.insert(RadixKey(tokens), slots)
            got.append([event_to_wire(e) for e in cache.take_actions()])
    assert got[0:2] == got[2:4] == got[4:6]


def test_block_ids_are_each_digests_first_8_bytes_signed() -> None:
    """``block_ids`` (one numpy pass) against ``block_id`` digest by digest, ids of both signs,
    with and without a namespace; none for no digests."""
    digests = page_digests(list(range(300)), 2, None)
    assert {block_id(d) < 0 for d in digests} == {True, False}
    assert block_ids(digests) == [block_id(d) for d in digests]
    seed = namespace_seed("lora", None)
    assert block_ids(digests, seed) == [namespaced(block_id(d), seed) for d in digests]
    assert block_ids([]) == []


def test_page_digests_reject_a_negative_token() -> None:
    with pytest.raises(OverflowError, match="negative token -1"):
        page_digests([3, -1], 2, None)
