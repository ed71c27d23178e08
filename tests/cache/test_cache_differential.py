"""Differential property tests: every evictor x matcher runs the same random operation stream.

For every eviction policy (T-LRU with ``TLRU_CONFIG``, so that nodes near a branch's high-water
depth are TEL-safe) x page size in {1, 4, 16} x key mode (plain; namespaced with ``extra_key`` /
``cache_salt``; EAGLE bigram), hypothesis draws streams of insert (with a priority and an
``inserted_len``) / hold (insert, then lock the path, as a running request) / match / match + lock /
unlock / evict. Each stream runs in lockstep on the reference pair (``heapify``, sglang 0.5.23's
evictor, with the ``linear`` matcher) and a window of ``WINDOW`` other evictor x matcher pairs drawn
by hypothesis (``ROTATION`` orders the pairs so that any window holds every evictor and ``WINDOW``
distinct matchers), each over its own cache and (paged) allocator: after every operation
``check_integrity`` runs on every pair and the observables must agree with the reference pair's —
insert prefix lengths, the evictions an insert needed under memory pressure, match lengths, KV
indices and last-node ids, lock/unlock size deltas, evicted token counts and victims in order, and
the sizes, node count and free KV slots. The KV pool is small (``POOL_PAGES`` pages), so inserts
evict and, with locks held, fail.

Seeds are derandomised (each parametrization gets its own, from its node id), so the suite is
reproducible; failing streams are shrunk. A ledger counts the distinct streams and operations
run; the volume check ``volume[differential]`` (``check_volume``, run by tests/cache/conftest.py
at the end of the session once every case passed; it fails, not skips, when short) requires at
least ``TARGET_OPS`` distinct operations, every evictor x matcher pair to have run streams under
every policy, and every kind of outcome the streams are meant to exercise to have occurred.
(Running every pair on every stream checked the same pairs 4x as often for 4x the time; the
window keeps every pair x policy covered.)
"""

from __future__ import annotations

import hashlib
import textwrap
from collections import Counter
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from radixbench.cache import (
    EVICTORS,
    MATCHERS,
    POLICIES,
    CacheConfig,
    RadixCache,
    RadixKey,
    ReqToTokenPool,
    check_integrity,
    make_allocator,
)

PAGES = (1, 4, 16)
MODES = ("plain", "namespaced", "bigram")
REFERENCE_EVICTOR = "heapify"
REFERENCE_MATCHER = "linear"
PAIRS = sorted(
    ((e, m) for e in EVICTORS for m in MATCHERS), key=lambda p: (p[0] != REFERENCE_EVICTOR, p)
)
#: Pair i = (evictor i mod E, matcher i mod M): with E and M coprime this lists every pair once,
#: and any ``WINDOW`` consecutive entries (cyclically) hold min(E, WINDOW) evictors and
#: min(M, WINDOW) matchers.
_E, _M = sorted(EVICTORS), sorted(MATCHERS)
ROTATION = [(_E[i % len(_E)], _M[i % len(_M)]) for i in range(len(_E) * len(_M))]
assert sorted(ROTATION) == sorted(PAIRS), "evictor and matcher counts must be coprime"
WINDOW = 5
POOL_PAGES = 16  # KV pool in pages: inserts evict, and fail while locks pin the pool
MAX_PAGES = 6  # pages per drawn key
OPS_PER_STREAM = 350
EXAMPLES = 4
TARGET_OPS = 100_000
#: per page size: TEL-safe = starting within 2 pages of the branch's high-water depth.
TLRU_CONFIG = {"threshold": 3, "next_prompt_estimate": 1}

# One op is 5 bytes drawn by hypothesis, one draw per op (tuples of integers cost ~5x more to
# draw): byte 0 picks the kind by weight (the zero byte is "evict", and evict(0) is a no-op, so
# shrinking zeroes irrelevant ops); byte 1 the namespace (bits 0-1) and the key's length in pages
# (bits 2-4); bytes 2-3 each page's pattern (2 bits a page); byte 4 the argument.
OP_BYTES = 5
KIND_WEIGHTS = {"evict": 24, "insert": 76, "hold": 30, "match": 46, "lock": 25, "unlock": 55}
KIND_BY_BYTE = tuple(kind for kind, weight in KIND_WEIGHTS.items() for _ in range(weight))
assert len(KIND_BY_BYTE) == 256
STREAM = st.lists(
    st.binary(min_size=OP_BYTES, max_size=OP_BYTES),
    min_size=OPS_PER_STREAM,
    max_size=OPS_PER_STREAM,
)


class Ledger:
    """What the differential tests ran: distinct streams (by content), their operations, the
    cache operations checked (stream ops x pairs, plus a final drain per pair), the
    parametrizations that ran a stream and those that failed one, and the outcomes seen on the
    reference pair."""

    def __init__(self) -> None:
        self.streams: set[bytes] = set()
        self.distinct_ops = 0
        self.checked_ops = 0
        self.passed: set[tuple[str, int, str]] = set()
        self.failed: set[tuple[str, int, str]] = set()
        self.outcomes: Counter[str] = Counter()
        self.pair_streams: Counter[tuple[str, str, str]] = Counter()  # (policy, evictor, matcher)


LEDGER = Ledger()


def page_patterns(page: int) -> list[list[int]]:
    """The four pages a key is made of: two constant ones and two that differ from page 0 in
    their last token or from the middle on (for page 1: tokens 0, 1, 1, 2). So prefixes collide
    often, splits happen at page boundaries, and a mismatch inside a page must round down."""
    half = page // 2
    return [[0] * page, [1] * page, [0] * (page - 1) + [1], [0] * half + [2] * (page - half)]


def make_key(mode: str, ns: int, raw: list[int]) -> RadixKey:
    if mode == "bigram":
        return RadixKey.bigram(raw)  # L raw tokens give L - 1 bigrams
    if mode == "namespaced":
        return RadixKey(
            raw, extra_key=("lora" if ns & 1 else None), cache_salt=("salt" if ns & 2 else None)
        )
    return RadixKey(raw)


def decode(op: bytes, page: int, mode: str, pats: list[list[int]]) -> tuple[str, Any, int]:
    """5-byte stream op -> (kind, RadixKey or None, int argument), built once for all pairs."""
    kind = KIND_BY_BYTE[op[0]]
    arg = op[4]
    if kind == "unlock":
        return kind, None, arg  # which held lock, modulo their number
    if kind == "evict":
        return kind, None, arg % (6 * page + 1)  # tokens to evict
    ns, n_pages, bits = op[1] & 3, 1 + (op[1] >> 2) % MAX_PAGES, op[2] | op[3] << 8
    raw = [t for i in range(n_pages) for t in pats[bits >> 2 * i & 3]]
    if mode == "bigram":
        raw.append(7)  # so that a key of n pages has n * page bigrams
    if kind == "insert" or kind == "hold":
        return kind, make_key(mode, ns, raw), arg  # priority and inserted_len, see Lane.insert
    cut = arg % (2 * page + 1)  # drop up to two pages' worth of tokens: partial pages
    return kind, make_key(mode, ns, raw[: max(1, len(raw) - cut)]), 0


def describe(kind: str, key: Any, arg: int) -> str:
    if key is None:
        return f"{kind}({arg})"
    return f"{kind}(ns={key.namespace!r}, tokens={list(key.token_ids)}, arg={arg})"


class Lane:
    """One evictor x matcher pair: its cache over a fresh allocator, and the locks it holds."""

    __slots__ = ("alloc", "cache", "locks", "page", "pair")

    def __init__(self, pair: tuple[str, str], policy: str, page: int) -> None:
        self.pair = pair
        self.alloc = make_allocator(POOL_PAGES * page, page)
        config = {k: v * page for k, v in TLRU_CONFIG.items()} if policy == "tlru" else {}
        cfg = CacheConfig(
            page_size=page,
            evictor=pair[0],
            matcher=pair[1],
            policy=policy,
            policy_config=tuple(config.items()),
        )
        self.cache = RadixCache(ReqToTokenPool(4, 64), self.alloc, cfg)
        self.page = page
        self.locks: list = []

    def step(self, kind: str, key: Any, arg: int) -> tuple:
        """Apply one op, check the cache's integrity; returns the op's observables."""
        cache = self.cache
        if kind == "insert":
            out = self.insert(key, arg)
        elif kind == "hold":  # a running request: insert, then lock its path (as sglang
            out = self.insert(key, arg)  # 0.5.23's checkpoint: insert, match, lock)
            if out[0] == "insert":
                out += self.match(key, lock=True)
        elif kind == "match" or kind == "lock":
            out = self.match(key, lock=kind == "lock")
        elif kind == "unlock":
            locks = self.locks
            out = (cache.dec_lock_ref(locks.pop(arg % len(locks))),) if locks else ()
        else:
            res = cache.evict(arg)
            out = (res.num_evicted, res.victims)
        check_integrity(cache)
        return (
            out,
            cache.evictable_size_,
            cache.protected_size_,
            cache.num_nodes,
            self.alloc.available_size(),
        )

    def insert(self, key: RadixKey, arg: int) -> tuple:
        """Insert with priority ``arg % 4`` and ``inserted_len`` ``(arg >> 2) % 8`` pages (a
        request that inserted that much of the key before: only nodes ending beyond it count
        a hit)."""
        alloc = self.alloc
        priority, inserted_len = arg % 4, (arg >> 2) % 8 * self.page
        n = len(key)
        slots = alloc.alloc(n)
        evicted = None
        if slots is None:  # memory pressure: evict, as a scheduler would, and retry
            res = self.cache.evict(n)
            evicted = (res.num_evicted, res.victims)
            slots = alloc.alloc(n)
        if slots is None:
            return ("insert-full", evicted)
        p = self.cache.insert(key, slots, priority=priority, inserted_len=inserted_len)
        alloc.free(slots[:p])
        return ("insert", evicted, p)

    def match(self, key: RadixKey, lock: bool) -> tuple:
        r = self.cache.match_prefix(key)
        out: tuple = (r.prefix_len, r.device_indices.tolist(), r.last_node.id)
        if lock:
            out += (self.cache.inc_lock_ref(r.last_node),)
            self.locks.append(r.last_node)
        return out

    def drain(self) -> tuple:
        """Release every lock and evict everything; the tree and the pool must end empty."""
        cache = self.cache
        while self.locks:
            cache.dec_lock_ref(self.locks.pop())
        res = cache.evict(self.alloc.size)
        check_integrity(cache)
        assert cache.num_nodes == 0 and self.alloc.available_size() == self.alloc.size
        return res.num_evicted, res.victims


def tally(
    seen: Counter[str], lane: Lane, kind: str, key: Any, ref: tuple, new_ids: int, page: int
) -> None:
    """Count what the reference pair's op did (``new_ids``: nodes it created)."""
    out = ref[0]
    locked = ref[2] > 0  # protected tokens (no op but lock/unlock changes them)
    if kind == "insert" or kind == "hold":
        evicted = out[1]
        if evicted and evicted[1]:
            seen["insert evicted under memory pressure"] += 1
            if locked:
                seen["insert evicted while locks held"] += 1
        if out[0] == "insert-full":
            seen["insert found the pool full (locked)"] += 1
            return
        created_leaf = out[2] < len(key)
        seen["insert new tokens" if created_leaf else "insert fully cached"] += 1
        if new_ids > created_leaf:
            seen["split by insert"] += 1
        if kind == "hold" and out[-1] < 0:
            seen["lock protected tokens"] += 1
    elif kind == "match" or kind == "lock":
        seen["match hit" if out[0] else "match miss"] += 1
        if new_ids:
            seen["split by match"] += 1
        if kind == "lock" and out[3] < 0:
            seen["lock protected tokens"] += 1
        if key.is_bigram and len(key) % page and out[0]:
            seen["bigram match rounded down to a page"] += 1
        if cross_namespace(lane.cache, key, page):
            seen["same tokens cached in another namespace only"] += 1
    elif kind == "unlock":
        if out and out[0] > 0:
            seen["unlock released tokens"] += 1
    elif out[1]:
        seen["evict with victims"] += 1
        if len(out[1]) > 1:
            seen["evict of several leaves"] += 1
        if locked:
            seen["evict while locks held"] += 1
            if ref[1] == 0:  # every unlocked token gone: the rest is pinned by locks
                seen["evict stopped at locked nodes"] += 1


def cross_namespace(cache: RadixCache, key: RadixKey, page: int) -> bool:
    """The key's first page is cached under another namespace but not under its own."""
    if key.is_bigram or len(key) < page:
        return False
    tokens = key.token_ids
    plain = tokens[0] if page == 1 else tuple(tokens[:page])
    children = cache.root.children
    own = plain if key.namespace is None else (key.namespace, plain)
    if own in children:
        return False
    for ns in range(4):
        other = make_key("namespaced", ns, []).namespace
        if other != key.namespace and (plain if other is None else (other, plain)) in children:
            return True
    return False


def lane_pairs(offset: int) -> list[tuple[str, str]]:
    """The reference pair, then the ``WINDOW`` pairs of ``ROTATION`` from ``offset`` (cyclic),
    less the reference pair if the window holds it."""
    ref = (REFERENCE_EVICTOR, REFERENCE_MATCHER)
    window = [ROTATION[(offset + k) % len(ROTATION)] for k in range(WINDOW)]
    return [ref, *(p for p in window if p != ref)]


def run_lockstep(
    policy: str, page: int, mode: str, ops: list[bytes], pairs: list[tuple[str, str]] | None = None
) -> Counter[str]:
    """Run ``ops`` on ``pairs`` (default: every pair, the reference first) in lockstep; raise on
    the first differing observable or broken invariant, naming the op, the pair and the ops that
    led there."""
    lanes = [Lane(pair, policy, page) for pair in (pairs or PAIRS)]
    ref_lane, others = lanes[0], lanes[1:]
    assert ref_lane.pair[0] == REFERENCE_EVICTOR
    pats = page_patterns(page)
    seen: Counter[str] = Counter()
    for i, op in enumerate(ops):
        kind, key, arg = decode(op, page, mode, pats)
        ids = ref_lane.cache._next_id
        lane = ref_lane
        try:
            ref = ref_lane.step(kind, key, arg)
            for lane in others:
                out = lane.step(kind, key, arg)
                if out != ref:
                    raise AssertionError(f"{lane.pair} gives {out}, {ref_lane.pair} gives {ref}")
        except AssertionError as e:  # IntegrityError included
            history = [
                f"  {j}: {describe(*decode(o, page, mode, pats))}"
                for j, o in enumerate(ops[: i + 1])
                if KIND_BY_BYTE[o[0]] != "evict" or o[4] % (6 * page + 1)  # not evict(0)
            ]
            raise type(e)(
                f"op {i} on {lane.pair} ({policy}, page {page}, {mode}): {e}\n"
                + "ops so far, evict(0) left out:\n"
                + "\n".join(history)
            ) from None
        tally(seen, ref_lane, kind, key, ref, ref_lane.cache._next_id - ids, page)
    drained = [lane.drain() for lane in lanes]
    assert all(d == drained[0] for d in drained), f"drain differs: {drained}"
    return seen


def check_volume() -> str:
    """The volume of ``test_all_variants_agree``, checked once all its cases passed: at least
    ``TARGET_OPS`` distinct random operations, each on every pair of its window with
    ``check_integrity`` after it, every pair run under every policy, and every outcome the
    streams are built to reach occurred. Returns the line for the terminal summary."""
    cases = len(POLICIES) * len(PAGES) * len(MODES)
    assert not LEDGER.failed and len(LEDGER.passed) == cases, (
        f"{len(LEDGER.passed)} of {cases} cases passed and recorded their streams"
    )
    assert LEDGER.distinct_ops >= TARGET_OPS, (
        f"{LEDGER.distinct_ops} distinct ops, want >= {TARGET_OPS}"
    )
    assert LEDGER.checked_ops >= LEDGER.distinct_ops * WINDOW
    uncovered = [
        (policy, *pair)
        for policy in POLICIES
        for pair in PAIRS
        if LEDGER.pair_streams[(policy, *pair)] < 2
    ]
    assert not uncovered, f"pairs that ran fewer than 2 streams under a policy: {uncovered}"
    wanted = [
        "insert new tokens",
        "insert fully cached",
        "insert evicted under memory pressure",
        "insert evicted while locks held",
        "insert found the pool full (locked)",
        "split by insert",
        "split by match",
        "match hit",
        "match miss",
        "lock protected tokens",
        "unlock released tokens",
        "evict with victims",
        "evict of several leaves",
        "evict while locks held",
        "evict stopped at locked nodes",
        "bigram match rounded down to a page",
        "same tokens cached in another namespace only",
    ]
    rare = [name for name in wanted if LEDGER.outcomes[name] < 100]
    assert not rare, f"streams too rarely reach: {rare}"
    seen = ", ".join(f"{name} {count}" for name, count in sorted(LEDGER.outcomes.items()))
    return "\n".join(
        [
            f"{len(LEDGER.streams)} distinct streams, {LEDGER.distinct_ops} distinct ops "
            f"(>= {TARGET_OPS}), {LEDGER.checked_ops} checked cache ops ({len(PAIRS)} pairs, "
            f"{WINDOW + 1} a stream)",
            *textwrap.wrap(f"outcomes: {seen}", 96, initial_indent="  ", subsequent_indent="  "),
        ]
    )


@pytest.mark.volume("differential", check_volume)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)
@given(ops=STREAM, offset=st.integers(0, len(ROTATION) - 1))
def test_all_variants_agree(policy: str, page: int, mode: str, ops: list, offset: int) -> None:
    assume(len(set(ops)) > 1)  # hypothesis' first, simplest stream repeats one op: skip it
    pairs = lane_pairs(offset)
    # SGLang runs its scheduler loop under no_grad, or torch.inference_mode when
    # SGLANG_ENABLE_TORCH_INFERENCE_MODE is set; for the cache's int64 index tensors both behave
    # alike, and inference mode skips version-counter bookkeeping (~25% of this module's time).
    try:
        with torch.inference_mode():
            seen = run_lockstep(policy, page, mode, ops, pairs)
    except BaseException:
        LEDGER.failed.add((policy, page, mode))
        raise
    digest = hashlib.sha256(repr(ops).encode()).digest()
    if digest not in LEDGER.streams:
        LEDGER.streams.add(digest)
        LEDGER.distinct_ops += len(ops)
        LEDGER.outcomes.update(seen)
    LEDGER.checked_ops += (len(ops) + 1) * len(pairs)
    LEDGER.pair_streams.update((policy, *pair) for pair in pairs)
    LEDGER.passed.add((policy, page, mode))
