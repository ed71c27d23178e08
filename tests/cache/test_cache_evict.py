"""evict: order, cascade, locks, slot freeing, policies, evictor equivalence.

The tests run once per evictor (matcher fixed: ``make_cache_per_evictor`` /
``make_impl_per_evictor``, the latter with sglang 0.5.23's own ``RadixCache`` beside); the
equivalence tests run every evictor x matcher pair themselves."""

from __future__ import annotations

import random
from typing import Any

import pytest

from radixbench.cache import EVICTORS, MATCHERS, POLICIES, RadixKey, check_integrity
from radixbench.cache.evictor import make_evictor
from radixbench.cache.policy import make_policy


def _leaf(cache, tokens, extra_key=None):
    r = cache.match_prefix(RadixKey(tokens, extra_key))
    assert r.prefix_len == len(tokens)
    return r.last_node


def test_evict_zero_or_negative_is_noop(make_cache_per_evictor, put, paths) -> None:
    cache, alloc = make_cache_per_evictor()
    put(cache, alloc, [1, 2, 3])
    before = (paths(cache), alloc.available_size())
    for n in (0, -5):
        res = cache.evict(n)
        assert (res.num_evicted, res.victims) == (0, [])
        check_integrity(cache)
    assert (paths(cache), alloc.available_size()) == before


def test_evict_lru_older_access_first(make_cache_per_evictor, put, paths) -> None:
    cache, alloc = make_cache_per_evictor(kv_size=32)
    put(cache, alloc, [1, 2, 3])  # A
    _, vb = put(cache, alloc, [4, 5])  # B
    put(cache, alloc, [6, 7, 8, 9])  # C
    a, b, c = (cache.root.children[t] for t in (1, 4, 6))
    cache.match_prefix(RadixKey([1, 2]))  # touches A (and splits it): B is now the oldest
    check_integrity(cache)
    free0 = alloc.available_size()
    res = cache.evict(1)
    check_integrity(cache)
    assert res.victims == [b.id]
    assert res.num_evicted == 2  # a whole leaf, more than asked
    assert alloc.available_size() == free0 + 2
    assert bool(alloc.is_free[vb].all())
    assert (None, (4, 5)) not in paths(cache)
    assert cache.evictable_size() == 3 + 4
    # Next oldest: C (t3) before A's lower half [3] (touched at t4).
    res = cache.evict(1)
    assert res.victims == [c.id]
    assert alloc.available_size() == free0 + 6
    check_integrity(cache)
    # Then A's lower half, then (cascade) its upper half [1,2].
    res = cache.evict(1)
    assert res.victims == [a.id]
    assert res.num_evicted == 1
    res = cache.evict(1)
    assert res.num_evicted == 2
    assert cache.num_nodes == 0
    assert alloc.available_size() == 32
    check_integrity(cache)
    assert cache.evict(5) == (0, [])


def test_evict_cascades_to_parent_within_one_call(make_cache_per_evictor, put) -> None:
    cache, alloc = make_cache_per_evictor(kv_size=32)
    put(cache, alloc, [1, 2, 3])  # t1
    put(cache, alloc, [1, 2, 4])  # t2: [1,2] (t2) -> {[3] (t2), [4] (t2)}
    put(cache, alloc, [7, 7])  # t3
    upper = cache.root.children[1]
    x, y, z = upper.children[3], upper.children[4], cache.root.children[7]
    free0 = alloc.available_size()
    # 3 tokens: the two 1-token leaves give 2, then [1,2] is a leaf older than [7,7].
    res = cache.evict(3)
    check_integrity(cache)
    assert res.victims == [x.id, y.id, upper.id]
    assert res.num_evicted == 4
    assert alloc.available_size() == free0 + 4
    assert list(cache.root.children) == [7]
    assert cache.root.children[7] is z


def test_locked_path_never_evicted(make_cache_per_evictor, put, paths) -> None:
    cache, alloc = make_cache_per_evictor(kv_size=64)
    _, v1 = put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 2, 4])
    put(cache, alloc, [7, 7])
    put(cache, alloc, [1, 2, 3, 5, 6])  # an unlocked child below the node we lock
    x = _leaf(cache, [1, 2, 3])
    cache.inc_lock_ref(x)
    check_integrity(cache)
    free0 = alloc.available_size()
    res = cache.evict(10**9)
    check_integrity(cache)
    # Everything unlocked goes: [4], [7,7], and [5,6] below the locked node.
    assert res.num_evicted == 1 + 2 + 2
    assert alloc.available_size() == free0 + 5
    assert paths(cache) == {(None, (1, 2)): v1[:2].tolist(), (None, (1, 2, 3)): v1.tolist()}
    assert (cache.evictable_size(), cache.protected_size()) == (0, 3)
    assert cache.evict(10**9) == (0, [])
    # After unlocking, the path is evictable again (leaf first, then its parent).
    cache.dec_lock_ref(x)
    res = cache.evict(10**9)
    check_integrity(cache)
    assert res.victims[0] == x.id
    assert res.num_evicted == 3
    assert cache.num_nodes == 0
    assert alloc.available_size() == 64


def test_lock_on_inner_node_protects_ancestors_only(make_cache_per_evictor, put) -> None:
    cache, alloc = make_cache_per_evictor(kv_size=64)
    put(cache, alloc, [1, 2, 3, 4])
    put(cache, alloc, [1, 2, 5, 6])
    upper = _leaf(cache, [1, 2])
    cache.inc_lock_ref(upper)
    res = cache.evict(100)
    check_integrity(cache)
    assert res.num_evicted == 4
    assert cache.num_nodes == 1
    assert cache.root.children[1] is upper
    assert not upper.evictable  # a locked leaf
    cache.dec_lock_ref(upper)
    assert upper.evictable
    assert cache.evict(1).victims == [upper.id]
    check_integrity(cache)


def test_evicted_slots_are_reusable(make_cache_per_evictor, put) -> None:
    cache, alloc = make_cache_per_evictor(kv_size=8)
    put(cache, alloc, [1, 2, 3, 4])
    put(cache, alloc, [5, 6, 7, 8])
    assert alloc.available_size() == 0
    assert alloc.alloc(3) is None
    res = cache.evict(3)
    assert res.num_evicted == 4
    assert alloc.available_size() == 4
    check_integrity(cache)
    p, v = put(cache, alloc, [9, 9, 9, 9])
    assert p == 0
    assert alloc.available_size() == 0
    check_integrity(cache)
    assert cache.match_prefix(RadixKey([9, 9, 9, 9])).device_indices.tolist() == v.tolist()


@pytest.mark.parametrize("page", [4, 16])
def test_paged_evict_frees_whole_pages(make_cache_per_evictor, put, page) -> None:
    cache, alloc = make_cache_per_evictor(page_size=page, kv_size=512)
    toks = list(range(1, 2 * page + 1))
    put(cache, alloc, toks)
    put(cache, alloc, toks[:page] + [0] * page)
    free0 = alloc.available_size()
    res = cache.evict(1)
    check_integrity(cache)
    assert res.num_evicted == page
    assert alloc.available_size() == free0 + page
    assert cache.evictable_size() == 2 * page
    res = cache.evict(10**6)
    assert res.num_evicted == 2 * page
    assert cache.num_nodes == 0
    check_integrity(cache)


@pytest.mark.parametrize("policy", ["lru", "mru"])
def test_many_touches_then_evict_keeps_order(make_cache_per_evictor, put, policy) -> None:
    # 200 touches of 5 leaves pile up re-keyed entries in a persistent heap (under MRU the stale
    # ones sort last, forcing it to compact); the order must still be by last touch: L0..L4 were
    # last touched in that order.
    cache, alloc = make_cache_per_evictor(kv_size=64, policy=policy)
    leaves = []
    for i in range(5):
        put(cache, alloc, [10 * i + 1, 10 * i + 2])
        leaves.append(cache.root.children[10 * i + 1])
    for k in range(200):
        i = (4 - k) % 5 if k < 100 else k % 5
        cache.match_prefix(RadixKey([10 * i + 1, 10 * i + 2]))
    check_integrity(cache)
    victims = []
    for _ in range(5):
        res = cache.evict(1)
        check_integrity(cache)
        victims += res.victims
    order = [leaf.id for leaf in leaves]
    assert victims == (order if policy == "lru" else order[::-1])
    assert alloc.available_size() == 64


# ---------------------------------------------------------------- policies x evictors

# Three disjoint 2-token leaves under the root, built on the default counter clock (reads 1, 2,
# ... where SGLang reads time.monotonic: the root takes 1, 2; each insert walk 1 reading, each
# new node 2 (access, creation); each match walk 1):
#   insert A (priority 3): walk 3, A 4/5      insert B (priority 5): walk 6, B 7/8
#   insert C (priority 1): walk 9, C 10/11    insert B: 12    insert B: 13
#   match A: 14                               match C: 15
# so  A: created 5, accessed 14, hits 1, prio 3
#     B: created 8, accessed 13, hits 3, prio 5  (0.5.23: a new leaf counts 1 hit)
#     C: created 11, accessed 15, hits 1, prio 1
EXPECTED_ORDER = {
    "lru": "BAC",  # oldest access first
    "mru": "CAB",  # newest access first
    "fifo": "ABC",  # oldest creation first
    "filo": "CBA",  # newest creation first
    "lfu": "ACB",  # fewest hits (A, C: 1) first, LRU among them; B (3 hits) last
    "priority": "CAB",  # lowest priority first
    "slru": "ACB",  # probationary (hits < 2: A, C) by LRU, then protected B
    # Default config (threshold 0, no next-prompt estimate): a node is TEL-safe only when it
    # starts at or beyond its branch's depth, which no node does: plain LRU.
    "tlru": "BAC",
}


def test_expected_orders_cover_all_policies() -> None:
    assert set(EXPECTED_ORDER) == set(POLICIES)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("one_call", [True, False], ids=["one-call", "one-by-one"])
def test_policy_order(
    make_impl_per_evictor, impl_name_per_evictor, put, check, policy: str, one_call: bool
) -> None:
    if policy == "tlru" and impl_name_per_evictor == "sglang":
        pytest.skip("sglang 0.5.23's RadixCache keeps no T-LRU lengths (see the tlru tests)")
    cache, alloc = make_impl_per_evictor(policy=policy, kv_size=32)
    put(cache, alloc, [10, 11], priority=3)
    put(cache, alloc, [20, 21], priority=5)
    put(cache, alloc, [30, 31], priority=1)
    put(cache, alloc, [20, 21])
    put(cache, alloc, [20, 21])
    cache.match_prefix(RadixKey([10, 11]))
    cache.match_prefix(RadixKey([30, 31]))
    check(cache)
    a, b, c = (cache.root.children[t] for t in (10, 20, 30))
    names = {a.id: "A", b.id: "B", c.id: "C"}
    assert [(n.creation_time, n.last_access_time, n.hit_count, n.priority) for n in (a, b, c)] == [
        (5, 14, 1, 3),
        (8, 13, 3, 5),
        (11, 15, 1, 1),
    ]
    if one_call:
        res = cache.evict(6)
        victims = res.victims
        assert res.num_evicted == 6
    else:
        victims = []
        for _ in range(3):
            res = cache.evict(1)
            check(cache)
            assert res.num_evicted == 2
            victims += res.victims
    check(cache)
    assert "".join(names[v] for v in victims) == EXPECTED_ORDER[policy]
    assert alloc.available_size() == 32


def test_slru_protected_threshold(make_impl_per_evictor, put, check) -> None:
    """SLRU with ``protected_threshold`` 3 (SGLang ``--radix-eviction-policy-config``): leaves
    with 1 and 2 hits are probationary (LRU among them), the 3-hit one protected."""
    cache, alloc = make_impl_per_evictor(policy="slru", policy_config=(("protected_threshold", 3),))
    for toks in ([3], [3], [3], [2], [2], [1]):
        put(cache, alloc, toks)
    one, two, three = (cache.root.children[t] for t in (1, 2, 3))
    assert (one.hit_count, two.hit_count, three.hit_count) == (1, 2, 3)
    cache.match_prefix(RadixKey([2]))  # two is now the most recently used
    assert cache.evict(3).victims == [one.id, two.id, three.id]
    check(cache)


def test_priority_policy_uses_max_priority_of_inserts(make_cache_per_evictor, put) -> None:
    cache, alloc = make_cache_per_evictor(policy="priority")
    put(cache, alloc, [1], priority=1)
    put(cache, alloc, [2], priority=2)
    put(cache, alloc, [1], priority=10)  # raises [1] to 10
    one, two = cache.root.children[1], cache.root.children[2]
    assert cache.evict(1).victims == [two.id]
    assert cache.evict(1).victims == [one.id]
    check_integrity(cache)


def test_lfu_cascade_parent_order(make_impl_per_evictor, put, check) -> None:
    # Parent [1] is created by the first insert (1 hit) and walked by the next two (3 hits).
    # Once its children are gone it is a leaf older than [9] (LRU would take it first), but LFU
    # takes the 1-hit [9] first.
    cache, alloc = make_impl_per_evictor(policy="lfu")
    put(cache, alloc, [1])
    put(cache, alloc, [1, 2])
    put(cache, alloc, [1, 3])
    put(cache, alloc, [9])
    parent = cache.root.children[1]
    assert parent.hit_count == 3
    kids = [parent.children[2].id, parent.children[3].id]
    assert [parent.children[t].hit_count for t in (2, 3)] == [1, 1]
    res = cache.evict(2)  # [2], [3]: 1 hit, older than [9] (1 hit) -> 2 tokens, stop
    assert res.victims == kids
    nine = cache.root.children[9]
    assert cache.evict(1).victims == [nine.id]
    assert cache.evict(1).victims == [parent.id]
    check(cache)


def test_lfu_split_frees_the_older_lower_half(make_impl_per_evictor, put, check) -> None:
    """Repro: LFU, insert [4,3,6], insert [4,3,4], evict(1). The split's upper half [4,3] is
    a new node (2 hits); the leaves [6] (the old node's lower half, touched by the second
    insert's walk) and [4] (new) have 1 hit each, and [6]'s access time is older: SGLang frees
    [6]."""
    cache, alloc = make_impl_per_evictor(policy="lfu")
    put(cache, alloc, [4, 3, 6])
    six = cache.root.children[4]  # the first insert's node: it becomes the lower half [6]
    put(cache, alloc, [4, 3, 4])
    upper = cache.root.children[4]
    four = upper.children[4]
    assert six.parent is upper and list(six.key.token_ids) == [6]
    assert (upper.hit_count, six.hit_count, four.hit_count) == (2, 1, 1)
    assert six.last_access_time < upper.last_access_time < four.last_access_time
    res = cache.evict(1)
    assert (res.num_evicted, res.victims) == (1, [six.id])
    assert list(upper.children) == [4]
    check(cache)


def test_mru_split_frees_the_new_leaf(make_impl_per_evictor, put, check) -> None:
    """Repro: MRU, insert [1,3,1,4,1], insert [1,3,1,4,4], evict(1). The second insert's walk
    touches the old node, then the split's upper half [1,3,1,4] and the new leaf [4] read the
    clock after it: the most recently used leaf is the new [4], which SGLang frees; the lower
    half [1] stays."""
    cache, alloc = make_impl_per_evictor(policy="mru")
    put(cache, alloc, [1, 3, 1, 4, 1])
    one = cache.root.children[1]
    put(cache, alloc, [1, 3, 1, 4, 4])
    upper = cache.root.children[1]
    four = upper.children[4]
    assert one.parent is upper and list(one.key.token_ids) == [1]
    assert one.last_access_time < four.last_access_time
    res = cache.evict(1)
    assert (res.num_evicted, res.victims) == (1, [four.id])
    assert list(upper.children) == [1] and upper.children[1] is one
    check(cache)


# ---------------------------------------------------------------- T-LRU

TLRU_CONFIG = (("threshold", 3), ("next_prompt_estimate", 1))


def _tlru_tree(cache, alloc, put) -> dict[str, Any]:
    """Page 1, threshold 3, next prompt estimate 1: budget = L + 1 - 3 = L - 2 tokens for a
    branch of high-water depth L; a node starting at or beyond it is TEL-safe.

    Inserted oldest first: E = [20..29] (a 10-token branch of its own: starts at 0 < 8, not
    safe); D0 = [1..10] with D1 = [11, 12] below it (L = 12: D1 starts at 10 >= 10, safe; D0
    at 0, not); then D2 = [13..16] below D1 (L = 16, budget 14: now D1 starting at 10 is not
    safe, D2 at 12 is not either); S = [40] (L = 1, budget 0: safe, as every node of a branch
    no longer than threshold - estimate); finally F = [1..10, 50, 51] (a sibling of D1, starts
    at 10: its own branch reaches 12 but D0's high-water mark is 16; F's is 12, budget 10:
    safe)."""
    put(cache, alloc, list(range(20, 30)))
    put(cache, alloc, list(range(1, 11)))
    put(cache, alloc, list(range(1, 13)))
    put(cache, alloc, list(range(1, 17)))
    put(cache, alloc, [40])
    put(cache, alloc, [*range(1, 11), 50, 51])
    d0 = cache.root.children[1]
    d1 = d0.children[11]
    return {
        "E": cache.root.children[20],
        "D0": d0,
        "D1": d1,
        "D2": d1.children[13],
        "S": cache.root.children[40],
        "F": d0.children[50],
    }


def test_tlru_lengths(cache_builder, put) -> None:
    cache, alloc = cache_builder(policy="tlru", policy_config=TLRU_CONFIG)
    nodes = _tlru_tree(cache, alloc, put)
    lens = {name: (n.tlru_cached_prefix_len, n.tlru_history_len) for name, n in nodes.items()}
    assert lens == {
        "E": (10, 10),
        "D0": (10, 16),
        "D1": (12, 16),
        "D2": (16, 16),
        "S": (1, 1),
        "F": (12, 12),
    }
    # A split's upper half: depth = parent's + split length, history = the lower half's.
    cache.match_prefix(RadixKey([1, 2, 3, 4, 0]))
    upper = cache.root.children[1]
    assert (upper.tlru_cached_prefix_len, upper.tlru_history_len) == (4, 16)
    assert (nodes["D0"].tlru_cached_prefix_len, nodes["D0"].tlru_history_len) == (10, 16)


def test_tlru_keys_are_sglangs(cache_builder, put, sglang_loaded) -> None:
    """radixbench's T-LRU key agrees with sglang 0.5.23's own ``TLRUStrategy.get_priority``
    on every node (SGLang reads the unified tree's ``_tlru_*`` lengths: given here by a
    proxy)."""
    strategy_cls = sglang_loaded.modules["sglang.srt.mem_cache.evict_policy"].TLRUStrategy
    cache, alloc = cache_builder(policy="tlru", policy_config=TLRU_CONFIG)
    nodes = _tlru_tree(cache, alloc, put)
    sglang = strategy_cls(**dict(TLRU_CONFIG))
    for n in nodes.values():
        proxy = type("Node", (), {})()
        proxy._tlru_history_len = n.tlru_history_len
        proxy._tlru_cached_prefix_len = n.tlru_cached_prefix_len
        proxy.key = n.key
        proxy.last_access_time = n.last_access_time
        assert cache.policy.key(n)[:-1] == sglang.get_priority(proxy)
    assert [cache.policy.key(n)[0] for n in nodes.values()] == [0, 0, 0, 0, -1, -1]


def test_tlru_split_rekeys_the_lower_half(make_cache_per_evictor, put) -> None:
    """Page 1, threshold 3, estimate 1 (budget L - 2). A 10-token leaf C (older) and a
    10-token leaf A: neither is TEL-safe (both start at 0 < 8). A match splits A after 8
    tokens: its lower half [9, 10] now starts at 8 >= 8 and is TEL-safe, so it goes first
    (SGLang's TLRUStrategy keys it when it evicts); LRU order would take C. Regression: the
    evictors that key a node when told (persistent-heap, lru-list) kept the lower half's
    pre-split key when it was re-keyed before ``_split_node`` shortened it."""
    cache, alloc = make_cache_per_evictor(policy="tlru", policy_config=TLRU_CONFIG)
    put(cache, alloc, list(range(30, 40)))
    put(cache, alloc, list(range(1, 11)))
    cache.match_prefix(RadixKey([1, 2, 3, 4, 5, 6, 7, 8, 0]))
    lower = cache.root.children[1].children[9]
    assert cache.policy.key(lower)[0] == -1
    check_integrity(cache)
    assert cache.evict(1).victims == [lower.id]
    # The same through insert's split: A again, then [1..8, 99, 99] splits it after 8. Both
    # [9, 10] and the new leaf [99, 99] are TEL-safe; [9, 10] was touched first.
    cache, alloc = make_cache_per_evictor(policy="tlru", policy_config=TLRU_CONFIG)
    put(cache, alloc, list(range(30, 40)))
    put(cache, alloc, list(range(1, 11)))
    put(cache, alloc, [1, 2, 3, 4, 5, 6, 7, 8, 99, 99])
    lower = cache.root.children[1].children[9]
    assert cache.policy.key(lower)[0] == cache.policy.key(lower.parent.children[99])[0] == -1
    check_integrity(cache)
    assert cache.evict(1).victims == [lower.id]


@pytest.mark.parametrize("one_call", [True, False], ids=["one-call", "one-by-one"])
def test_tlru_evicts_tel_safe_leaves_first(make_cache_per_evictor, put, one_call: bool) -> None:
    """Leaves: E (oldest, not safe), D2 (not safe), S and F (safe). T-LRU takes the TEL-safe
    ones first, by LRU (S, F), then the rest by LRU: E, D2, then D1 (a leaf once D2 is gone;
    its branch's high-water depth stays 16, so it is still not safe; with the resident depth
    12 it would be), then F's and D1's parent D0. LRU would take E first."""
    cache, alloc = make_cache_per_evictor(policy="tlru", policy_config=TLRU_CONFIG)
    nodes = _tlru_tree(cache, alloc, put)
    names = {n.id: name for name, n in nodes.items()}
    if one_call:
        res = cache.evict(10**6)
        victims = res.victims
    else:
        victims = []
        while cache.evictable_size():
            victims += cache.evict(1).victims
            check_integrity(cache)
    assert [names[v] for v in victims] == ["S", "F", "E", "D2", "D1", "D0"]
    check_integrity(cache)
    assert cache.num_nodes == 0


def test_make_evictor_and_policy_unknown() -> None:
    with pytest.raises(ValueError):
        make_policy("nope")
    with pytest.raises(ValueError):
        make_evictor("nope", make_policy("lru"))


# ---------------------------------------------------------------- evictor equivalence


def _random_run(
    build_cache, put_tokens, tree_paths, evictor: str, matcher: str, policy: str, page: int, seed
) -> list:
    """A reproducible stream of inserts / matches / locks / unlocks / evicts; returns its log."""
    rng = random.Random(seed)
    cache, alloc = build_cache(
        page_size=page,
        evictor=evictor,
        matcher=matcher,
        policy=policy,
        kv_size=4096,
        policy_config=(("threshold", 3 * page), ("next_prompt_estimate", page))
        if policy == "tlru"
        else (),
    )
    locked: list = []
    log: list = []
    for _ in range(160):
        op = rng.random()
        n_pages = rng.randint(1, 5)
        toks = [rng.randint(0, 2) for _ in range(n_pages * page)]
        ns = rng.choice([None, None, None, "x"])
        if op < 0.45:
            if alloc.available_size() < len(toks):
                cache.evict(len(toks))
            p, _ = put_tokens(cache, alloc, toks, extra_key=ns, priority=rng.randint(0, 3))
            log.append(("insert", p))
        elif op < 0.65:
            r = cache.match_prefix(RadixKey(toks + [7] * rng.randint(0, page), ns))
            log.append(("match", r.prefix_len, r.device_indices.tolist(), r.last_node.id))
            if rng.random() < 0.5:
                cache.inc_lock_ref(r.last_node)
                locked.append(r.last_node)
        elif op < 0.8 and locked:
            cache.dec_lock_ref(locked.pop(rng.randrange(len(locked))))
        else:
            res = cache.evict(rng.randint(0, 12))
            log.append(("evict", res.num_evicted, res.victims))
        check_integrity(cache)
        log.append((cache.evictable_size(), cache.protected_size(), cache.num_nodes))
    log.append(("paths", sorted(tree_paths(cache).items(), key=repr)))
    return log


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("page", [1, 4])
def test_all_evictors_and_matchers_agree(cache_builder, put, paths, policy, page) -> None:
    for seed in range(3):
        logs = {
            (e, m): _random_run(cache_builder, put, paths, e, m, policy, page, seed)
            for e in EVICTORS
            for m in MATCHERS
        }
        ref_key, ref = next(iter(logs.items()))
        assert ref_key[0] == "heapify"
        assert any(entry[0] == "evict" and entry[2] for entry in ref if isinstance(entry[0], str))
        for k, log in logs.items():
            assert log == ref, f"{k} differs from {ref_key} (policy={policy}, seed={seed})"


def test_lru_list_fast_path_and_side_heap(cache_builder, put) -> None:
    """Touched / new leaves are appended to the list; leaves that become evictable without a
    touch (unlock, parent of an evicted leaf) go to the side heap; order is still exact LRU."""
    cache, alloc = cache_builder(evictor="lru-list", policy="lru", kv_size=64)
    ev = cache.evictor
    assert ev.use_list
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 2, 4])  # splits: [1,2] -> {[3], [4]}
    put(cache, alloc, [5, 6])
    assert ev.list_len == 3 and not [e for e in ev.heap if ev.entry_node(e) is not None]
    r = cache.match_prefix(RadixKey([1, 2, 3]))
    cache.inc_lock_ref(r.last_node)
    assert ev.list_len == 2
    cache.match_prefix(RadixKey([5, 6]))  # [5,6] becomes the tail
    cache.dec_lock_ref(r.last_node)  # [3] is evictable again with an older access time...
    assert ev.list_len == 2 and len(ev.members(cache)) == 3  # ...so it sits on the side heap
    ref, ref_alloc = cache_builder(evictor="heapify", policy="lru", kv_size=64)
    put(ref, ref_alloc, [1, 2, 3])
    put(ref, ref_alloc, [1, 2, 4])
    put(ref, ref_alloc, [5, 6])
    r2 = ref.match_prefix(RadixKey([1, 2, 3]))
    ref.inc_lock_ref(r2.last_node)
    ref.match_prefix(RadixKey([5, 6]))
    ref.dec_lock_ref(r2.last_node)
    assert cache.evict(100).victims == ref.evict(100).victims
    check_integrity(cache)
    assert cache.num_nodes == 0 and ev.list_len == 0


@pytest.mark.parametrize("policy", ["lfu", "fifo", "mru", "filo", "priority", "slru", "tlru"])
def test_lru_list_falls_back_to_heap_for_non_monotone_policies(cache_builder, put, policy) -> None:
    cache, alloc = cache_builder(evictor="lru-list", policy=policy, kv_size=64)
    assert not cache.evictor.use_list
    put(cache, alloc, [1, 2])
    put(cache, alloc, [3])
    assert cache.evictor.list_len == 0 and cache.evictor.head is None
    assert len(cache.evictor.members(cache)) == 2
