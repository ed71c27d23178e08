"""One-process benchmark of radixbench's cache against SGLang's own caches: the Rust and the
Python tree core of the served ``UnifiedRadixCache`` (``--impl sglang``, ``sglang-python``) and
the classic ``RadixCache`` (``sglang-legacy``), next to radixbench's matchers and evictors.

Every implementation is driven through the same ``PrefixCache`` calls (made by
``registry.make_cache`` on radixbench's ``TokenToKVPoolAllocator``, debug checks off, as the
simulator runs it), so a figure is the cost of the call a scheduler makes, adapters included:
``match_prefix`` returns the matched KV indices (radixbench: one ``torch.cat``; SGLang:
``path_device_indices``), ``evict`` frees its victims' slots through the allocator. Cases:

* ``match``: ``match_prefix`` of a fully cached key: 1M tokens on one edge; 1k and 1M tokens
  along a 1,000-node path; ``chat``: 64 sessions of 2,048 tokens (a 256-token system prompt
  shared, 7 turns of 256) in one tree, each call the next session's whole history plus a new,
  uncached 128-token message. Columns: radixbench per matcher (evictor ``heapify``).
* ``evict``: ``evict(16)`` on trees of 1k / 50k / 100k one-token evictable leaves under the
  root (inserted in a seeded order); every call evicts 16 more. radixbench per evictor.
* ``insert``: 1,000-token inserts sharing 0-900-token prefixes (fresh cache per round; per call).
* ``adapter``: the overhead of ``--impl sglang`` / ``sglang-python`` per op: what a run
  records against SGLang's own calls on the same ops (:mod:`radixbench.bench.served_adapter`).
* ``mixed``: a request stream (16 chats of several turns interleaved; the KV pool holds two
  thirds of what they add up to, so evictions run): per request ``match_prefix`` of the
  prompt, lock, ``evict`` of the shortfall, ``insert`` of prompt + reply, unlock (fresh cache
  per round; per request). radixbench's evictors with ``galloping`` and its matchers with
  ``heapify``.

A case's variants are timed in interleaved rounds (each round times every variant once, in turn,
after one untimed warm-up round; the garbage collector as :mod:`radixbench.bench.timing` says):
rows give the median and min / max per call in ns, and the ratio to the Rust core's median
(``x_sglang`` = median / Rust median: > 1 is slower than the Rust core). Trees are built untimed
and checked (node and leaf counts); the victims of a round must agree across variants. An SGLang
implementation that cannot be loaded is left out, with the reason in ``skipped``.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from radixbench.bench.timing import Row, Timed, interleaved_stats
from radixbench.cache import EVICTORS, MATCHERS, CacheConfig, RadixKey, TokenToKVPoolAllocator
from radixbench.cache.matcher import make_matcher
from radixbench.cache.registry import ImplError, make_cache, resolve

#: SGLang's caches, as columns: ``--impl`` spec -> column name.
SGLANG = {"sglang": "sglang (Rust core)", "sglang-python": "sglang (Python core)",
          "sglang-legacy": "sglang-legacy"}  # fmt: skip
RUST = SGLANG["sglang"]


@dataclass(frozen=True)
class ServedSpec:
    """Sizes and rounds; ``quick`` shrinks everything for a smoke test."""

    edge_tokens: int = 1_000_000
    path_tokens: tuple[int, ...] = (1_000, 1_000_000)
    path_nodes: int = 1_000
    chat: tuple[int, int] = (64, 2_048)  # sessions, tokens each
    evict_leaves: tuple[int, ...] = (1_000, 50_000, 100_000)
    evict_k: int = 16
    inserts: int = 200
    mixed_requests: int = 300
    reps: int = 9
    adapter_requests: int = 600

    @classmethod
    def quick(cls) -> ServedSpec:
        return cls(10_000, (1_000, 10_000), 100, (8, 512), (1_000, 3_000), 16, 20, 40, 3, 60)


def _key(tokens: Any) -> RadixKey:
    return RadixKey(array("q", tokens))


def available(specs: tuple[str, ...] = tuple(SGLANG)) -> tuple[list[str], dict[str, str]]:
    """The SGLang specs that load here, and the others with why (one line each)."""
    ok, skipped = [], {}
    for spec in specs:
        try:
            resolve(spec)
            ok.append(spec)
        except ImplError as e:
            skipped[spec] = str(e)
    return ok, skipped


def _make(
    spec: str, slots: int, evictor: str = "heapify", matcher: str = "galloping", pool: Any = None
) -> Any:
    alloc = TokenToKVPoolAllocator(slots, debug=False)
    return make_cache(spec, pool, alloc, CacheConfig(evictor=evictor, matcher=matcher))


def _columns(sglang: list[str], axis: str) -> dict[str, Callable[[int], Any]]:
    """Column -> factory(slots): radixbench per evictor or matcher, then each SGLang cache."""
    names = sorted(EVICTORS) if axis == "evictor" else sorted(MATCHERS)
    cols: dict[str, Callable[[int], Any]] = {}
    for n in names:
        kw: dict[str, Any] = {axis: n}
        cols[f"radixbench {n}"] = partial(_make, "radixbench", **kw)
    for spec in sglang:
        cols[SGLANG[spec]] = partial(_make, spec)
    return cols


def _fill(cache: Any, tokens: array) -> None:
    slots = cache.allocator.alloc(len(tokens))
    assert slots is not None
    cache.allocator.free(slots[: cache.insert(RadixKey(tokens), slots)])


def _path(cache: Any, tokens: array, nodes: int) -> None:
    """``tokens`` as one path of ``nodes`` equal nodes: one insert, then matches of shorter and
    shorter prefixes, each splitting the first node (radixbench builds with ``memcmp``)."""
    fast = getattr(cache, "matcher", None)
    if fast is not None:
        cache.matcher = make_matcher("memcmp")
    _fill(cache, tokens)
    step = len(tokens) // nodes
    for k in range(nodes - 1, 0, -1):
        cache.match_prefix(RadixKey(tokens[: k * step]))
    if fast is not None:
        cache.matcher = fast
    if cache.tree_stats()[:2] != (nodes, len(tokens)):
        raise RuntimeError(f"bench served: path is {cache.tree_stats()}, not {nodes} nodes")


def _rows(case: str, stats: dict[str, tuple[float, float, float]], **extra: object) -> list[Row]:
    rust = stats[RUST][0] if RUST in stats else float("nan")
    return [
        {"bench": "served", "case": case, **extra, "variant": v, "median_ns": med,
         "min_ns": lo, "max_ns": hi, "x_sglang": med / rust}
        for v, (med, lo, hi) in stats.items()
    ]  # fmt: skip


def _check_match(name: str, cache: Any, key: RadixKey, want: int) -> None:
    got = cache.match_prefix(key).prefix_len
    if got != want:
        raise RuntimeError(f"bench served: {name} matched {got} tokens, not {want}")


def bench_match(spec: ServedSpec, sglang: list[str]) -> list[Row]:
    rows: list[Row] = []
    shapes = [("edge", spec.edge_tokens, 1)] + [
        ("path", n, spec.path_nodes) for n in spec.path_tokens
    ]
    for shape, length, nodes in shapes:
        tokens = array("q", range(length))
        fns: dict[str, Any] = {}  # closures binding their case by default arguments
        for name, factory in _columns(sglang, "matcher").items():
            cache = factory(length + 1)
            _path(cache, tokens, nodes)
            _check_match(name, cache, RadixKey(tokens), length)
            fns[name] = lambda c=cache, t=tokens: c.match_prefix(RadixKey(t))
        rows += _rows(
            f"match {shape}", interleaved_stats(fns, spec.reps), tokens=length, nodes=nodes
        )
        del fns
    return rows + _bench_chat(spec, sglang)


def _chats(sessions: int, tokens: int) -> list[array]:
    """Each session's history (a shared 256-token system prompt, then its own turns)."""
    rng = random.Random(0)
    system = [rng.randrange(1 << 40) for _ in range(256)]
    return [array("q", system + [rng.randrange(1 << 40) for _ in range(tokens - 256)])
            for _ in range(sessions)]  # fmt: skip


def _bench_chat(spec: ServedSpec, sglang: list[str]) -> list[Row]:
    sessions, length = spec.chat
    chats = _chats(sessions, length)
    turn = 256
    queries = [RadixKey(c + array("q", range(i, i + 128))) for i, c in enumerate(chats)]
    fns: dict[str, Any] = {}  # closures binding their case by default arguments
    for name, factory in _columns(sglang, "matcher").items():
        cache = factory(sessions * length + 1)
        for end in range(turn + 256, length + 1, turn):  # turn by turn: a node per turn
            for c in chats:
                _fill(cache, c[:end])
        _check_match(name, cache, queries[0], length)
        it = iter(range(1 << 62))
        fns[name] = lambda c=cache, it=it: c.match_prefix(queries[next(it) % sessions])
    return _rows("match chat", interleaved_stats(fns, spec.reps), tokens=length, nodes=sessions)


def _leaves(cache: Any, n: int) -> Any:
    order = list(range(n))
    random.Random(n).shuffle(order)
    for i in order:
        _fill(cache, array("q", (i,)))
    if cache.tree_stats() != (n, n, n):
        raise RuntimeError(f"bench served: leaf tree is {cache.tree_stats()}, not {n} leaves")
    return cache


def bench_evict(spec: ServedSpec, sglang: list[str]) -> list[Row]:
    rows: list[Row] = []
    for n in spec.evict_leaves:
        caches = {k: _leaves(f(n + 1), n) for k, f in _columns(sglang, "evictor").items()}
        victims: dict[str, list[tuple[int, ...]]] = {k: [] for k in caches}
        fns: dict[str, Any] = {
            k: lambda c=c, v=victims[k]: v.append(tuple(c.evict(spec.evict_k).victims))
            for k, c in caches.items()
        }
        stats = interleaved_stats(fns, spec.reps)
        if len({tuple(v) for v in victims.values()}) != 1:
            raise RuntimeError(f"bench served: implementations disagree on victims at {n} leaves")
        rows += _rows("evict", stats, leaves=n, k=spec.evict_k)
        del caches, fns
    return rows


def _stream_fn(
    factory: Callable[[int], Any], slots: int, work: Callable[[Any], object]
) -> tuple[Callable[[], None], Callable[[], None]]:
    """A timed call that runs ``work`` on a fresh cache built (untimed) just before it; the
    cache is dropped at the next build, so freeing it is not timed either."""
    box: list[Any] = []

    def prepare() -> None:
        box.clear()
        box.append(factory(slots))

    def run() -> None:
        work(box[0])

    return prepare, run


def bench_insert(spec: ServedSpec, sglang: list[str]) -> list[Row]:
    rng = random.Random(0)
    stems = [[rng.randrange(50_000) for _ in range(900)] for _ in range(8)]
    keys = []
    for i in range(spec.inserts):
        stem = stems[i % len(stems)][: rng.choice((0, 100, 500, 900))]
        keys.append(_key(stem + [rng.randrange(50_000) for _ in range(1000 - len(stem))]))
    value = torch.arange(1000, dtype=torch.int64)

    def work(cache: Any) -> None:
        for k in keys:
            cache.insert(k, value)

    fns: dict[str, Timed] = {
        k: _stream_fn(f, 2, work) for k, f in _columns(sglang, "matcher").items()
    }
    stats = interleaved_stats(fns, spec.reps, per=len(keys))
    return _rows("insert", stats, tokens=1000)


def _requests(n: int) -> tuple[list[tuple[array, int]], int]:
    """``(prompt, reply tokens)``: 16 chats interleaved; turn k resends the history. Also the
    tokens of all histories at the end (what an infinite cache would hold)."""
    rng = random.Random(1)
    history = [array("q", [rng.randrange(1 << 40) for _ in range(512)]) for _ in range(16)]
    out = []
    for _ in range(n):
        s = rng.randrange(16)
        history[s] += array("q", [rng.randrange(1 << 40) for _ in range(rng.randrange(32, 256))])
        reply = rng.randrange(32, 256)
        out.append((array("q", history[s]), reply))
        history[s] += array("q", [rng.randrange(1 << 40) for _ in range(reply)])
    return out, sum(len(h) for h in history)


def _serve(cache: Any, requests: list[tuple[array, int]]) -> int:
    """One request after the other, as a scheduler drives a cache (see the module docstring);
    returns the number of ``evict`` calls."""
    alloc, evictions = cache.allocator, 0
    for prompt, reply in requests:
        m = cache.match_prefix(RadixKey(prompt))
        cache.inc_lock_ref(m.last_node)
        need = len(prompt) + reply - m.prefix_len
        if alloc.available_size() < need:
            cache.evict(need - alloc.available_size())
            evictions += 1
        new = alloc.alloc(need)
        assert new is not None, "bench served: the mixed stream's KV pool is too small"
        seq = prompt + array("q", range(reply))
        value = torch.cat((m.device_indices, new))
        cached = cache.insert(RadixKey(seq), value)
        alloc.free(value[m.prefix_len : cached])
        cache.dec_lock_ref(m.last_node)
    return evictions


def bench_mixed(spec: ServedSpec, sglang: list[str]) -> list[Row]:
    requests, total = _requests(spec.mixed_requests)
    slots = max(2 * max(len(p) + r for p, r in requests), total * 2 // 3)
    cols = {f"radixbench {e}/galloping": (e, "galloping") for e in sorted(EVICTORS)}
    cols |= {f"radixbench heapify/{m}": ("heapify", m) for m in sorted(MATCHERS)}
    factories: dict[str, Callable[[int], Any]] = {
        k: partial(_make, "radixbench", evictor=e, matcher=m) for k, (e, m) in cols.items()
    }
    factories |= {SGLANG[s]: partial(_make, s) for s in sglang}
    evictions = _serve(_make("radixbench", slots), requests)
    if not evictions:
        raise RuntimeError("bench served: the mixed stream never evicts")
    fns: dict[str, Timed] = {
        k: _stream_fn(f, slots, lambda c: _serve(c, requests)) for k, f in factories.items()
    }
    stats = interleaved_stats(fns, spec.reps, per=len(requests))
    return _rows("mixed", stats, requests=len(requests), evictions=evictions)


def run_served(spec: ServedSpec) -> tuple[list[Row], dict[str, str]]:
    """Every case, then the adapter's overhead (``case`` ``adapter``,
    :mod:`radixbench.bench.served_adapter`); the rows and the SGLang implementations left out
    (with why)."""
    from radixbench.bench.served_adapter import bench_adapter

    sglang, skipped = available()
    rows = bench_match(spec, sglang) + bench_evict(spec, sglang)
    rows += bench_insert(spec, sglang) + bench_mixed(spec, sglang)
    rows += bench_adapter(spec.adapter_requests, sglang)
    return rows, skipped
