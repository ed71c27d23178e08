"""``examples/sglang_unified_persistent_heap.py``: the persistent-heap patch of the served cache's
Python tree core evicts exactly what upstream does.

* Lockstep: upstream ``sglang-python`` and the patch replay one seeded stream (inserts under
  memory pressure, matches, locks and unlocks, evictions) for every policy x page size {1, 16};
  after every op their results (victims by id, in order), sizes, counts and tree walk agree.
* A small ``radixbench compare`` of the two through the simulator: exit 0, equivalence OK,
  evictions timed on both.
* Under ``sglang:`` the patch still runs on the Python core (SGLang's rule for custom
  components), and a ``reset`` keeps the heap on the new leaf set.
"""

from __future__ import annotations

import importlib.util
import random
from array import array
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from radixbench.cache import POLICIES, CacheConfig, RadixKey, ReqToTokenPool, make_allocator
from radixbench.cache.registry import make_cache

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed (make install)", allow_module_level=True)

from radixbench.harness.cli import main

EXAMPLE = Path(__file__).parents[2] / "examples" / "sglang_unified_persistent_heap.py"
PATCH = f"sglang-python:{EXAMPLE}:PersistentHeapUnifiedRadixCache"
OPS = 1_500


def _cache(spec: str, policy: str, page: int) -> Any:
    alloc = make_allocator(96 * page, page)
    return make_cache(spec, ReqToTokenPool(4, 64), alloc, CacheConfig(page, policy=policy))


def _stream(seed: int, page: int) -> list[tuple[str, array, int]]:
    """``(op, tokens, arg)``: few first tokens, so paths share prefixes and split."""
    rng = random.Random(seed)
    out = []
    for _ in range(OPS):
        n = rng.randrange(1, 6) * page
        tokens = array("q", [rng.randrange(3)] + [rng.randrange(6) for _ in range(n - 1)])
        out.append((rng.choice("iiimmlue"), tokens, rng.randrange(1, 4 * page)))
    return out


def _apply(cache: Any, locks: list[Any], op: str, tokens: array, arg: int) -> tuple:
    alloc = cache.allocator
    if op == "i":
        evicted = []
        if alloc.available_size() < len(tokens):
            evicted = cache.evict(len(tokens)).victims
        slots = alloc.alloc(len(tokens))
        if slots is None:
            return ("full", evicted)
        cached = cache.insert(RadixKey(tokens), slots)
        alloc.free(slots[:cached])
        return ("insert", cached, evicted)
    if op == "m":
        r = cache.match_prefix(RadixKey(tokens))
        return ("match", r.prefix_len, cache.node_id(r.last_node))
    if op == "l":
        node = cache.match_prefix(RadixKey(tokens)).last_node
        locks.append(node)
        return ("lock", cache.inc_lock_ref(node))
    if op == "u":
        return ("unlock", cache.dec_lock_ref(locks.pop(0)) if locks else None)
    return ("evict", *cache.evict(arg))


@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_victims_in_upstreams_order(policy: str, page: int) -> None:
    upstream, patch = _cache("sglang-python", policy, page), _cache(PATCH, policy, page)
    assert type(patch.sgl).__name__ == "PersistentHeapUnifiedRadixCache"
    locks: tuple[list[Any], list[Any]] = ([], [])
    evicted = 0
    for i, (op, tokens, arg) in enumerate(_stream(sorted(POLICIES).index(policy), page)):
        a = _apply(upstream, locks[0], op, tokens, arg)
        b = _apply(patch, locks[1], op, tokens, arg)
        assert a == b, f"{policy}, page {page}, op {i} ({op}): {a} != {b}"
        assert upstream.tree_stats() == patch.tree_stats(), f"op {i}"
        assert list(upstream.walk()) == list(patch.walk()), f"op {i}"
        evicted += len(a[-1]) if op in "ie" and a[0] != "full" else 0
    assert evicted > 100  # the stream does evict


def test_runs_on_the_python_core_and_survives_reset() -> None:
    cache = _cache(PATCH.replace("sglang-python:", "sglang:"), "lru", 1)
    info = cache.info()
    assert info.tree_core == "python" and "custom components" in info.tree_core_reason
    full = next(iter(cache.sgl.components.values()))
    assert full.persistent
    for t in range(8):
        slots = cache.allocator.alloc(2)
        cache.insert(RadixKey(array("q", [t, t])), slots)
    cache.reset()
    leaves = cache.core.evictable_device_leaves
    assert type(leaves).__name__ == "_TrackedLeaves" and not leaves and not full._heap
    slots = cache.allocator.alloc(6)
    cache.insert(RadixKey(array("q", [1, 2, 3])), slots[:3])
    cache.insert(RadixKey(array("q", [4, 5, 6])), slots[3:])
    assert len(full._heap) == 2 and cache.evict(3).victims == [1]


def test_compare_equivalence_ok(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "runs"
    argv = ["compare", "eviction-pressure", "--requests", "300", "--kv-capacity", "6000"]
    argv += ["--impl", f"sglang-python,{PATCH}", "--out", str(out), "--no-progress", "--no-aa"]
    assert main(argv) == 0
    assert "equivalence: OK" in capsys.readouterr().out
    ops = pd.read_parquet(next(out.iterdir()) / "ops.parquet")
    calls = ops[ops.op == "evict"].groupby("variant").size()
    assert len(calls) == 2 and (calls > 50).all() and calls.nunique() == 1
