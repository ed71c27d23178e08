"""Differential tests against the cache sglang 0.5.23 serves: radixbench's ``RadixCache`` and
``UnifiedRadixCache`` with BOTH tree cores — Rust (the bundled extension) and Python — loaded
from the installed package by ``unified_load.load_unified`` and driven through
``served.ServedSGLangCache``, replay the same operation streams in lockstep and must agree
after every operation.

The streams, their decoding, the request flows (admit, chunked prefill, decode steps with
checkpoints, finish = ``release(checkpoint=True)``, retraction = ``release(checkpoint=False)``,
over-allocated pages freed after each) and the raw tree operations (insert under memory pressure,
match, lock, unlock, evict) are those of ``test_legacy_fidelity.py`` (against the legacy
``RadixCache``), loaded from that file. Each op runs on radixbench, on the Rust core and on the
Python core, each with its own allocator, ``ReqToTokenPool`` and clock.

Compared after EVERY operation, both cores against radixbench: the op's results (insert prefix
lengths, match lengths, KV indices and last-node ids, lock deltas, evicted tokens and victim ids
in order, the evictions an insert or extend needed, failed allocations); evictable / protected /
total sizes, node and evictable-leaf counts (``tree_stats``: the Python core's node arena and
``evictable_device_leaves``, the Rust core's ``TreeShadow``); the set of free KV slots; the whole
``req_to_token`` table; every running request's ``cache_protected_len`` / ``cache_inserted_len``
/ last node; and the whole tree: ``walk()`` (node ids — radixbench's numbering — and parents, in
order) and per node its KV slots and lock count. Node access times, hit counts and priorities
are the cores' own (the Rust core does not expose them): their effect is compared through the
victims and their order, under every policy.

Cases: every policy (``tlru`` included: both unified cores keep the T-LRU lengths) x page size
{1, 16} x every evictor with matcher ``galloping``; plus every policy x page size with evictor
``heapify`` and each other matcher (``linear``, ``memview``, ``numpy``, ``memcmp``). Volume: at
least ``TARGET_OPS`` distinct ops replayed on all three without a mismatch in the default suite
(the volume check ``volume[served-fidelity]``: ``check_total``, run by tests/cache/conftest.py at
the end of the session once every case passed; it fails, not skips, when short),
``SLOW_TARGET_OPS`` under ``-m slow`` (``volume[served-fidelity-slow]``). Skipped, with the reason,
only where sglang is not installed or cannot be loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import time
from array import array
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import assume, given, settings

from radixbench.cache import (
    EVICTORS,
    MATCHERS,
    POLICIES,
    CacheConfig,
    RadixCache,
    RadixKey,
    ReqToTokenPool,
    TokenToKVPoolAllocator,
    make_allocator,
)
from radixbench.cache.radix_cache import counter_clock

if importlib.util.find_spec("sglang") is None:
    pytest.skip(
        "sglang is not installed (make install: pip install --no-deps 'sglang==0.5.23' "
        "msgspec); served-cache fidelity tests skipped",
        allow_module_level=True,
    )

from radixbench.cache.sglang.loader import SGLangLoadError
from radixbench.cache.sglang.served import ServedSGLangCache
from radixbench.cache.sglang.unified_load import load_unified

try:
    RUST = load_unified("sglang", "auto")
    PYTHON = load_unified("sglang-python", "python")
except SGLangLoadError as _e:
    pytest.skip(f"sglang's UnifiedRadixCache cannot be loaded: {_e}", allow_module_level=True)
if RUST.core != "rust":
    pytest.skip(f"the Rust tree core is not used here: {RUST.core_reason}", allow_module_level=True)


def _sibling(name: str) -> Any:
    """``test_legacy_fidelity.py`` (streams, decoding, the driver), loaded under its own name."""
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"radixbench_tests_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


base = _sibling("test_legacy_fidelity.py")

PAGES = (1, 16)
POLICY_NAMES = sorted(POLICIES)
EVICTOR_NAMES = sorted(EVICTORS)
MATCHER = "galloping"
EXTRA_MATCHERS = tuple(m for m in sorted(MATCHERS) if m != MATCHER)
CASES = [(p, g, e, MATCHER) for p in POLICY_NAMES for g in PAGES for e in EVICTOR_NAMES] + [
    (p, g, "heapify", m) for m in EXTRA_MATCHERS for p in POLICY_NAMES for g in PAGES
]
EXAMPLES = 2
SLOW_EXAMPLES = 20
TARGET_OPS = 100_000
SLOW_TARGET_OPS = 1_000_000


class Side(base.Side):
    """One implementation; node identities through ``PrefixCache.node_id`` (the unified cores'
    nodes are integer handles)."""

    def __init__(self, cache: Any, alloc: TokenToKVPoolAllocator, pool: ReqToTokenPool, name: str):
        super().__init__(cache, alloc, pool)
        self.name = name

    def nid(self, node: Any) -> int:
        return self.cache.node_id(node)

    def match(self, op: Any) -> tuple[tuple, Any]:
        r = self.cache.match_prefix(op.key())
        return (r.prefix_len, r.device_indices.tolist(), self.nid(r.last_node)), r.last_node

    def op_admit(self, op: Any) -> tuple:
        if len(self.reqs) >= base.MAX_RUNNING:
            return ("admit-busy",)
        row = self.pool.alloc()
        assert row is not None
        extra, salt = base.NAMESPACES[op.ns]
        prompt = array("q", op.tokens)
        req = base.Req(prompt, len(prompt), row, extra, salt, op.arg)
        n = len(prompt) if op.flag else len(prompt) - 1
        r = self.cache.match_prefix(RadixKey(prompt, extra, salt, limit=n))
        req.lock = self.cache.lock(r.last_node)
        req.last_node = r.last_node
        req.cache_protected_len = req.filled = req.cap = r.prefix_len
        self.pool.write(row, 0, r.device_indices)
        self.reqs.append(req)
        return ("admit", r.prefix_len, r.device_indices.tolist(), self.nid(r.last_node))

    def state(self) -> tuple:
        c = self.cache
        return (
            c.evictable_size(),
            c.protected_size(),
            c.total_size(),
            c.tree_stats(),
            self.alloc.available_size(),
            self.pool.available_size(),
            tuple(
                (r.cache_protected_len, r.cache_inserted_len, self.nid(r.last_node), r.filled)
                for r in self.reqs
            ),
        )

    def shape(self) -> tuple[list[tuple[int, int]], list[tuple[int, list[int], int]]]:
        """``walk()`` and, per node id, its KV slots and lock count."""
        c = self.cache
        order = list(c.walk())
        if isinstance(c, RadixCache):
            nodes = {}
            stack = [c.root]
            while stack:
                node = stack.pop()
                nodes[node.id] = node
                stack.extend(node.children.values())
            rows = [(i, nodes[i].value.tolist(), nodes[i].lock_ref) for i, _ in order]
        else:
            t = c.tree
            rows = [(i, t.node_value(i).tolist(), t.lock_count(t.node_handle(i))) for i, _ in order]
        return order, rows


def build_sides(policy: str, page: int, evictor: str, matcher: str) -> list[Side]:
    cfg = base.policy_config(policy, page)
    ctx = (base.LIMIT_PAGES + 1) * page

    def parts() -> tuple[TokenToKVPoolAllocator, ReqToTokenPool]:
        return make_allocator(base.POOL_PAGES * page, page), ReqToTokenPool(base.MAX_RUNNING, ctx)

    alloc, pool = parts()
    ours = RadixCache(  # split_rule "served" (the default): the unified cores' split times
        pool, alloc, CacheConfig(page, evictor, matcher, policy, cfg), clock=counter_clock()
    )
    sides = [Side(ours, alloc, pool, "radixbench")]
    for loaded in (RUST, PYTHON):
        a, p = parts()
        served = ServedSGLangCache(
            p, a, CacheConfig(page_size=page, policy=policy, policy_config=cfg), loaded
        )
        sides.append(Side(served, a, p, f"sglang-{loaded.core}"))
    return sides


class Ledger:
    def __init__(self) -> None:
        self.streams: set[bytes] = set()
        self.ops: Counter[tuple] = Counter()
        self.passed: set[tuple] = set()
        self.failed: set[tuple] = set()
        self.outcomes: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def total(self, variant: str) -> int:
        return sum(n for k, n in self.ops.items() if k[0] == variant)


LEDGER = Ledger()


def run_lockstep(case: tuple[str, int, str, str], ops: list[bytes]) -> Counter[str]:
    """Replay ``ops`` on radixbench and both unified cores; raise on the first difference."""
    policy, page, evictor, matcher = case
    ours, *refs = build_sides(policy, page, evictor, matcher)
    pats = base.page_patterns(page)
    seen: Counter[str] = Counter()
    history: list[tuple[int, Any, tuple]] = []
    i = -1

    def fail(ref: Side, what: str, mine: Any, theirs: Any) -> None:
        text = "\n".join(f"  {j}: {o.describe()} -> {res}" for j, o, res in history[-40:])
        raise AssertionError(
            f"{policy}, page {page}, evictor {evictor}, matcher {matcher}: op {i} differs on "
            f"{ref.name} in {what}:\n  radixbench: {mine}\n  {ref.name}: {theirs}\n"
            f"last ops:\n{text}"
        )

    for i, b in enumerate(ops):
        op = base.decode(b, page, pats)
        a = ours.apply(op)
        if (a or op.kind != "evict") and (op.kind != "evict" or op.arg):
            history.append((i, op, a))
        if a and a[0] == "raised":
            fail(ours, "results (radixbench raised)", a, None)
        sa, (wa, va) = ours.state(), ours.shape()
        for ref in refs:
            r = ref.apply(op)
            if a != r:
                fail(ref, "results", a, r)
            if (sr := ref.state()) != sa:
                fail(ref, "sizes / counts / requests", sa, sr)
            if not torch.equal(ours.alloc.is_free, ref.alloc.is_free):
                fail(ref, "free KV slots", base.free_slots(ours.alloc), base.free_slots(ref.alloc))
            if not torch.equal(ours.pool.req_to_token, ref.pool.req_to_token):
                fail(ref, "req_to_token", ours.pool.req_to_token, ref.pool.req_to_token)
            wr, vr = ref.shape()
            if wa != wr:
                fail(ref, "tree shape (walk)", wa, wr)
            if va != vr:
                fail(ref, "node slots / locks", va, vr)
        base.tally(seen, op, a, ours)
    i = len(ops)
    da = ours.drain()
    for ref in refs:
        if (dr := ref.drain()) != da:
            fail(ref, "drain", da, dr)
    return seen


def run_case(variant: str, case: tuple[str, int, str, str], ops: list[bytes]) -> None:
    assume(len(set(ops)) > 1)
    t0 = time.process_time()
    try:
        with torch.inference_mode():
            seen = run_lockstep(case, ops)
    except BaseException:
        LEDGER.failed.add((variant, case))
        raise
    finally:
        LEDGER.seconds[variant] += time.process_time() - t0
    digest = hashlib.sha256(repr((variant, case, ops)).encode()).digest()
    if digest not in LEDGER.streams:
        LEDGER.streams.add(digest)
        LEDGER.ops[(variant, *case)] += len(ops)
        LEDGER.outcomes.update(seen)
    LEDGER.passed.add((variant, case))


@pytest.mark.volume("served-fidelity", lambda: check_total("default", TARGET_OPS))
@pytest.mark.parametrize("case", CASES, ids=base.case_id)
@settings(max_examples=EXAMPLES, **base.SETTINGS)
@given(ops=base.STREAM)
def test_served_fidelity(case: tuple[str, int, str, str], ops: list[bytes]) -> None:
    run_case("default", case, ops)


@pytest.mark.slow
@pytest.mark.volume("served-fidelity-slow", lambda: check_total("slow", SLOW_TARGET_OPS))
@pytest.mark.parametrize("case", CASES, ids=base.case_id)
@settings(max_examples=SLOW_EXAMPLES, **base.SETTINGS)
@given(ops=base.STREAM)
def test_served_fidelity_slow(case: tuple[str, int, str, str], ops: list[bytes]) -> None:
    run_case("slow", case, ops)


def test_split_rules_served_and_legacy() -> None:
    """radixbench's two split rules against the classes they mirror, FIFO, page 1. Insert
    [1, 2, 3, 4] (node 1), then [5, 6]; match [1, 2] splits node 1 (upper half: node 3).
    Evicting everything: the legacy class's rule frees the lower half [3, 4] (node 1, created
    first), [5, 6], then the upper half [1, 2] (node 3, created by the split); the served rule
    (``split_rule="served"``, the unified cores) keeps node 1's creation time on node 3, so it
    goes before [5, 6]."""
    victims = {}
    sides = build_sides("fifo", 1, "heapify", MATCHER)
    legacy = RadixCache(ReqToTokenPool(4, 64), TokenToKVPoolAllocator(64),
                        CacheConfig(policy="fifo", split_rule="legacy"))  # fmt: skip
    for name, cache, alloc in (
        ("legacy rule", legacy, legacy.allocator),
        *((s.name, s.cache, s.alloc) for s in sides),
    ):
        for tokens in ([1, 2, 3, 4], [5, 6]):
            slots = alloc.alloc(len(tokens))
            assert cache.insert(RadixKey(tokens), slots) == 0
        assert cache.match_prefix(RadixKey([1, 2])).prefix_len == 2
        victims[name] = cache.evict(6).victims
    assert victims["legacy rule"] == [1, 2, 3]
    assert victims["radixbench"] == victims["sglang-rust"] == victims["sglang-python"] == [1, 3, 2]


def check_total(variant: str, target: int) -> str:
    """The volume of the ``variant`` cases, checked once all of them passed (a ``volume``
    check, tests/cache/conftest.py): >= ``target`` distinct ops replayed on radixbench and both
    unified cores, 0 mismatching, reaching every outcome the streams are built to reach. Queues
    the per-policy table for the terminal summary; returns the line for the volume checks."""
    ran = {c for v, c in LEDGER.passed if v == variant}
    failed = {c for v, c in LEDGER.failed if v == variant}
    assert not failed and ran >= set(CASES), (
        f"{len(ran)} of {len(CASES)} {variant} cases passed, {len(failed)} failed"
    )
    total = LEDGER.total(variant)
    assert total >= target, f"{variant}: {total} distinct ops replayed, want >= {target}"
    wanted = [
        "insert of a cached prefix",
        "insert evicted under memory pressure",
        "match hit",
        "admit hit",
        "checkpoint",
        "step: retract-oom",
        "finish",
        "retract",
        "evict with victims",
        "evict while locks held",
    ]
    rare = [name for name in wanted if LEDGER.outcomes[name] < 50]
    assert not rare, f"streams too rarely reach: {rare}"
    _report(variant)
    return f"{total} distinct ops replayed on all three (>= {target}), 0 mismatching"


def _report(variant: str) -> None:
    """Queue the per-policy table for pytest's terminal summary."""
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    for (v, policy, page, *_), n in LEDGER.ops.items():
        if v == variant:
            rows[policy]["ops"] += n
            rows[policy][f"page {page}"] += n
    SUMMARY.append(
        f"{LEDGER.total(variant)} distinct ops replayed on radixbench and on sglang "
        f"{RUST.version}'s UnifiedRadixCache (Rust and Python cores), compared after every op "
        f"({LEDGER.seconds[variant]:.1f}s CPU, {variant}); 0 mismatching cases"
    )
    SUMMARY.extend(
        f"  {p:9s}{rows[p]['ops']:>9d} ops  page 1 {rows[p]['page 1']:>7d}  page 16 "
        f"{rows[p]['page 16']:>7d}"
        for p in POLICY_NAMES
    )


SUMMARY: list[str] = []


class _SummaryPlugin:
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if SUMMARY:
            terminalreporter.write_sep("-", "served-cache fidelity summary")
            for line in SUMMARY:
                terminalreporter.write_line(line)


@pytest.fixture(scope="module", autouse=True)
def _register_summary(request: pytest.FixtureRequest) -> None:
    manager = request.config.pluginmanager
    if not manager.has_plugin("served-fidelity-summary"):
        manager.register(_SummaryPlugin(), "served-fidelity-summary")
