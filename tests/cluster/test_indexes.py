"""The routers' indexes against naive models: page keys, the approximate tree, the block index."""

from __future__ import annotations

import random
from array import array

import numpy as np

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


def test_approx_tree_matches_the_naive_model() -> None:
    """Matched length equals the naive model's; the tenant answered holds that whole prefix."""
    rng = random.Random(7)
    page = 2
    stems = [[rng.randrange(4) for _ in range(12)] for _ in range(5)]
    tree, naive = ApproxTree(page), NaiveTree(page)
    for _ in range(400):
        stem = rng.choice(stems)
        tokens = stem[: rng.randrange(1, 13)] + [rng.randrange(4) for _ in range(rng.randrange(6))]
        k = _keys(tokens, page)
        got, tenant = tree.match(k)
        want, _ = naive.match(tokens)
        assert got == want
        if got:
            assert tenant is not None
            assert tenant in naive.held[tuple(tokens[:got])]
        t = rng.randrange(3)
        tree.insert(k, t)
        naive.insert(tokens, t)
    for t in range(3):
        pages = sum(1 for owners in naive.held.values() if t in owners)
        assert tree.tokens.get(t, 0) == pages * page


def test_approx_tree_evicts_lru_leaves_per_tenant() -> None:
    tree = ApproxTree(1)
    tree.insert(_keys([1, 2, 3, 4], 1), 0)
    tree.insert(_keys([1, 2, 9, 9], 1), 0)
    tree.insert(_keys([1, 2, 3, 4], 1), 1)
    tree.match(_keys([1, 2, 3, 4], 1))  # touches tenant 1 (the most recent there)
    assert tree.tokens == {0: 6, 1: 4}
    assert tree.evict_by_size(4) == 2  # tenant 0's least recent leaf: [3, 4]
    assert tree.tokens == {0: 4, 1: 4}
    assert tree.match(_keys([1, 2, 9, 9], 1)) == (4, 0)
    assert tree.match(_keys([1, 2, 3, 4], 1)) == (4, 1)
    tree.evict_by_size(0)
    assert tree.tokens == {0: 0, 1: 0} and not tree.root.children


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
