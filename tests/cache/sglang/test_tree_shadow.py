"""The Rust core's shape shadow (``TreeShadow``) reads a new node's KV slots only when a split
under its parent needs them (issue 31 item 5: the shadow's calls into the core between SGLang's
own calls cost SGLang's calls time), and still follows the tree exactly: checked here against
the Python core's own nodes on split-heavy streams (every op), and in lockstep against
radixbench and both cores by ``test_served_fidelity.py``."""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Iterator
from typing import Any

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed (make install)", allow_module_level=True)

from radixbench.bench.served import _requests
from radixbench.bench.served_adapter import _mixed, _request
from radixbench.cache import (
    CacheConfig,
    RadixKey,
    ReqToTokenPool,
    TokenToKVPoolAllocator,
    make_allocator,
)
from radixbench.cache.registry import make_cache
from radixbench.cache.sglang.served import ServedSGLangCache
from radixbench.cache.sglang.tree_shadow import TreeShadow, path_reader
from radixbench.cache.sglang.unified_load import load_unified


def _stream(cache: ServedSGLangCache, seed: int, ops: int = 300) -> Iterator[tuple[Any, ...]]:
    """Seeded inserts (short keys over 3 tokens: splits at every depth), matches (which split
    too), lock / unlock pairs and evictions; yields each op's result, the stats and the whole
    tree (``walk``, in order) after it."""
    rng = random.Random(seed)
    locked: list[Any] = []
    page = cache.page_size
    for _ in range(ops):
        tokens = [rng.randrange(3) for _ in range(page * rng.randrange(1, 9))]
        r = rng.random()
        if r < 0.4 and cache.allocator.available_size() >= len(tokens):
            slots = cache.allocator.alloc(len(tokens))
            cached = cache.insert(RadixKey(tokens), slots)
            cache.allocator.free(slots[:cached])
            out: tuple[Any, ...] = ("insert", cached)
        elif r < 0.7:
            m = cache.match_prefix(RadixKey(tokens))
            out = ("match", m.prefix_len, cache.node_id(m.last_node))
            if rng.random() < 0.3:
                locked.append(m.last_node)
                out += ("lock", cache.inc_lock_ref(m.last_node))
        elif r < 0.8 and locked:
            out = ("unlock", cache.dec_lock_ref(locked.pop(rng.randrange(len(locked)))))
        else:
            out = ("evict", *cache.evict(rng.randrange(1, 6) * page))
        yield out, cache.tree_stats(), list(cache.walk())


@pytest.mark.parametrize("unread", [0, TreeShadow.UNREAD])
@pytest.mark.parametrize("page", [1, 4])
@pytest.mark.parametrize("seed", range(6))
def test_the_shadow_follows_the_python_cores_own_nodes(
    seed: int, page: int, unread: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``unread``: how many children with unread slots a split leaves unread (0: a split
    reads every sibling's slot)."""
    monkeypatch.setattr(TreeShadow, "UNREAD", unread)
    loaded = load_unified("sglang-python", "python")
    own, shadowed = (
        ServedSGLangCache(ReqToTokenPool(4, 64), make_allocator(40 * page, page),
                          CacheConfig(page_size=page), loaded, shadow=s)
        for s in (False, True)
    )  # fmt: skip
    for i, (a, b) in enumerate(zip(_stream(own, seed), _stream(shadowed, seed), strict=True)):
        assert a == b, f"op {i}"


def _slot_reads(monkeypatch: pytest.MonkeyPatch, cache: Any) -> list[int]:
    """The nodes whose KV slots the cache's shadow reads from now on."""
    reads: list[int] = []
    core = cache.tree.shadow.core

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(core, name)

        def get_component_device_value(self, node: int, component: Any) -> Any:
            reads.append(node)
            return core.get_component_device_value(node, component)

    monkeypatch.setattr(cache.tree.shadow, "core", Counting())
    return reads


def test_new_leaves_cost_no_slot_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request stream whose turns extend their chat (prompt, then the reply: leaves, no
    splits) makes the shadow read no KV slots; a stream whose inserts diverge inside a node
    (splits) reads some, fewer than one per new node (the old shadow: one per new node, two
    per split)."""
    requests, _ = _requests(60)
    slots = sum(len(p) + r for p, r in requests)
    grows = make_cache("sglang", ReqToTokenPool(4, 1 << 16), TokenToKVPoolAllocator(slots),
                       CacheConfig())  # fmt: skip
    reads = _slot_reads(monkeypatch, grows)
    for i, (prompt, reply) in enumerate(requests):
        _request(grows, i, prompt, reply)
    assert grows.tree_stats()[0] > 60 and reads == []
    splits = make_cache("sglang", None, TokenToKVPoolAllocator(slots), CacheConfig())
    reads = _slot_reads(monkeypatch, splits)
    for prompt, reply in requests:
        _mixed(splits, prompt, reply)  # its reply tokens differ from the next turn's
    assert 0 < len(reads) < splits.tree_stats()[0]


def test_paths_read_from_the_rust_cores_binding_are_its_own() -> None:
    """``path_reader`` takes the Rust core's binding call (half the cost per path node): the
    same paths, node for node, as the core's ``collect_path_info``; the Python core gets its
    own call's."""
    requests, _ = _requests(40)
    for spec in ("sglang", "sglang-python"):
        cache = make_cache(spec, None, TokenToKVPoolAllocator(1 << 16), CacheConfig())
        for prompt, reply in requests:
            _mixed(cache, prompt, reply)
        core, read = cache.core, path_reader(cache.core)
        binding = getattr(core, "_binding", None)
        assert (binding is not None and getattr(read, "__self__", None) is binding) == (
            spec == "sglang"
        )
        handles = [cache.tree.node_handle(n) for n, _ in cache.walk()]
        assert len(handles) > 20
        want = [
            [(i.node_id, i.parent_id, i.path_start, i.path_end, i.full_value_len, i.num_children)
             for i in path]
            for path in core.collect_path_info(handles)
        ]  # fmt: skip
        assert [list(p) for p in read(handles)] == want
