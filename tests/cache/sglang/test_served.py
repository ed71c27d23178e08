"""The served-cache implementations (``sglang``, ``sglang-python``, ``sglang-legacy``): specs,
what ``ImplInfo`` reports (the tree core each cache built), user subclasses of either class,
one-line errors, guarded unlocks, per-cache clocks (caches of one process interleave without
perturbing each other) and the Rust core's ``TreeShadow`` against the Python core's own
nodes."""

from __future__ import annotations

import importlib.util
import random

import pytest

from radixbench.cache import CacheConfig, RadixKey, ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.registry import ImplError, make_cache, resolve

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed (make install)", allow_module_level=True)

from radixbench.cache.sglang.served import ServedSGLangCache
from radixbench.cache.sglang.unified_load import load_unified

UNIFIED_SUBCLASS = """
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache


class MyServed(UnifiedRadixCache):
    evictions = 0

    def evict_for_alloc(self, params, **kwargs):
        type(self).evictions += 1
        return super().evict_for_alloc(params, **kwargs)
"""
LEGACY_SUBCLASS = """
from sglang.srt.mem_cache.radix_cache import RadixCache


class MyLegacy(RadixCache):
    pass


class NotACache:
    pass
"""
CUSTOM_COMPONENT = """
from dataclasses import replace

from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.components.full import FullComponent
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache


class MyFull(FullComponent):
    pass


class CustomFull(UnifiedRadixCache):
    def __init__(self, params):
        override = {ComponentType.FULL: MyFull}
        super().__init__(replace(params, component_registry_override=override))
"""


def build(spec: str, kv: int = 64) -> ServedSGLangCache:
    return make_cache(spec, ReqToTokenPool(4, 64), TokenToKVPoolAllocator(kv), CacheConfig())


def put(cache, tokens: list[int]) -> int:
    slots = cache.allocator.alloc(len(tokens))
    p = cache.insert(RadixKey(tokens), slots)
    cache.allocator.free(slots[:p])
    return p


def test_specs_and_info() -> None:
    served, python, legacy = (resolve(s).info for s in ("sglang", "sglang-python", "sglang-legacy"))
    assert served.cls.endswith("unified_radix_cache.UnifiedRadixCache")
    assert served.tree_core in ("rust", "python") and served.tree_core_reason
    if served.tree_core == "rust":
        assert any(p.endswith(".so") for p in served.files)
    assert "sglang/srt/mem_cache/unified_cache/unified_tree_core.py" in served.files
    assert python.tree_core == "python" and "forced" in python.tree_core_reason
    assert legacy.cls.endswith("radix_cache.RadixCache") and legacy.label == "sglang-legacy"
    assert type(build("sglang-legacy")).__name__ == "SGLangCache"


def test_user_subclasses_pick_their_adapter(tmp_path) -> None:
    served = tmp_path / "served.py"
    served.write_text(UNIFIED_SUBCLASS)
    legacy = tmp_path / "legacy.py"
    legacy.write_text(LEGACY_SUBCLASS)
    cache = build(f"sglang:{served}:MyServed", kv=8)
    assert isinstance(cache, ServedSGLangCache) and cache.info().cls.endswith(".MyServed")
    assert str(served) in cache.info().files
    put(cache, [1, 2, 3, 4])
    assert cache.evict(4).num_evicted == 4 and type(cache.sgl).evictions == 1
    other = build(f"sglang-python:{legacy}:MyLegacy")
    assert type(other).__name__ == "SGLangCache" and other.info().cls.endswith(".MyLegacy")
    for bad in (f"sglang:{legacy}:NotACache", f"sglang:{legacy}:Missing", "sglang:/no/such"):
        with pytest.raises(ImplError) as info:
            resolve(bad)
        assert bad in str(info.value) and "\n" not in str(info.value)


def test_the_core_a_subclass_built_is_reported(tmp_path) -> None:
    """A custom component makes SGLang build the Python core (``tree_core_registry.py:53``)
    even where the load chose Rust: the cache reports the core it built, with SGLang's reason,
    and reads its nodes directly (no Rust shadow)."""
    path = tmp_path / "custom.py"
    path.write_text(CUSTOM_COMPONENT)
    cache = build(f"sglang:{path}:CustomFull")
    info = cache.info()
    assert info.tree_core == "python" and not cache.rust
    assert "custom components require the Python TreeCore" in info.tree_core_reason
    assert f"the load chose {resolve('sglang').info.tree_core}" in info.tree_core_reason
    assert build("sglang").info().tree_core == resolve("sglang").info.tree_core
    put(cache, [1, 2, 3])
    assert cache.tree_stats() == (1, 3, 1) and cache.evict(3).num_evicted == 3


@pytest.mark.parametrize("spec", ["sglang", "sglang-python"])
def test_unbalanced_releases_raise_and_leave_the_cache_usable(spec: str) -> None:
    cache = build(spec)
    put(cache, [1, 2, 3])
    node = cache.match_prefix(RadixKey([1, 2, 3])).last_node
    handle = cache.lock(node)
    cache.unlock(handle)
    with pytest.raises(RuntimeError):
        cache.unlock(handle)
    with pytest.raises(RuntimeError):
        cache.dec_lock_ref(node)
    assert cache.inc_lock_ref(node) == -3 and cache.dec_lock_ref(node) == 3
    assert cache.evict(3).num_evicted == 3 and cache.tree_stats() == (0, 0, 0)


def _ops(cache, seed: int):
    """A seeded stream of inserts, matches and evictions; yields each op's results and the
    tree's stats after it."""
    rng = random.Random(seed)
    for _ in range(200):
        tokens = [rng.randrange(3) for _ in range(rng.randrange(1, 9))]
        if rng.random() < 0.5 and cache.allocator.available_size() >= len(tokens):
            out: tuple = ("insert", put(cache, tokens))
        elif rng.random() < 0.7:
            m = cache.match_prefix(RadixKey(tokens))
            out = ("match", m.prefix_len, cache.node_id(m.last_node))
        else:
            out = ("evict", *cache.evict(rng.randrange(1, 6)))
        yield out, cache.tree_stats()


def test_interleaved_caches_do_not_perturb_each_other() -> None:
    """Two Python-core caches of one process, stepped alternately, give what each gives alone
    (the core's clock, node counter and lock uuids are per adapter)."""
    alone = [list(_ops(build("sglang-python", kv=24), seed)) for seed in (1, 2)]
    gens = [_ops(build("sglang-python", kv=24), seed) for seed in (1, 2)]
    together: list[list[tuple]] = [[], []]
    for _ in range(200):
        for i, gen in enumerate(gens):
            together[i].append(next(gen))
    assert together == alone


def test_shadow_matches_the_python_cores_own_nodes() -> None:
    loaded = load_unified("sglang-python", "python")
    pools = [(ReqToTokenPool(4, 64), TokenToKVPoolAllocator(48)) for _ in range(2)]
    direct, shadowed = (
        ServedSGLangCache(p, a, CacheConfig(), loaded, shadow=s)
        for (p, a), s in zip(pools, (False, True), strict=True)
    )
    assert list(_ops(direct, 5)) == list(_ops(shadowed, 5))
    assert list(direct.walk()) == list(shadowed.walk())
