"""RadixKey, child keys and matchers (radixbench.cache.key / matcher)."""

from __future__ import annotations

import random
from array import array

import numpy as np
import pytest

from radixbench.cache import MATCHERS, RadixKey, check_integrity
from radixbench.cache.key import check_namespaces, child_key
from radixbench.cache.matcher import make_matcher

# ---------------------------------------------------------------- RadixKey


@pytest.mark.parametrize(
    "source",
    [
        [5, 6, 7],
        (5, 6, 7),
        array("q", [5, 6, 7]),
        array("i", [5, 6, 7]),
        np.array([5, 6, 7], dtype=np.int64),
        range(5, 8),
    ],
    ids=["list", "tuple", "array-q", "array-i", "numpy", "range"],
)
def test_key_construction_normalises_to_int64_array(source: object) -> None:
    k = RadixKey(source)  # type: ignore[arg-type]
    assert isinstance(k.token_ids, array)
    assert k.token_ids.typecode == "q"
    assert list(k.token_ids) == [5, 6, 7]
    assert list(k) == [5, 6, 7]
    assert len(k) == 3
    assert k.extra_key is None


def test_key_holds_full_int64_range() -> None:
    big = [2**63 - 1, -(2**63), 0]
    assert list(RadixKey(big).token_ids) == big


def test_key_empty() -> None:
    k = RadixKey([])
    assert len(k) == 0
    assert list(k) == []
    assert k == RadixKey(())


def test_key_int_index_returns_one_token_key_in_same_namespace() -> None:
    k = RadixKey([10, 20, 30], extra_key="lora-1")
    first, last = k[0], k[-1]
    assert isinstance(first, RadixKey)
    assert list(first.token_ids) == [10]
    assert list(last.token_ids) == [30]
    assert first.extra_key == "lora-1"
    assert k[1] == RadixKey([20], "lora-1")


@pytest.mark.parametrize("idx", [3, 100, -4])
def test_key_int_index_out_of_range_raises(idx: int) -> None:
    with pytest.raises(IndexError):
        RadixKey([10, 20, 30])[idx]


def test_key_slice_is_a_copy_in_same_namespace() -> None:
    ids = array("q", [1, 2, 3, 4, 5])
    k = RadixKey(ids, extra_key="x")
    s = k[1:4]
    assert isinstance(s, RadixKey)
    assert list(s.token_ids) == [2, 3, 4]
    assert s.extra_key == "x"
    assert len(k[10:]) == 0
    assert list(k[::2].token_ids) == [1, 3, 5]
    # A slice owns its ids: mutating the source afterwards does not change it.
    k.token_ids[2] = 99
    assert list(s.token_ids) == [2, 3, 4]


def test_key_equality_includes_extra_key() -> None:
    assert RadixKey([1, 2]) == RadixKey([1, 2])
    assert RadixKey([1, 2], "a") == RadixKey(array("q", [1, 2]), "a")
    assert RadixKey([1, 2], "a") != RadixKey([1, 2], "b")
    assert RadixKey([1, 2], "a") != RadixKey([1, 2])
    assert RadixKey([1, 2]) != RadixKey([1, 2, 3])
    assert RadixKey([1, 2]) != RadixKey([2, 1])
    # Not equal to a plain sequence of the same ids.
    assert RadixKey([1, 2]) != [1, 2]


def test_key_is_unhashable() -> None:
    with pytest.raises(TypeError):
        hash(RadixKey([1]))


def test_check_namespaces() -> None:
    check_namespaces(RadixKey([1], "a"), RadixKey([2], "a"))
    check_namespaces(RadixKey([1]), RadixKey([2]))
    with pytest.raises(ValueError):
        check_namespaces(RadixKey([1], "a"), RadixKey([1], "b"))
    with pytest.raises(ValueError):
        check_namespaces(RadixKey([1], "a"), RadixKey([1]))


def test_child_key_shapes() -> None:
    t = array("q", [1, 2, 3, 4, 5, 6, 7, 8])
    assert child_key(t, 0, 1, None) == 1
    assert child_key(t, 3, 1, None) == 4
    assert child_key(t, 0, 4, None) == (1, 2, 3, 4)
    assert child_key(t, 4, 4, None) == (5, 6, 7, 8)
    assert child_key(t, 2, 1, "ns") == ("ns", 3)
    assert child_key(t, 4, 4, "ns") == ("ns", (5, 6, 7, 8))
    # Namespaces never collide with each other or with the default one.
    assert child_key(t, 0, 1, "a") != child_key(t, 0, 1, "b")
    assert child_key(t, 0, 1, "a") != child_key(t, 0, 1, None)


# ---------------------------------------------------------------- matchers


def ref_common_prefix(a: list[int], b: list[int], offset: int, page: int) -> int:
    rest = b[offset:]
    n = 0
    while n < min(len(a), len(rest)) and a[n] == rest[n]:
        n += 1
    return n // page * page


@pytest.mark.parametrize("matcher", sorted(MATCHERS))
@pytest.mark.parametrize("page", [1, 2, 4, 16])
def test_matcher_equals_reference(matcher: str, page: int) -> None:
    m = make_matcher(matcher)
    rng = random.Random(1000 + page)
    for _ in range(400):
        n_pages = rng.randint(1, 6)
        a = [rng.randint(0, 2) for _ in range(n_pages * page)]
        # b shares a random-length prefix with a at a page-aligned offset.
        off = rng.randint(0, 3) * page
        shared = a[: rng.randint(0, len(a))]
        tail = [rng.randint(0, 2) for _ in range(rng.randint(0, 2 * page + 1))]
        b = [rng.randint(0, 2) for _ in range(off)] + shared + tail
        got = m.common_prefix(array("q", a), array("q", b), off, page)
        assert got == ref_common_prefix(a, b, off, page), (a, b, off, page)
        assert got % page == 0


@pytest.mark.parametrize("matcher", sorted(MATCHERS))
def test_matcher_edge_cases(matcher: str) -> None:
    m = make_matcher(matcher)
    q = array("q")
    a = array("q", [1, 2, 3, 4, 5, 6, 7, 8])
    assert m.common_prefix(a, q, 0, 1) == 0
    assert m.common_prefix(a, a, 0, 1) == 8
    assert m.common_prefix(a, a, 0, 4) == 8
    # Query ends mid-page: round down.
    assert m.common_prefix(a, array("q", [1, 2, 3, 4, 5, 6, 7]), 0, 4) == 4
    assert m.common_prefix(a, array("q", [1, 2, 3, 4, 5, 6, 7]), 0, 1) == 7
    # Divergence inside the second page stops at the page boundary.
    assert m.common_prefix(a, array("q", [1, 2, 3, 4, 5, 9, 7, 8]), 0, 4) == 4
    assert m.common_prefix(a, array("q", [1, 2, 3, 4, 5, 9, 7, 8]), 0, 1) == 5
    # Query longer than a.
    assert m.common_prefix(a, array("q", [*a, 9, 9]), 0, 2) == 8
    # Offset into b.
    assert m.common_prefix(a, array("q", [0, 0, 0, 0, *a[:6]]), 4, 4) == 4
    assert m.common_prefix(a, array("q", [0, 0, 0, 0, *a[:6]]), 4, 1) == 6
    assert m.common_prefix(a, array("q", [9, 2, 3, 4]), 0, 1) == 0
    # Both sides unaligned and equal: still a whole number of pages.
    six = array("q", [1, 2, 3, 4, 5, 6])
    assert m.common_prefix(six, six, 0, 4) == 4
    assert m.common_prefix(six, array("q", [0, 0, 0, 0, *six]), 4, 4) == 4


def test_make_matcher_unknown() -> None:
    with pytest.raises(ValueError, match="linear"):
        make_matcher("nope")


def test_cache_salt_and_bigram_are_namespaces() -> None:
    plain, salted = RadixKey([1, 2]), RadixKey([1, 2], cache_salt="u1")
    assert plain != salted and plain.namespace is None
    assert salted.namespace == (None, "u1", False)
    assert RadixKey([1], "lora").namespace == "lora"  # SGLang's child-key shape
    with pytest.raises(ValueError, match="namespaces"):
        check_namespaces(plain, salted)
    with pytest.raises(ValueError):
        check_namespaces(RadixKey([1], cache_salt="a"), RadixKey([1], cache_salt="b"))
    big = RadixKey.bigram([1, 2])
    with pytest.raises(ValueError):
        check_namespaces(big, RadixKey(big.token_ids))
    assert salted[0].namespace == salted.namespace and salted[0:1].cache_salt == "u1"
    assert big[0:1].is_bigram


def test_bigram_key_packs_pairs() -> None:
    from radixbench.cache.key import to_bigrams

    assert len(RadixKey.bigram([5])) == 0 and len(RadixKey.bigram([])) == 0
    k = RadixKey.bigram([1, 2, 3, 4])
    assert len(k) == 3
    assert list(k.token_ids) == [(1 << 32) | 2, (2 << 32) | 3, (3 << 32) | 4]
    assert list(to_bigrams([2**31 - 1, 0])) == [(2**31 - 1) << 32]
    with pytest.raises(ValueError, match="bigram"):
        to_bigrams([-1, 2])
    with pytest.raises(IndexError):
        k[3]


def test_namespaces_never_share_a_prefix(cache_builder) -> None:
    cache, alloc = cache_builder(kv_size=64)
    keys = [
        RadixKey([1, 2, 3]),
        RadixKey([1, 2, 3], "lora"),
        RadixKey([1, 2, 3], cache_salt="u1"),
        RadixKey([1, 2, 3], "lora", cache_salt="u1"),
    ]
    for k in keys:
        v = alloc.alloc(3)
        assert cache.insert(k, v) == 0
    for k in keys:
        assert cache.match_prefix(k).prefix_len == 3
    assert cache.match_prefix(RadixKey([1, 2, 3], cache_salt="u2")).prefix_len == 0
    assert len(cache.root.children) == 4


@pytest.mark.parametrize("page", [1, 2])
def test_bigram_match_is_raw_matched_minus_one_rounded_to_page(cache_builder, page) -> None:
    cache, alloc = cache_builder(kv_size=64, page_size=page)
    raw = [1, 2, 3, 4, 5]  # 4 bigrams
    v = alloc.alloc(5)
    assert cache.insert(RadixKey.bigram(raw), v) == 0  # value cut to the 4 bigrams (SGLang)
    check_integrity(cache)
    assert cache.total_size() == 4 and bool(alloc.is_free[v[4:]].sum() == 0)
    # Query agrees with raw tokens 1..4 (4 raw tokens matched): 3 bigrams, rounded to a page.
    r = cache.match_prefix(RadixKey.bigram([1, 2, 3, 4, 9]))
    assert r.prefix_len == 3 // page * page
    assert r.device_indices.tolist() == v[: 3 // page * page].tolist()
    assert cache.match_prefix(RadixKey([1, 2, 3, 4])).prefix_len == 0  # not a bigram key


# ---------------------------------------------------------------- limit


def test_key_limit_behaves_as_the_cut_key_without_a_copy() -> None:
    ids = array("q", [1, 2, 3, 4, 5])
    k = RadixKey(ids, "lora", limit=3)
    assert k.token_ids is ids  # nothing copied
    assert len(k) == 3 and list(k) == [1, 2, 3]
    assert k == RadixKey([1, 2, 3], "lora") and k != RadixKey(ids, "lora")
    assert list(k[1:].token_ids) == [2, 3] and list(k[:].token_ids) == [1, 2, 3]
    assert k[:].limit is None and k[-1].token_ids.tolist() == [3]
    assert k.raw().tolist() == [1, 2, 3]
    with pytest.raises(IndexError):
        k[3]
    assert len(RadixKey(ids, limit=9)) == 5 and RadixKey(ids, limit=9).raw() is ids
    with pytest.raises(ValueError, match="limit"):
        RadixKey(ids, limit=-1)


@pytest.mark.parametrize("matcher", sorted(MATCHERS))
@pytest.mark.parametrize("page", [1, 4])
def test_limited_key_matches_and_inserts_as_the_cut_key(cache_builder, matcher, page) -> None:
    """match_prefix / insert of ``RadixKey(ids, limit=n)`` give what ``ids[:n]`` gives, also
    where a cached node runs past the limit (its match is cut there, splitting it)."""
    rng = random.Random(page)
    ids = array("q", [rng.randrange(4) for _ in range(40)])
    outs = []
    for limited in (False, True):
        cache, alloc = cache_builder(kv_size=256, page_size=page, matcher=matcher)
        cache.insert(RadixKey(ids), alloc.alloc(40))
        other = array("q", ids[:9]) + array("q", [7] * 11)
        cache.insert(RadixKey(other), alloc.alloc(20))
        res = []
        for n in (0, 3, 9, 13, 39, 40):
            key = RadixKey(ids, limit=n) if limited else RadixKey(ids[:n])
            m = cache.match_prefix(key)
            res.append((m.prefix_len, m.device_indices.tolist(), m.last_node.id))
        tail = array("q", [5] * 8)
        key = RadixKey(other + tail, limit=24) if limited else RadixKey(other + tail[:4])
        res.append(cache.insert(key, alloc.alloc(32)))
        check_integrity(cache)
        res.append(sorted((len(c.key), c.key.limit) for c in cache.root.children.values()))
        outs.append(res)
    assert outs[0] == outs[1]
    assert outs[1][3][0] == 13 // page * page  # cut inside the 40-token node
