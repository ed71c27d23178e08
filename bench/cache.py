"""Microbenchmarks of the cache's algorithm variants: matchers, evictors, insert.

Figures are medians over repetitions, in ns. Interleaved repetitions (each round times every
variant once, in turn) make background load on a shared machine hit the variants alike, so
ratios are taken within one run (the timing loops and the garbage collector's handling:
:mod:`radixbench.bench.timing`, ``GC_METHOD``). Three benches:

* ``match``: the matching walk of ``RadixCache.match_prefix`` (child lookup + ``common_prefix``
  per node, no split, no index gather) for a fully cached key of ``L`` tokens, on one edge
  (one node of ``L`` tokens) and along a deep path (``L / 1000``-token nodes, 1,000 nodes), per
  matcher; with, in the same rounds, the physical floor ``bytes==``: ``==`` of two distinct
  ``bytes`` copies of the same ``L`` int64 tokens (one ``memcmp``), and, for reference, the
  whole-array ``==`` of two ``array('q')`` (CPython's typed item loop, 2-3x slower than
  ``memcmp``). Ratios are to ``bytes==``.
* ``evict``: ``evict(16)`` per evictor (LRU policy) on a tree of ``N`` one-token evictable
  leaves, and on a tree of ``N`` one-token leaves of which all but ``E`` are locked
  (``inc_lock_ref``, as running requests lock their paths): there ``heapify-walk`` (SGLang
  before PR #14339) still walks all ``N`` nodes, while ``heapify`` (sglang 0.5.23, since PR
  #14339) heapifies only the ``E`` evictable leaves. Each evictor is timed twice, on trees
  of its own built alike: ``interleaved`` (rounds over the evictors, as above) and ``alone``
  (one untimed call, then all repetitions back to back; interleaving evicts the other
  evictors' data from the CPU caches, which inflates the O(log n) evictors). Each tree first
  gets one untimed ``evict(16)`` (so the persistent heap has dropped the entries the locks
  made stale), whose victims must agree across evictors, as must those of one more call after
  the timed rounds; every call evicts 16 more leaves of the same tree. The allocator's
  ``free`` is replaced by a no-op so that the figure is the evictor's data structure, not
  torch's per-call overhead (reported separately as ``free_ns``). Rows: ``timing``,
  ``nodes`` (tree nodes, root excluded) and ``leaves`` (evictable leaves when built), and each
  variant's speed-up over both baselines in the same timing.
* ``insert``: inserting 1,000-token requests that share 0-900-token prefixes, per matcher.
"""

from __future__ import annotations

import operator
import random
import statistics
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from time import perf_counter_ns

import torch

from radixbench.bench.timing import Row, alone, gc_paused, interleaved
from radixbench.cache import (
    EVICTORS,
    MATCHERS,
    CacheConfig,
    RadixCache,
    RadixKey,
    TokenToKVPoolAllocator,
)
from radixbench.cache.key import child_key
from radixbench.cache.matcher import Matcher, make_matcher
from radixbench.cache.node import TreeNode


@dataclass(frozen=True)
class BenchSpec:
    """Sizes and repetitions. ``quick`` shrinks everything for a smoke test."""

    match_lengths: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
    path_nodes: int = 1_000
    evict_leaves: tuple[int, ...] = (1_000, 10_000, 50_000, 100_000)
    evict_k: int = 16
    insert_requests: int = 400
    reps: int = 9
    #: ``(nodes, evictable leaves)``: trees of one-token leaves, all but ``evictable`` locked.
    evict_locked: tuple[tuple[int, int], ...] = ((50_000, 1_000),)

    def __post_init__(self) -> None:
        if self.reps < 1 or not self.match_lengths or not self.evict_leaves:
            raise ValueError("bench: reps >= 1 and non-empty size lists required")
        for nodes, evictable in self.evict_locked:
            if not 0 < evictable <= nodes:
                raise ValueError(
                    f"bench: evict_locked needs 0 < evictable <= nodes, got {nodes, evictable}"
                )

    @classmethod
    def quick(cls) -> BenchSpec:
        return cls((1_000, 10_000), 100, (1_000, 5_000), 16, 50, 3, ((5_000, 200),))


class _NullFree(TokenToKVPoolAllocator):
    """An allocator whose ``free`` does nothing, to time evictors alone (the evict bench never
    allocates after evicting, so the slots need not come back)."""

    def free(self, indices: torch.Tensor) -> None:
        pass


def _walk(root: TreeNode, key: RadixKey, matcher: Matcher) -> int:
    """The matching loop of ``match_prefix`` alone (page 1): child lookup + matcher per node."""
    node, offset, tokens = root, 0, key.token_ids
    common_prefix = matcher.common_prefix
    while offset < len(tokens):
        child = node.children.get(child_key(tokens, offset, 1, key.namespace))
        if child is None:
            break
        n = common_prefix(child.key.token_ids, tokens, offset, 1)
        offset += n
        if n < len(child.key):
            break
        node = child
    return offset


def _path_tree(length: int, nodes: int) -> TreeNode:
    """A root whose single path holds tokens ``0..length-1`` in ``nodes`` equal nodes."""
    toks = array("q", range(length))
    value = torch.zeros(length, dtype=torch.int64)
    root = TreeNode(0, RadixKey(()), value[:0], None, 0, 0)
    node, step = root, max(1, length // nodes)
    for i, start in enumerate(range(0, length, step)):
        child = TreeNode(i + 1, RadixKey(toks[start : start + step]), value[start:], node, 0, 0)
        node.children[child_key(toks, start, 1, None)] = child
        node = child
    return root


def bench_match(spec: BenchSpec) -> list[Row]:
    rows: list[Row] = []
    matchers = {m: make_matcher(m) for m in sorted(MATCHERS)}
    for shape in ("edge", "path"):
        for length in spec.match_lengths:
            nodes = 1 if shape == "edge" else min(spec.path_nodes, length)
            root = _path_tree(length, nodes)
            query = RadixKey(array("q", range(length)))
            a, b = array("q", range(length)), array("q", range(length))
            fns: dict[str, Callable[[], object]] = {
                "bytes==": partial(operator.eq, a.tobytes(), b.tobytes()),  # memcmp
                "array==": partial(operator.eq, a, b),
            }
            for name, m in matchers.items():
                if _walk(root, query, m) != length:
                    raise RuntimeError(f"bench match: {name} did not match the whole key")
                fns[name] = partial(_walk, root, query, m)
            med = interleaved(fns, spec.reps)
            for name, ns in med.items():
                rows.append(
                    {
                        "bench": "match",
                        "shape": shape,
                        "nodes": nodes,
                        "tokens": length,
                        "variant": name,
                        "median_ns": ns,
                        "x_bytes_eq": ns / med["bytes=="],
                    }
                )
    return rows


def _leaf_cache(evictor: str, n_leaves: int, evictable: int | None = None) -> RadixCache:
    """``n_leaves`` one-token leaves under the root, inserted in a seeded random order (access
    times not in id order); then all but ``evictable`` of them (a seeded random choice) are
    locked with ``inc_lock_ref``. ``evictable=None``: none locked."""
    alloc = _NullFree(n_leaves + 1)
    cache = RadixCache(None, alloc, CacheConfig(evictor=evictor, policy="lru"))
    rng = random.Random(n_leaves)
    order = list(range(n_leaves))
    rng.shuffle(order)
    for i in order:
        cache.insert(RadixKey(array("q", (i,))), torch.tensor([i + 1], dtype=torch.int64))
    if evictable is not None and evictable < n_leaves:
        leaves = list(cache.root.children.values())
        for node in random.Random(evictable).sample(leaves, n_leaves - evictable):
            cache.inc_lock_ref(node)
    return cache


def _agreed_victims(caches: dict[str, RadixCache], k: int) -> None:
    """One ``evict(k)`` on every cache; raises ``RuntimeError`` unless all victims agree."""
    victims = {e: c.evict(k).victims for e, c in caches.items()}
    if len({tuple(v) for v in victims.values()}) != 1:
        raise RuntimeError("bench evict: evictors disagree on victims")


def _evict_point(spec: BenchSpec, nodes: int, evictable: int) -> list[Row]:
    """Median ns of ``evict(k)`` per evictor on one tree shape, interleaved and alone (each on
    trees of its own), and ratios to both baselines within each timing."""
    locked = None if evictable == nodes else evictable
    rows: list[Row] = []
    for timing, timer in (("interleaved", interleaved), ("alone", alone)):
        caches = {e: _leaf_cache(e, nodes, locked) for e in sorted(EVICTORS)}
        for c in caches.values():
            if c.num_nodes != nodes or c.num_evictable_leaves != evictable:
                raise RuntimeError(f"bench evict: tree is not {nodes} nodes, {evictable} evictable")
        _agreed_victims(caches, spec.evict_k)  # untimed: drops the entries stale since the locks
        fns: dict[str, Callable[[], object]] = {
            e: partial(c.evict, spec.evict_k) for e, c in caches.items()
        }
        med = timer(fns, spec.reps)
        _agreed_victims(caches, spec.evict_k)
        del caches, fns
        rows += [
            {
                "bench": "evict",
                "timing": timing,
                "nodes": nodes,
                "leaves": evictable,
                "k": spec.evict_k,
                "variant": e,
                "median_ns": ns,
                "x_faster_than_heapify": med["heapify"] / ns,
                "x_faster_than_heapify_walk": med["heapify-walk"] / ns,
            }
            for e, ns in med.items()
        ]
    return rows


def bench_evict(spec: BenchSpec) -> list[Row]:
    rows: list[Row] = []
    for n in spec.evict_leaves:
        rows += _evict_point(spec, n, n)
    for nodes, evictable in spec.evict_locked:
        rows += _evict_point(spec, nodes, evictable)
    alloc = TokenToKVPoolAllocator(1 << 16, debug=False)  # as the simulator runs it
    slots = [alloc.alloc(1) for _ in range(spec.reps * 64)]
    with gc_paused():
        t0 = perf_counter_ns()
        for s in slots:
            assert s is not None
            alloc.free(s)
        ns = (perf_counter_ns() - t0) / len(slots)
    rows.append(
        {
            "bench": "evict",
            "timing": "alone",
            "nodes": 0,
            "leaves": 0,
            "k": 1,
            "variant": "free_ns (real allocator, per victim)",
            "median_ns": ns,
            "x_faster_than_heapify": float("nan"),
            "x_faster_than_heapify_walk": float("nan"),
        }
    )
    return rows


def bench_insert(spec: BenchSpec) -> list[Row]:
    rng = random.Random(0)
    stems = [array("q", rng.choices(range(50_000), k=900)) for _ in range(8)]
    keys = []
    for i in range(spec.insert_requests):
        stem = stems[i % len(stems)][: rng.choice((0, 100, 500, 900))]
        keys.append(RadixKey(stem + array("q", rng.choices(range(50_000), k=1000 - len(stem)))))
    value = torch.arange(1000, dtype=torch.int64)
    rows: list[Row] = []
    times: dict[str, list[int]] = {m: [] for m in sorted(MATCHERS)}
    with gc_paused():
        for r in range(max(1, spec.reps // 3) + 1):  # round 0: warm-up, untimed
            for m in times:
                cache = RadixCache(None, TokenToKVPoolAllocator(1), CacheConfig(matcher=m))
                t0 = perf_counter_ns()
                for k in keys:
                    cache.insert(k, value)
                if r:
                    times[m].append((perf_counter_ns() - t0) // len(keys))
    for m, v in times.items():
        rows.append(
            {
                "bench": "insert",
                "tokens": 1000,
                "variant": m,
                "median_ns": v and float(statistics.median(v)),
            }
        )
    return rows


def run_all(spec: BenchSpec) -> list[Row]:
    """All three benches; rows are flat dicts (see module docstring for columns)."""
    return bench_match(spec) + bench_evict(spec) + bench_insert(spec)
