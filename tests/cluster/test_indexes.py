"""The routers' indexes against naive models: page keys, the approximate tree, the block index;
and the approximate tree's SMG semantics that a naive model does not have (cumulative counts at
73da68c, the cached last tenant, the trim's parent push, the tree-wide budget)."""

from __future__ import annotations

import random
from array import array

import numpy as np
import pytest

from radixbench.cache.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from radixbench.cluster.routers.approx_tree import ApproxTree
from radixbench.cluster.routers.block_index import BlockIndex
from radixbench.cluster.routers.page_hash import prefix_keys


def _keys(tokens: list[int], page: int) -> array:
    out = array("Q")
    out.frombytes(prefix_keys(array("q", tokens), page).tobytes())
    return out


def test_prefix_keys_identify_prefixes() -> None:
    rng = random.Random(1)
    base = [rng.randrange(1 << 20) for _ in range(64)]
    k = _keys(base, 8)
    assert len(k) == 8 and len(set(k)) == 8
    assert _keys(base[:40] + [5] * 24, 8)[:5] == k[:5]
    assert all(a != b for a, b in zip(_keys(base[:40] + [5] * 24, 8)[5:], k[5:]))
    assert _keys([9, *base[1:]], 8)[0] != k[0]
    assert len(_keys(base[:7], 8)) == 0
    big = np.arange(200_000, dtype=np.int64)  # grows the power tables
    assert len(prefix_keys(big, 16)) == 12_500


class NaiveTree:
    """Prefix (as a tuple of pages) -> {tenant: last access}."""

    def __init__(self, page: int) -> None:
        self.page, self.held, self.clock = page, {}, 0

    def match(self, tokens: list[int]) -> tuple[int, int | None]:
        n, tenant = 0, None
        pages = len(tokens) // self.page
        for j in range(1, pages + 1):
            owners = self.held.get(tuple(tokens[: j * self.page]))
            if not owners:
                break
            n, tenant = j, max(owners, key=owners.get)
            self.clock += 1
            owners[tenant] = self.clock
        return n * self.page, tenant

    def insert(self, tokens: list[int], tenant: int) -> None:
        self.clock += 1
        for j in range(1, len(tokens) // self.page + 1):
            self.held.setdefault(tuple(tokens[: j * self.page]), {})[tenant] = self.clock


@pytest.mark.parametrize("via", ["insert", "match_and_insert"])
def test_approx_tree_matches_the_naive_model(via: str) -> None:
    """Matched length equals the naive model's; the tenant answered, and every tenant listed,
    holds that whole prefix; counted once (smg#2126), a tenant's tokens are its pages."""
    rng = random.Random(7)
    page = 2
    stems = [[rng.randrange(4) for _ in range(12)] for _ in range(5)]
    tree, naive = ApproxTree(page), NaiveTree(page)
    for _ in range(400):
        stem = rng.choice(stems)
        tokens = stem[: rng.randrange(1, 13)] + [rng.randrange(4) for _ in range(rng.randrange(6))]
        k = _keys(tokens, page)
        t = rng.randrange(3)
        if via == "insert":
            m = tree.match(k)
            tree.insert(k, t)
        else:
            m = tree.match_and_insert(k, lambda _m, t=t: t)
        want, _ = naive.match(tokens)
        assert m.tokens == want
        if m.tokens:
            assert m.tenant is not None and m.tenant in m.tenants
            assert set(m.tenants) <= set(naive.held[tuple(tokens[: m.tokens])])
        naive.insert(tokens, t)
    for t in range(3):
        pages = sum(1 for owners in naive.held.values() if t in owners)
        assert tree.tokens.get(t, 0) == pages * page
    assert tree.total == sum(tree.tokens.values())


def test_approx_tree_evicts_lru_leaves_per_tenant() -> None:
    tree = ApproxTree(1)
    tree.insert(_keys([1, 2, 3, 4], 1), 0)
    tree.insert(_keys([1, 2, 9, 9], 1), 0)
    tree.insert(_keys([1, 2, 3, 4], 1), 1)
    tree.match(_keys([1, 2, 3, 4], 1))  # touches tenant 0, the first of the node's map
    assert tree.tokens == {0: 6, 1: 4}
    assert tree.evict_tenants_by_size(4) == 2  # tenant 0's least recent leaf: [9, 9]
    assert tree.tokens == {0: 4, 1: 4}
    assert tree.match(_keys([1, 2, 9, 9], 1)).tokens == 2
    assert tree.match(_keys([1, 2, 3, 4], 1)).tenant == 0
    tree.evict_tenants_by_size(0)  # tenant 0 first: [3, 4] stays for 1, [1, 2] is no leaf yet
    assert tree.tokens == {0: 2, 1: 0}
    tree.evict_tenants_by_size(0)
    assert tree.tokens == {0: 0, 1: 0} and not tree.root.children


def test_counts_are_cumulative_at_73da68c() -> None:
    """@73da68c each insert re-adds every fully matched edge (token_tree.rs:476-483, 603-606),
    and the trim removes count - max tokens (1269-1334): here all of the tenant's 3 pages."""
    k = _keys(list(range(48)), 16)
    cumulative, once = ApproxTree(16, count_once=False), ApproxTree(16)
    for _ in range(3):
        cumulative.insert(k, 0)
        once.insert(k, 0)
    assert cumulative.tokens == {0: 144} and once.tokens == {0: 48}
    cumulative.match_and_insert(k, lambda m: 0)
    assert cumulative.tokens == {0: 192}
    assert cumulative.evict_tenants_by_size(100) == 48  # 92 to remove, only 48 held
    assert cumulative.tokens == {0: 144} and not cumulative.root.children
    assert once.evict_tenants_by_size(100) == 0  # 48 <= 100: nothing


def test_reported_tenant_is_the_cached_one() -> None:
    """A touch refreshes a node's cached tenant only when the timestamp it drew is a multiple
    of 16 (token_tree.rs:293-298); else the first tenant attached answers (253-269)."""
    tree = ApproxTree(1)
    a = _keys([1, 2, 3], 1)
    tree.insert(a, 0)  # draws 0 (node) and 1 (touch 0)
    tree.insert(a, 1)  # draws 2 (touch 1): the most recent toucher is 1
    assert tree.match(a).tenant == 0  # draw 3 touches 0
    while tree.clock % 16:
        tree.insert(a, 1)  # draws 4..15 touch tenant 1; none refreshes the cache
    assert tree.match(a).tenant == 0  # draw 16 touches 0 and caches it
    tree.insert(a, 1)
    assert tree.root.children[a[0]].last == 0
    while tree.clock % 16:
        tree.insert(a, 1)
    tree.insert(a, 1)  # draw 32: tenant 1 cached
    assert tree.match(a).tenant == 1


def test_trim_pushes_the_parent_only_after_removing_the_node() -> None:
    """A tenant-leaf that another tenant still holds stays, and its parent is not pushed
    (cleanup_empty_ancestors_with_parent, token_tree.rs:1414-1456): tenant 0 keeps [1, 2]."""
    tree = ApproxTree(1)
    tree.insert(_keys([1, 2, 3, 4], 1), 0)
    tree.insert(_keys([1, 2, 9, 9], 1), 1)
    tree.insert(_keys([1, 2, 3, 4], 1), 1)
    assert tree.evict_tenant(0, 0) == 2
    assert tree.tokens[0] == 2
    assert 0 in tree.root.children[_keys([1], 1)[0]].tenants  # the [1, 2] node
    assert tree.evict_tenant(0, 0) == 2  # now a leaf: the next trim takes it
    assert tree.tokens[0] == 0


def test_tree_budget_is_shared() -> None:
    """smg#2137: the trim fits the tree-wide total, LRU leaves of every tenant first
    (token_tree.rs:1675-1733 @f8daa88)."""
    tree = ApproxTree(16)
    for t in range(8):
        tree.insert(_keys(list(range(t * 1000, t * 1000 + 32)), 16), t)
    assert tree.total == 256
    assert tree.evict_tree_by_size(128) == 128
    assert [tree.tokens[t] for t in range(8)] == [0] * 4 + [32] * 4


def test_block_index_matches_sets() -> None:
    rng = random.Random(3)
    idx = BlockIndex(3)
    model: list[set[int]] = [set(), set(), set()]
    for _ in range(2000):
        i = rng.randrange(3)
        r = rng.random()
        hashes = [rng.randrange(-20, 20) for _ in range(rng.randrange(1, 4))]
        if r < 0.6:
            idx.apply(i, [BlockStored(hashes, None, [0] * len(hashes), 1)])
            model[i] |= set(hashes)
        elif r < 0.97:
            idx.apply(i, [BlockRemoved(hashes)])
            model[i] -= set(hashes)
        else:
            idx.apply(i, [AllBlocksCleared()])
            model[i].clear()
        idx.apply(i, [BlockStored([99], None, [0], 1, medium="CPU_PINNED")])  # other tier
        assert idx.blocks == [len(m) for m in model]
        ids = [rng.randrange(-20, 20) for _ in range(6)]
        want = []
        for m in model:
            n = 0
            while n < len(ids) and ids[n] in m:
                n += 1
            want.append(n)
        assert idx.prefix_blocks(ids) == want


def test_block_index_holders_match_a_per_block_model() -> None:
    """``apply`` against a per-block model: the same holder bits per block and counts per
    instance after every event; events of up to 40 blocks with repeats, over a space where
    instances share blocks, removals mostly of blocks the instance holds."""
    rng = random.Random(5)
    idx = BlockIndex(4)
    model: dict[int, int] = {}
    for _ in range(3000):
        i = rng.randrange(4)
        bit = 1 << i
        hashes = [rng.randrange(-300, 300) for _ in range(rng.randrange(0, 40))]
        if rng.random() < 0.55:
            idx.apply(i, [BlockStored(hashes, None, [0] * len(hashes), 1)])
            for h in hashes:
                model[h] = model.get(h, 0) | bit
        else:
            held = [h for h, m in model.items() if m & bit]
            if held and rng.random() < 0.7:  # blocks this instance holds, some twice
                hashes = rng.sample(held, min(len(held), 30)) + hashes[:3]
            idx.apply(i, [BlockRemoved(hashes)])
            for h in hashes:
                if model.get(h, 0) & bit:
                    model[h] &= ~bit
                    if not model[h]:
                        del model[h]
        assert idx.holders == model
        assert idx.blocks == [sum(1 for m in model.values() if m >> j & 1) for j in range(4)]
