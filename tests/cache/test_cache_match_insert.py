"""match_prefix and insert: tree shape, splits, namespaces, pages (radixbench.cache.radix_cache)."""

from __future__ import annotations

import pytest
import torch

from radixbench.cache import CacheConfig, RadixCache, RadixKey, check_integrity

# ---------------------------------------------------------------- config


@pytest.mark.parametrize(
    "kw",
    [
        {"page_size": 0},
        {"page_size": -4},
        {"evictor": "nope"},
        {"matcher": "nope"},
        {"policy": "nope"},
    ],
)
def test_config_validation(kw: dict) -> None:
    with pytest.raises(ValueError):
        CacheConfig(**kw)


def test_fresh_cache_is_empty(make_cache) -> None:
    cache, alloc = make_cache(kv_size=32)
    assert cache.num_nodes == 0
    assert (cache.evictable_size(), cache.protected_size(), cache.total_size()) == (0, 0, 0)
    assert cache.root.lock_ref == 1
    assert alloc.available_size() == 32


# ---------------------------------------------------------------- match_prefix, page 1


def test_match_empty_key(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3])
    r = cache.match_prefix(RadixKey([]))
    assert r.prefix_len == 0
    assert r.last_node is cache.root
    assert r.device_indices.numel() == 0
    assert r.device_indices.dtype == torch.int64
    assert cache.num_nodes == 1
    check_integrity(cache)


def test_match_on_empty_tree(make_cache) -> None:
    cache, _ = make_cache()
    r = cache.match_prefix(RadixKey([1, 2, 3]))
    assert r.prefix_len == 0
    assert r.last_node is cache.root
    assert r.device_indices.numel() == 0
    assert r.device_indices.dtype == torch.int64
    check_integrity(cache)


def test_match_no_common_first_token(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3])
    r = cache.match_prefix(RadixKey([2, 1, 3]))
    assert (r.prefix_len, r.last_node) == (0, cache.root)
    assert cache.num_nodes == 1
    check_integrity(cache)


def test_match_exact_edge_and_longer_key_do_not_split(make_cache, put) -> None:
    cache, alloc = make_cache()
    _, v = put(cache, alloc, [1, 2, 3, 4, 5])
    leaf = next(iter(cache.root.children.values()))
    for query in ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6, 7]):
        r = cache.match_prefix(RadixKey(query))
        assert r.prefix_len == 5
        assert r.last_node is leaf
        assert r.device_indices.tolist() == v.tolist()
        assert r.device_indices.dtype == torch.int64
        assert cache.num_nodes == 1
        check_integrity(cache)


@pytest.mark.parametrize(
    "query", [[1, 2], [1, 2, 9, 9], [1, 2, 7]], ids=["shorter", "diverge", "diverge-short"]
)
def test_match_mid_edge_splits_exactly_one_node(make_cache, put, paths, query) -> None:
    cache, alloc = make_cache()
    _, v = put(cache, alloc, [1, 2, 3, 4, 5])
    sizes = (cache.evictable_size(), cache.protected_size())
    free_before = alloc.available_size()
    r = cache.match_prefix(RadixKey(query))
    check_integrity(cache)
    assert r.prefix_len == 2
    assert r.device_indices.tolist() == v[:2].tolist()
    assert cache.num_nodes == 2
    upper = r.last_node
    assert upper.parent is cache.root
    assert list(upper.key.token_ids) == [1, 2]
    assert list(upper.children) == [3]
    lower = upper.children[3]
    assert list(lower.key.token_ids) == [3, 4, 5]
    # Indices unchanged: the two halves together still hold exactly the inserted slots.
    assert torch.cat([upper.value, lower.value]).tolist() == v.tolist()
    assert paths(cache) == {
        (None, (1, 2)): v[:2].tolist(),
        (None, (1, 2, 3, 4, 5)): v.tolist(),
    }
    # Sizes and allocator untouched by a split.
    assert (cache.evictable_size(), cache.protected_size()) == sizes
    assert alloc.available_size() == free_before
    # Matching the full key again walks both halves, without a further split.
    r2 = cache.match_prefix(RadixKey([1, 2, 3, 4, 5]))
    assert r2.prefix_len == 5
    assert r2.last_node is lower
    assert r2.device_indices.tolist() == v.tolist()
    assert cache.num_nodes == 2
    check_integrity(cache)


def test_match_on_node_boundary_does_not_split(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3, 4])
    _, v2 = put(cache, alloc, [1, 2, 7, 8])  # splits into [1,2] -> {[3,4], [7,8]}
    assert cache.num_nodes == 3
    r = cache.match_prefix(RadixKey([1, 2]))
    assert r.prefix_len == 2
    assert list(r.last_node.key.token_ids) == [1, 2]
    assert cache.num_nodes == 3
    r = cache.match_prefix(RadixKey([1, 2, 5]))
    assert r.prefix_len == 2
    assert cache.num_nodes == 3
    r = cache.match_prefix(RadixKey([1, 2, 7, 8, 9]))
    assert r.prefix_len == 4
    assert r.device_indices.tolist()[2:] == v2[2:].tolist()
    assert cache.num_nodes == 3
    check_integrity(cache)


def test_match_returns_slots_across_several_nodes(make_cache, put) -> None:
    cache, alloc = make_cache()
    _, a = put(cache, alloc, [1, 2, 3])
    _, b = put(cache, alloc, [1, 2, 3, 4, 5])
    _, c = put(cache, alloc, [1, 2, 3, 4, 5, 6])
    r = cache.match_prefix(RadixKey([1, 2, 3, 4, 5, 6, 0]))
    assert r.prefix_len == 6
    assert r.device_indices.tolist() == a.tolist() + b[3:].tolist() + c[5:].tolist()
    assert r.device_indices.dtype == torch.int64
    check_integrity(cache)


def test_match_updates_access_time_but_not_sizes_or_hits(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3])
    leaf = next(iter(cache.root.children.values()))
    t0, hits = leaf.last_access_time, leaf.hit_count
    cache.match_prefix(RadixKey([1, 2, 3]))
    assert leaf.last_access_time > t0
    assert leaf.hit_count == hits
    assert leaf.lock_ref == 0
    assert (cache.evictable_size(), cache.protected_size()) == (3, 0)


# ---------------------------------------------------------------- namespaces


def test_extra_key_namespaces_do_not_share_prefixes(make_cache, put, paths) -> None:
    cache, alloc = make_cache()
    pa, va = put(cache, alloc, [1, 2, 3], extra_key="a")
    pb, vb = put(cache, alloc, [1, 2, 3], extra_key="b")
    assert (pa, pb) == (0, 0)
    assert cache.num_nodes == 2
    assert len(cache.root.children) == 2
    assert cache.evictable_size() == 6
    ra = cache.match_prefix(RadixKey([1, 2, 3, 4], extra_key="a"))
    rb = cache.match_prefix(RadixKey([1, 2, 3], extra_key="b"))
    assert (ra.prefix_len, rb.prefix_len) == (3, 3)
    assert ra.device_indices.tolist() == va.tolist()
    assert rb.device_indices.tolist() == vb.tolist()
    assert ra.last_node is not rb.last_node
    # The default namespace and an unknown one see nothing.
    assert cache.match_prefix(RadixKey([1, 2, 3])).prefix_len == 0
    assert cache.match_prefix(RadixKey([1, 2, 3], extra_key="c")).prefix_len == 0
    # A partial match in "a" splits only "a"'s subtree.
    r = cache.match_prefix(RadixKey([1, 9], extra_key="a"))
    assert r.prefix_len == 1
    assert cache.num_nodes == 3
    assert r.last_node.key == RadixKey([1], extra_key="a")
    assert paths(cache) == {
        ("a", (1,)): va[:1].tolist(),
        ("a", (1, 2, 3)): va.tolist(),
        ("b", (1, 2, 3)): vb.tolist(),
    }
    # Re-inserting in a namespace finds its own prefix only.
    p, _ = put(cache, alloc, [1, 2, 3, 4], extra_key="b")
    assert p == 3
    p, _ = put(cache, alloc, [1, 2], extra_key=None)
    assert p == 0
    check_integrity(cache)


# ---------------------------------------------------------------- pages


@pytest.mark.parametrize("page", [4, 16])
def test_paged_match_rounds_down_to_pages(make_cache, put, page: int) -> None:
    cache, alloc = make_cache(page_size=page, kv_size=512)
    tokens = list(range(1, 3 * page + 1))
    _, v = put(cache, alloc, tokens)
    assert cache.num_nodes == 1
    # Key of 2 pages + 3 tokens matches exactly 2 pages, splitting the 3-page node once.
    r = cache.match_prefix(RadixKey(tokens[: 2 * page + 3]))
    assert r.prefix_len == 2 * page
    assert r.device_indices.tolist() == v[: 2 * page].tolist()
    assert cache.num_nodes == 2
    check_integrity(cache)
    # Shorter than a page: nothing.
    r = cache.match_prefix(RadixKey(tokens[: page - 1]))
    assert (r.prefix_len, r.last_node) == (0, cache.root)
    # Full key plus a partial page: everything, no split.
    r = cache.match_prefix(RadixKey([*tokens, 1, 2]))
    assert r.prefix_len == 3 * page
    assert r.device_indices.tolist() == v.tolist()
    assert cache.num_nodes == 2
    check_integrity(cache)


@pytest.mark.parametrize("page", [4, 16])
def test_paged_divergence_inside_page_stops_at_page_boundary(make_cache, put, page) -> None:
    cache, alloc = make_cache(page_size=page, kv_size=512)
    tokens = list(range(1, 3 * page + 1))
    _, v = put(cache, alloc, tokens)
    q = list(tokens)
    q[page + 1] = -5  # diverge at the 2nd token of the 2nd page
    r = cache.match_prefix(RadixKey(q))
    assert r.prefix_len == page
    assert r.device_indices.tolist() == v[:page].tolist()
    assert cache.num_nodes == 2
    check_integrity(cache)
    # Divergence in the first page: nothing at all.
    q = list(tokens)
    q[page - 1] = -5
    assert cache.match_prefix(RadixKey(q)).prefix_len == 0
    # Inserting the diverging key shares exactly one page.
    q = list(tokens)
    q[page + 1] = -5
    p, _ = put(cache, alloc, q)
    assert p == page
    assert cache.num_nodes == 3
    assert cache.evictable_size() == 3 * page + 2 * page


@pytest.mark.parametrize("page", [4, 16])
def test_paged_child_keys_are_page_tuples(make_cache, put, page) -> None:
    cache, alloc = make_cache(page_size=page, kv_size=512)
    tokens = list(range(1, 2 * page + 1))
    put(cache, alloc, tokens)
    put(cache, alloc, tokens[:page] + [0] * page)
    assert list(cache.root.children) == [tuple(tokens[:page])]
    upper = cache.root.children[tuple(tokens[:page])]
    assert set(upper.children) == {tuple(tokens[page:]), (0,) * page}
    put(cache, alloc, tokens, extra_key="ns")
    assert ("ns", tuple(tokens[:page])) in cache.root.children
    check_integrity(cache)


@pytest.mark.parametrize("page", [4, 16])
def test_paged_insert_unaligned_raises_and_changes_nothing(make_cache, put, paths, page):
    cache, alloc = make_cache(page_size=page, kv_size=512)
    put(cache, alloc, list(range(1, page + 1)))
    before = (paths(cache), cache.num_nodes, cache.evictable_size(), cache.protected_size())
    for n in (1, page - 1, page + 1, 2 * page + 3):
        v = alloc.alloc(n)
        assert v is not None
        with pytest.raises(ValueError):
            cache.insert(RadixKey(list(range(1, n + 1))), v)
        alloc.free(v)
        check_integrity(cache)
    assert (paths(cache), cache.num_nodes, cache.evictable_size(), cache.protected_size()) == (
        before
    )


def test_insert_value_length_mismatch_raises(make_cache) -> None:
    cache, alloc = make_cache()
    v = alloc.alloc(2)
    assert v is not None
    with pytest.raises(ValueError):
        cache.insert(RadixKey([1, 2, 3]), v)
    assert cache.num_nodes == 0
    check_integrity(cache)


# ---------------------------------------------------------------- insert


def test_insert_returns_cached_prefix_len_and_grows_by_new_tokens(make_cache, put) -> None:
    cache, alloc = make_cache(kv_size=64)
    p, v1 = put(cache, alloc, [1, 2, 3, 4, 5])
    assert p == 0
    assert cache.evictable_size() == 5
    assert alloc.available_size() == 64 - 5
    p, v2 = put(cache, alloc, [1, 2, 3, 7, 8])
    assert p == 3
    assert cache.evictable_size() == 5 + 2
    assert cache.num_nodes == 3  # [1,2,3] -> {[4,5], [7,8]}
    assert alloc.available_size() == 64 - 7
    p, _ = put(cache, alloc, [1, 2, 3, 4, 5])  # fully cached
    assert p == 5
    assert cache.evictable_size() == 7
    p, _ = put(cache, alloc, [1, 2])  # strict prefix of an edge: split, nothing new
    assert p == 2
    assert cache.num_nodes == 4
    assert cache.evictable_size() == 7
    p, v5 = put(cache, alloc, [1, 2, 3, 4, 5, 6])  # extends a leaf
    assert p == 5
    assert cache.evictable_size() == 8
    assert cache.num_nodes == 5
    assert alloc.available_size() == 64 - 8
    # The tree keeps the first inserter's slots.
    r = cache.match_prefix(RadixKey([1, 2, 3, 4, 5, 6]))
    assert r.device_indices.tolist() == v1.tolist() + v5[5:].tolist()
    r = cache.match_prefix(RadixKey([1, 2, 3, 7, 8]))
    assert r.device_indices.tolist() == v1[:3].tolist() + v2[3:].tolist()
    assert cache.total_size() == cache.evictable_size() + cache.protected_size()


def test_insert_empty_key(make_cache) -> None:
    cache, _ = make_cache()
    assert cache.insert(RadixKey([]), torch.empty((0,), dtype=torch.int64)) == 0
    assert cache.num_nodes == 0
    check_integrity(cache)


def test_insert_hit_count_increments_on_walked_path(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3])
    node = cache.root.children[1]
    assert node.hit_count == 0  # a new leaf has not been walked through yet
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 2, 3, 4])
    assert node.hit_count == 2
    leaf4 = node.children[4]
    assert leaf4.hit_count == 0
    put(cache, alloc, [1, 2, 3, 4, 5])
    assert (node.hit_count, leaf4.hit_count) == (3, 1)
    put(cache, alloc, [9])  # other branch: no change here
    assert (node.hit_count, leaf4.hit_count) == (3, 1)
    # match_prefix does not count as a hit.
    cache.match_prefix(RadixKey([1, 2, 3, 4]))
    assert (node.hit_count, leaf4.hit_count) == (3, 1)


def test_split_inherits_lock_priority_hit_count(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3, 4, 5], priority=3)
    put(cache, alloc, [1, 2, 3, 4, 5], priority=0)  # hit_count 1, priority stays max = 3
    leaf = cache.root.children[1]
    assert (leaf.hit_count, leaf.priority) == (1, 3)
    cache.inc_lock_ref(leaf)
    check_integrity(cache)
    assert (cache.evictable_size(), cache.protected_size()) == (0, 5)
    p, _ = put(cache, alloc, [1, 2, 9], priority=1)
    assert p == 2
    upper = cache.root.children[1]
    assert upper is not leaf
    assert list(upper.key.token_ids) == [1, 2]
    assert leaf.parent is upper
    assert list(leaf.key.token_ids) == [3, 4, 5]
    # The walk touched the old node before splitting, so both halves carry the 2nd hit.
    assert (upper.lock_ref, upper.priority, upper.hit_count) == (1, 3, 2)
    assert (leaf.lock_ref, leaf.priority, leaf.hit_count) == (1, 3, 2)
    new = upper.children[9]
    assert (new.lock_ref, new.priority, new.hit_count) == (0, 1, 0)
    # A split moves no tokens between evictable and protected; only the new token is added.
    assert (cache.evictable_size(), cache.protected_size()) == (1, 5)
    # Unlocking through the (now lower) original node unlocks both halves.
    assert cache.dec_lock_ref(leaf) == 5
    assert (upper.lock_ref, leaf.lock_ref) == (0, 0)
    assert (cache.evictable_size(), cache.protected_size()) == (6, 0)
    check_integrity(cache)


def test_match_split_inherits_lock_and_priority(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3, 4], priority=7)
    leaf = cache.root.children[1]
    cache.inc_lock_ref(leaf)
    cache.inc_lock_ref(leaf)
    r = cache.match_prefix(RadixKey([1, 2, 0]))
    check_integrity(cache)
    upper = r.last_node
    assert upper is not leaf and leaf.parent is upper
    assert (upper.lock_ref, upper.priority) == (2, 7)
    assert (cache.evictable_size(), cache.protected_size()) == (0, 4)


def test_insert_priority_is_max_over_walked_path(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2], priority=2)
    put(cache, alloc, [1, 2, 3], priority=5)
    a = cache.root.children[1]
    b = a.children[3]
    assert (a.priority, b.priority) == (5, 5)
    put(cache, alloc, [1, 2, 3], priority=1)
    assert (a.priority, b.priority) == (5, 5)
    put(cache, alloc, [1, 2], priority=9)
    assert (a.priority, b.priority) == (9, 5)


def test_insert_without_value_uses_token_ids(make_cache) -> None:
    cache, alloc = make_cache(kv_size=16)
    v = alloc.alloc(3)
    assert v is not None
    # value=None stores the token ids themselves as slots (SGLang's test convenience).
    assert cache.insert(RadixKey(v.tolist())) == 0
    r = cache.match_prefix(RadixKey(v.tolist()))
    assert r.device_indices.tolist() == v.tolist()
    assert r.device_indices.dtype == torch.int64
    check_integrity(cache)


def test_reset_drops_tree(make_cache, put) -> None:
    cache, alloc = make_cache(kv_size=16)
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 4])
    cache.reset()
    alloc.clear()
    check_integrity(cache)
    assert cache.num_nodes == 0
    assert cache.total_size() == 0
    assert cache.match_prefix(RadixKey([1, 2, 3])).prefix_len == 0
    assert cache.evict(100).num_evicted == 0
    put(cache, alloc, [1, 2, 3])
    assert cache.evict(100).num_evicted == 3
    check_integrity(cache)


def test_cache_without_pool_cannot_cache_requests() -> None:
    from radixbench.cache import TokenToKVPoolAllocator

    cache = RadixCache(None, TokenToKVPoolAllocator(4))
    with pytest.raises(RuntimeError):
        cache.cache_finished_req(object())  # type: ignore[arg-type]
