"""radixbench's HiCache tiers against sglang 0.5.23's, op by op (``conftest.Lockstep``).

Seeded op streams (insert, match, load back, lock/unlock, evict device, evict host, complete
transfers and poll events, prefetch from storage, admit) run in lockstep on radixbench's
``TieredRadixCache`` and on sglang's real ``UnifiedRadixCache`` with HiCache on, its I/O
simulated (``radixbench.cache.sglang.hicache``). Compared after every op: the op's result
(matched device / host tokens and nodes, inserted prefix and adopted slots, device victims in
order, host victims in order, loads, prefetch outcomes), the transfers each started, sizes,
free device slots, host slots in use, and with the Python core every node's parent, length,
residency on each tier, lock counts and leaf state on each tier.

Cases: every radixbench evictor x write policy x page size, with storage (``l3``: storage
writes pin host copies until they complete, prefetches race admission and eviction) and
without (``l2``). Seeds vary the rest: the eviction policy of both tiers (even seeds LRU, odd
ones the other policies in turn), a host pool of 1x or 2x the device pool, a device pool sized
to the streams' content (tight: write_back drops and declines come early) or 16x the pages
(roomy), the three prefetch policies. Default suite: pages 1 and 16; ``-m slow``: page 64 too,
more seeds and ops, and sglang's Rust core. An evict call may serve each leaf at most once (a
step budget: a looping evictor fails instead of hanging). The volume checks (tests/cache/
conftest.py) assert the ops compared, 0 mismatching cases, and that the streams reached the
paths the cases exist for: write_back drops declined under a storage-write pin (at the head of
``lru-list``'s list too), host eviction, load back, prefetch waits, revocations and hits.
"""

from __future__ import annotations

import importlib.util
import time
from collections import Counter, defaultdict
from typing import Any

import pytest

from radixbench.cache import EVICTORS
from radixbench.cache.evictor import LRUListEvictor

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang") is None, reason="sglang 0.5.23 is not installed"
)

WRITE_POLICIES = ["write_through", "write_through_selective", "write_back"]
PREFETCH = ("best_effort", "wait_complete", "timeout")
OTHER_POLICIES = ("lfu", "fifo", "mru", "filo", "priority", "slru", "tlru")
DEFAULT = {"seeds": range(2), "ops": 500, "target": 48_000}
SLOW = {"seeds": range(2, 8), "ops": 2200, "target": 950_000}
RUST = {"seeds": range(2, 5), "ops": 2200, "target": 230_000}
#: outcome -> fewest the default cases must reach (the slow ones: 5x, the Rust core's: 4x)
WANTED = {
    "evict with victims": 1000,
    "write_back subtree dropped": 100,
    "write_back drop declined under a storage-write pin": 20,
    "declined at the head of lru-list's list": 3,
    "demote": 500,
    "host eviction": 100,
    "load back": 100,
    "storage write": 500,
    "prefetch": 200,
    "admit waits for its prefetch": 50,
    "prefetch revoked": 20,
    "prefetch loaded tokens": 20,
}


class Ledger:
    """What ran, per variant (``default``, ``slow``, ``rust``): ops compared, cases passed and
    failed, outcomes reached, CPU seconds."""

    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()
        self.passed: defaultdict[str, set[tuple[Any, ...]]] = defaultdict(set)
        self.failed: defaultdict[str, set[tuple[Any, ...]]] = defaultdict(set)
        self.outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.seconds: Counter[str] = Counter()


LEDGER = Ledger()


def _setting(seed: int, page: int, case: int) -> dict[str, Any]:
    """What a seed varies (module docstring); ``case``: the case's index, to rotate on."""
    tight = seed % 4 < 2
    return {
        "policy": "lru" if seed % 2 == 0 else OTHER_POLICIES[(seed // 2 + case) % 7],
        "ratio": 1.0 if seed % 4 in (0, 3) else 2.0,
        "device_tokens": 256 * max(1, page // 4) if tight else 256 * page,
        "prefetch_policy": PREFETCH[(seed + page // 16 + case) % 3],
    }


def _instrument(cache: Any, seen: Counter[str]) -> None:
    """Count ``seen`` outcomes on radixbench's side (both sides agree after every op) and
    guard every evict call: each leaf served at most once (else ``AssertionError``)."""
    evictor = cache.evictor
    lru_list = isinstance(evictor, LRUListEvictor) and evictor.use_list
    served = [0, 0]  # delete_leaf calls in this evict call, its budget

    def wrap(name: str, after: Any) -> None:
        inner = getattr(cache, name)

        def call(*args: Any) -> Any:
            r = inner(*args)
            after(r, *args)
            return r

        setattr(cache, name, call)

    evict = evictor.evict

    def guarded_evict(host: Any, n: int) -> Any:
        served[:] = [0, cache.num_nodes + 1]
        victims, freed = evict(host, n)
        if victims:
            seen["evict with victims"] += 1
        return victims, freed

    evictor.evict = guarded_evict
    delete_leaf = cache.delete_leaf

    def guarded_delete_leaf(node: Any) -> int:
        served[0] += 1
        assert served[0] <= served[1], f"evict served {served[0]} leaves of {served[1] - 1}"
        in_list = lru_list and evictor._in_list(node)
        freed = int(delete_leaf(node))
        if freed == 0 and in_list:
            seen["declined at the head of lru-list's list"] += 1
        return freed

    cache.delete_leaf = guarded_delete_leaf

    def dropped(freed: int, node: Any) -> None:
        if freed:
            seen["write_back subtree dropped"] += 1
            return
        seen["write_back drop declined"] += 1
        writing = {id(n) for n, _ in cache.ongoing_backup.values()}
        stack = list(node.children.values())
        while stack:
            cur = stack.pop()
            if id(cur) in writing:
                seen["write_back drop declined under a storage-write pin"] += 1
                return
            stack.extend(cur.children.values())

    def count(what: str, test: Any = bool) -> Any:
        return lambda r, *_: seen.update([what] if test(r) else [])

    wrap("drop_subtree", dropped)
    wrap("demote", count("demote"))
    wrap("evict_host", count("host eviction"))
    wrap("init_load_back", count("load back", lambda r: r[0] > 0))
    wrap("write_backup_storage", count("storage write", lambda r: True))
    wrap("prefetch_from_storage", lambda r, rid, *_: seen.update(
        ["prefetch"] if rid in cache.ongoing_prefetch else []))  # fmt: skip
    wrap("check_prefetch_progress", count("admit waits for its prefetch", lambda r: not r))
    wrap("revoke_prefetch", count("prefetch revoked", lambda r: True))
    wrap("pop_prefetch_loaded", count("prefetch loaded tokens", lambda r: r > 0))


def _run(lockstep: Any, variant: str, case: tuple[Any, ...], params: dict[str, Any]) -> None:
    evictor, write_policy, page, storage, core = case
    index = list(EVICTORS).index(evictor) * 3 + WRITE_POLICIES.index(write_policy)
    t0 = time.process_time()
    try:
        for seed in params["seeds"]:
            s = _setting(seed, page, index)
            rb, sg = lockstep.build_pair(write_policy, page, core, storage, evictor=evictor, **s)
            seen: Counter[str] = Counter()
            _instrument(rb.c, seen)
            run = lockstep.Lockstep(rb, sg, page, seed, storage)
            try:
                for _ in range(params["ops"]):
                    run.step()
            except AssertionError as e:
                raise AssertionError(f"seed {seed} {s}: {e}") from None
            LEDGER.ops[variant] += run.ops
            LEDGER.outcomes[variant].update(seen)
    except BaseException:
        LEDGER.failed[variant].add(case)
        raise
    finally:
        LEDGER.seconds[variant] += time.process_time() - t0
    LEDGER.passed[variant].add(case)


def _cases(pages: list[int], storage: list[bool], cores: list[str]) -> list[Any]:
    """``(evictor, write policy, page, storage, core)`` params, ids like
    ``lru-list-write_back-16-l3`` (``-rust``: the Rust core)."""
    return [
        pytest.param(
            (e, w, p, s, c),
            id=f"{e}-{w}-{p}-{'l3' if s else 'l2'}{'' if c == 'python' else '-rust'}",
        )
        for c in cores
        for s in storage
        for p in pages
        for w in WRITE_POLICIES
        for e in EVICTORS
    ]


DEFAULT_CASES = _cases([1, 16], [True, False], ["python"])
SLOW_CASES = _cases([1, 16, 64], [True, False], ["python"])
RUST_CASES = _cases([1, 16, 64], [True], ["auto"])


def check(variant: str, params: dict[str, Any], cases: list[Any], scale: int) -> str:
    """The volume of ``variant`` (a ``volume`` check, tests/cache/conftest.py): every case
    passed (0 mismatches), >= the target ops compared, every wanted outcome reached."""
    failed, ran = LEDGER.failed[variant], LEDGER.passed[variant]
    assert not failed and len(ran) == len(cases), (
        f"{len(ran)} of {len(cases)} cases passed, {len(failed)} failed"
    )
    ops, target = LEDGER.ops[variant], params["target"]
    assert ops >= target, f"{ops} ops compared, want >= {target}"
    seen = LEDGER.outcomes[variant]
    reached = ", ".join(f"{k} {seen[k]}" for k in WANTED)
    rare = {k: seen[k] for k, n in WANTED.items() if seen[k] < n * scale}
    assert not rare, f"the streams reach too rarely: {rare} (x{scale} of WANTED); {reached}"
    return (
        f"{ops} ops compared with sglang 0.5.23 ({LEDGER.seconds[variant]:.0f}s CPU), "
        f"0 mismatches; reached: {reached}"
    )


@pytest.mark.volume("hicache-differential", lambda: check("default", DEFAULT, DEFAULT_CASES, 1))
@pytest.mark.parametrize("case", DEFAULT_CASES)
def test_tiers_match_sglang(lockstep: Any, case: tuple[Any, ...]) -> None:
    _run(lockstep, "default", case, DEFAULT)


@pytest.mark.slow
@pytest.mark.volume("hicache-differential-slow", lambda: check("slow", SLOW, SLOW_CASES, 5))
@pytest.mark.parametrize("case", SLOW_CASES)
def test_tiers_match_sglang_long(lockstep: Any, case: tuple[Any, ...]) -> None:
    _run(lockstep, "slow", case, SLOW)


@pytest.mark.slow
@pytest.mark.volume("hicache-differential-rust", lambda: check("rust", RUST, RUST_CASES, 4))
@pytest.mark.parametrize("case", RUST_CASES)
def test_tiers_match_sglang_rust_core(lockstep: Any, case: tuple[Any, ...]) -> None:
    """sglang's default (Rust) core: results, transfers, sizes and pools compared, not nodes
    (it has no node objects)."""
    _run(lockstep, "rust", case, RUST)
