"""Model-based tests: random operation streams checked against a page-level reference model.

The model maps every cached page-aligned prefix ``(extra_key, tokens[:(k+1)*page])`` to the KV
slots of its last page: the tree is a compressed form of exactly that map (a page is the unit of
sharing, so two pages that agree only on their first tokens share nothing). From it follow,
independently of the tree code, the expected ``insert`` return value, ``match_prefix`` length and
slots, the protected and evictable sizes under the held locks, and the allocator's free count.
Eviction victims are checked against a reference greedy eviction over a snapshot of the tree
(smallest policy key among the unlocked leaves, a parent joining the candidates once its last
child is gone). Every stream runs on every evictor x matcher pair; their logs must be identical.
"""

from __future__ import annotations

import heapq
import random

import pytest

from radixbench.cache import EVICTORS, MATCHERS, POLICIES, RadixKey, check_integrity

KV_SIZE = 4096

Prefix = tuple[str | None, tuple[int, ...]]


def reference_victims(cache, num_tokens: int) -> list[int]:
    if num_tokens <= 0:
        return []
    key = cache.policy.key
    parent: dict[int, int | None] = {}
    n_children: dict[int, int] = {}
    locked: dict[int, bool] = {}
    length: dict[int, int] = {}
    sort_key: dict[int, tuple] = {}
    stack = [cache.root]
    while stack:
        node = stack.pop()
        for child in node.children.values():
            parent[child.id] = None if node is cache.root else node.id
            stack.append(child)
        if node is cache.root:
            continue
        n_children[node.id] = len(node.children)
        locked[node.id] = node.lock_ref > 0
        length[node.id] = len(node.key)
        sort_key[node.id] = key(node)
    heap = [(sort_key[i], i) for i in n_children if n_children[i] == 0 and not locked[i]]
    heapq.heapify(heap)
    out: list[int] = []
    evicted = 0
    while evicted < num_tokens and heap:
        _, i = heapq.heappop(heap)
        out.append(i)
        evicted += length[i]
        p = parent[i]
        if p is not None:
            n_children[p] -= 1
            if n_children[p] == 0 and not locked[p]:
                heapq.heappush(heap, (sort_key[p], p))
    return out


def prefixes(ns: str | None, toks: tuple[int, ...], page: int) -> set[Prefix]:
    return {(ns, toks[:end]) for end in range(page, len(toks) + 1, page)}


def run_stream(build_cache, evictor: str, matcher: str, policy: str, page: int, ops) -> list:
    # T-LRU: TEL-safe = starting within 2 pages of the branch's high-water depth.
    tlru = (("threshold", 3 * page), ("next_prompt_estimate", page)) if policy == "tlru" else ()
    cache, alloc = build_cache(
        page_size=page,
        evictor=evictor,
        matcher=matcher,
        policy=policy,
        kv_size=KV_SIZE,
        policy_config=tlru,
    )
    model: dict[Prefix, tuple[int, ...]] = {}
    locks: list[tuple[object, str | None, tuple[int, ...]]] = []
    log: list = []

    def cached_len(ns, toks, limit) -> int:
        n = 0
        while n + page <= limit and (ns, tuple(toks[: n + page])) in model:
            n += page
        return n

    def slots_of(ns, toks, n) -> list[int]:
        return [s for end in range(page, n + 1, page) for s in model[(ns, tuple(toks[:end]))]]

    def protected() -> set[Prefix]:
        out: set[Prefix] = set()
        for _, ns, toks in locks:
            out |= prefixes(ns, toks, page)
        return out

    for op in ops:
        kind = op[0]
        if kind == "insert":
            _, ns, toks, prio = op
            expected = cached_len(ns, toks, len(toks))
            v = alloc.alloc(len(toks))
            assert v is not None
            p = cache.insert(RadixKey(toks, ns), v, priority=prio)
            alloc.free(v[:p])
            assert p == expected
            for end in range(p + page, len(toks) + 1, page):
                model[(ns, tuple(toks[:end]))] = tuple(v[end - page : end].tolist())
            log.append(("insert", p))
        elif kind == "match":
            _, ns, toks, lock = op
            limit = len(toks) // page * page
            expected = cached_len(ns, toks, limit)
            r = cache.match_prefix(RadixKey(toks, ns))
            assert r.prefix_len == expected
            assert r.device_indices.tolist() == slots_of(ns, toks, expected)
            log.append(("match", r.prefix_len, r.last_node.id))
            if lock:
                before = protected()
                locks.append((r.last_node, ns, tuple(toks[:expected])))
                delta = cache.inc_lock_ref(r.last_node)
                assert delta == -(len(protected()) - len(before)) * page
        elif kind == "unlock":
            if not locks:
                continue
            before = protected()
            node, _, _ = locks.pop(op[1] % len(locks))
            delta = cache.dec_lock_ref(node)
            assert delta == (len(before) - len(protected())) * page
        elif kind == "evict":
            n = op[1]
            evictable_before = cache.evictable_size()
            expected_victims = reference_victims(cache, n)
            free_before = alloc.is_free.clone()
            res = cache.evict(n)
            assert res.victims == expected_victims
            newly_free = (alloc.is_free & ~free_before).nonzero().flatten().tolist()
            assert len(newly_free) == res.num_evicted
            freed = set(newly_free)
            gone = {k for k, s in model.items() if freed & set(s)}
            assert all(set(model[k]) <= freed for k in gone)  # whole pages go
            assert len(gone) * page == res.num_evicted
            for k in gone:
                del model[k]
            if n > 0:
                assert res.num_evicted >= min(n, evictable_before)
            # Locked prefixes survive; what stays is still prefix-closed.
            assert protected() <= set(model)
            for ns, toks in model:
                assert len(toks) == page or (ns, toks[:-page]) in model
            log.append(("evict", res.num_evicted, res.victims))
        else:  # pragma: no cover
            raise AssertionError(op)
        check_integrity(cache)
        prot = len(protected()) * page
        held = len(model) * page
        assert cache.protected_size() == prot
        assert cache.evictable_size() == held - prot
        assert cache.total_size() == held
        assert alloc.available_size() == KV_SIZE - held
    # Final full drain: everything unlocked goes, then unlocking everything empties the tree.
    while locks:
        cache.dec_lock_ref(locks.pop()[0])
    res = cache.evict(KV_SIZE)
    assert res.num_evicted == len(model) * page
    check_integrity(cache)
    assert cache.num_nodes == 0
    assert alloc.available_size() == KV_SIZE
    return log


def random_ops(rng: random.Random, page: int, n_ops: int) -> list:
    ops: list = []
    for _ in range(n_ops):
        ns = rng.choice([None, None, "x"])
        toks = [rng.randint(0, 2) for _ in range(rng.randint(1, 4) * page)]
        r = rng.random()
        if r < 0.4:
            ops.append(("insert", ns, toks, rng.randint(0, 3)))
        elif r < 0.65:
            toks = toks + [rng.randint(0, 2) for _ in range(rng.randint(0, page))]
            ops.append(("match", ns, toks, rng.random() < 0.5))
        elif r < 0.8:
            ops.append(("unlock", rng.randint(0, 100)))
        else:
            ops.append(("evict", rng.randint(0, 10)))
    return ops


def run_all_pairs(build_cache, policy: str, page: int, ops) -> None:
    logs = {
        (e, m): run_stream(build_cache, e, m, policy, page, ops) for e in EVICTORS for m in MATCHERS
    }
    ref = next(iter(logs.values()))
    for pair, log in logs.items():
        assert log == ref, f"{pair} diverges from {next(iter(logs))}"


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("page", [1, 2, 4])
def test_random_streams_match_model(cache_builder, policy: str, page: int) -> None:
    rng = random.Random(f"{policy}-{page}")
    for _ in range(4):
        run_all_pairs(cache_builder, policy, page, random_ops(rng, page, 60))


def test_model_checks_can_fail(cache_builder) -> None:
    """The oracle is not vacuous: a stream whose evict victims are known by hand."""
    ops = [
        ("insert", None, [1, 2, 3], 0),
        ("insert", None, [1, 2, 4], 0),
        ("insert", None, [5], 0),
        ("match", None, [1, 2, 3], True),
        ("evict", 100),
    ]
    log = run_stream(cache_builder, "heapify", "linear", "lru", 1, ops)
    # [4] and [5] are the only unlocked tokens; [1,2] -> [3] is locked.
    assert log[-1][:2] == ("evict", 2)
    assert log[:3] == [("insert", 0), ("insert", 2), ("insert", 0)]


try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is a dev extra
    given = None


if given is not None:

    @st.composite
    def op_streams(draw):
        page = draw(st.sampled_from([1, 4]))
        # Tokens constant within a page (so pages collide often) or arbitrary ones.
        paged = st.lists(st.integers(0, 2), min_size=1, max_size=4).map(
            lambda pages: [t for t in pages for _ in range(page)]
        )
        mixed = st.lists(st.integers(0, 2), min_size=1, max_size=4 * page)
        aligned = mixed.map(lambda t: t[: len(t) // page * page] or [0] * page)
        ns = st.sampled_from([None, "x"])
        prio = st.integers(0, 3)
        op = st.one_of(
            st.tuples(st.just("insert"), ns, st.one_of(paged, aligned), prio),
            st.tuples(st.just("match"), ns, st.one_of(paged, mixed), st.booleans()),
            st.tuples(st.just("unlock"), st.integers(0, 50)),
            st.tuples(st.just("evict"), st.integers(0, 12)),
        )
        return page, draw(st.sampled_from(sorted(POLICIES))), draw(st.lists(op, max_size=30))

    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(stream=op_streams())
    def test_hypothesis_streams_match_model(cache_builder, stream) -> None:
        page, policy, ops = stream
        run_all_pairs(cache_builder, policy, page, ops)
