"""match_prefix and insert: tree shape, splits, namespaces, pages (radixbench.cache.radix_cache).

A test that checks a prefix length, a split or page rounding runs once per matcher (evictor
fixed: ``make_cache_per_matcher`` / ``make_impl_per_matcher``); one that checks node fields,
clock readings or value copies runs on the default pair (``make_default_*``); reset, which
clears the evictor, on every evictor."""

from __future__ import annotations

import pytest
import torch

from radixbench.cache import CacheConfig, RadixKey, check_integrity

# ---------------------------------------------------------------- config


@pytest.mark.parametrize(
    "kw",
    [
        {"page_size": 0},
        {"page_size": -4},
        {"evictor": "nope"},
        {"matcher": "nope"},
        {"policy": "nope"},
        {"policy": "tlru", "policy_config": (("threshold", -1),)},
        {"policy": "tlru", "policy_config": (("next_prompt_estimate", -1),)},
        {"policy": "tlru", "policy_config": (("nope", 1),)},
        {"policy": "lru", "policy_config": (("threshold", 1),)},
        {"policy": "slru", "policy_config": (("threshold", 1),)},
    ],
)
def test_config_validation(kw: dict) -> None:
    with pytest.raises(ValueError):
        CacheConfig(**kw)


def test_fresh_cache_is_empty(make_default_cache) -> None:
    cache, alloc = make_default_cache(kv_size=32)
    assert cache.num_nodes == 0
    assert (cache.evictable_size(), cache.protected_size(), cache.total_size()) == (0, 0, 0)
    assert cache.root.lock_ref == 1
    assert alloc.available_size() == 32


# ---------------------------------------------------------------- match_prefix, page 1


def test_match_empty_key(make_cache_per_matcher, put) -> None:
    cache, alloc = make_cache_per_matcher()
    put(cache, alloc, [1, 2, 3])
    r = cache.match_prefix(RadixKey([]))
    assert r.prefix_len == 0
    assert r.last_node is cache.root
    assert r.device_indices.numel() == 0
    assert r.device_indices.dtype == torch.int64
    assert cache.num_nodes == 1
    check_integrity(cache)


def test_match_on_empty_tree(make_cache_per_matcher) -> None:
    cache, _ = make_cache_per_matcher()
    r = cache.match_prefix(RadixKey([1, 2, 3]))
    assert r.prefix_len == 0
    assert r.last_node is cache.root
    assert r.device_indices.numel() == 0
    assert r.device_indices.dtype == torch.int64
    check_integrity(cache)


def test_match_no_common_first_token(make_cache_per_matcher, put) -> None:
    cache, alloc = make_cache_per_matcher()
    put(cache, alloc, [1, 2, 3])
    r = cache.match_prefix(RadixKey([2, 1, 3]))
    assert (r.prefix_len, r.last_node) == (0, cache.root)
    assert cache.num_nodes == 1
    check_integrity(cache)


def test_match_exact_edge_and_longer_key_do_not_split(make_cache_per_matcher, put) -> None:
    cache, alloc = make_cache_per_matcher()
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
def test_match_mid_edge_splits_exactly_one_node(make_cache_per_matcher, put, paths, query) -> None:
    cache, alloc = make_cache_per_matcher()
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


def test_match_on_node_boundary_does_not_split(make_cache_per_matcher, put) -> None:
    cache, alloc = make_cache_per_matcher()
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


def test_match_returns_slots_across_several_nodes(make_cache_per_matcher, put) -> None:
    cache, alloc = make_cache_per_matcher()
    _, a = put(cache, alloc, [1, 2, 3])
    _, b = put(cache, alloc, [1, 2, 3, 4, 5])
    _, c = put(cache, alloc, [1, 2, 3, 4, 5, 6])
    r = cache.match_prefix(RadixKey([1, 2, 3, 4, 5, 6, 0]))
    assert r.prefix_len == 6
    assert r.device_indices.tolist() == a.tolist() + b[3:].tolist() + c[5:].tolist()
    assert r.device_indices.dtype == torch.int64
    check_integrity(cache)


def test_match_updates_access_time_but_not_sizes_or_hits(make_cache_per_matcher, put) -> None:
    cache, alloc = make_cache_per_matcher()
    put(cache, alloc, [1, 2, 3])
    leaf = next(iter(cache.root.children.values()))
    t0, hits = leaf.last_access_time, leaf.hit_count
    cache.match_prefix(RadixKey([1, 2, 3]))
    assert leaf.last_access_time > t0
    assert leaf.hit_count == hits
    assert leaf.lock_ref == 0
    assert (cache.evictable_size(), cache.protected_size()) == (3, 0)


# ---------------------------------------------------------------- namespaces


def test_extra_key_namespaces_do_not_share_prefixes(make_cache_per_matcher, put, paths) -> None:
    cache, alloc = make_cache_per_matcher()
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
def test_paged_match_rounds_down_to_pages(make_cache_per_matcher, put, page: int) -> None:
    cache, alloc = make_cache_per_matcher(page_size=page, kv_size=512)
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
def test_paged_divergence_inside_page_stops_at_page_boundary(
    make_cache_per_matcher, put, page
) -> None:
    cache, alloc = make_cache_per_matcher(page_size=page, kv_size=512)
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
def test_paged_child_keys_are_page_tuples(make_cache_per_matcher, put, page) -> None:
    cache, alloc = make_cache_per_matcher(page_size=page, kv_size=512)
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
def test_paged_insert_truncates_unaligned_key(
    make_impl_per_matcher, put, paths, check, page
) -> None:
    """An unaligned key is cut to whole pages (SGLang ``page_aligned``), never rejected: the
    tree takes the new whole pages' slots; the partial page's slots stay the caller's."""
    cache, alloc = make_impl_per_matcher(page_size=page, kv_size=512)
    _, v0 = put(cache, alloc, list(range(1, page + 1)))
    before = (paths(cache), cache.num_nodes, cache.evictable_size(), cache.protected_size())
    for n in (1, page - 1, page + 1):  # nothing new in whole pages: nothing changes
        v = alloc.alloc(n)
        assert v is not None
        free = alloc.available_size()
        assert cache.insert(RadixKey(list(range(1, n + 1))), v) == n // page * page
        assert alloc.available_size() == free
        alloc.free(v)
        check(cache)
        assert (
            paths(cache),
            cache.num_nodes,
            cache.evictable_size(),
            cache.protected_size(),
        ) == before
    n = 2 * page + 3
    v = alloc.alloc(n)
    assert v is not None
    assert cache.insert(RadixKey(list(range(1, n + 1))), v) == page
    alloc.free(v[:page])
    check(cache)
    assert not bool(alloc.is_free[v[page : 2 * page]].any())  # the tree's now
    assert paths(cache) == {
        **before[0],
        (None, tuple(range(1, 2 * page + 1))): v0.tolist() + v[page : 2 * page].tolist(),
    }
    assert (cache.num_nodes, cache.evictable_size()) == (2, 2 * page)
    alloc.free(v[2 * page :])  # the partial page: never the tree's
    check(cache)
    assert alloc.available_size() + cache.total_size() == 512


def test_insert_value_length_mismatch_raises(make_default_cache) -> None:
    cache, alloc = make_default_cache()
    v = alloc.alloc(2)
    assert v is not None
    with pytest.raises(ValueError):
        cache.insert(RadixKey([1, 2, 3]), v)
    assert cache.num_nodes == 0
    check_integrity(cache)


# ---------------------------------------------------------------- insert


def test_insert_returns_cached_prefix_len_and_grows_by_new_tokens(
    make_cache_per_matcher, put
) -> None:
    cache, alloc = make_cache_per_matcher(kv_size=64)
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


def test_insert_empty_key(make_cache_per_matcher) -> None:
    cache, _ = make_cache_per_matcher()
    assert cache.insert(RadixKey([]), torch.empty((0,), dtype=torch.int64)) == 0
    assert cache.num_nodes == 0
    check_integrity(cache)


def test_insert_hit_count_increments_on_walked_path(make_impl_per_matcher, put) -> None:
    """0.5.23: a new leaf starts with one hit; every insert that walks through a node counts
    one more; match_prefix counts none."""
    cache, alloc = make_impl_per_matcher()
    put(cache, alloc, [1, 2, 3])
    node = cache.root.children[1]
    assert node.hit_count == 1
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 2, 3, 4])
    assert node.hit_count == 3
    leaf4 = node.children[4]
    assert leaf4.hit_count == 1
    put(cache, alloc, [1, 2, 3, 4, 5])
    assert (node.hit_count, leaf4.hit_count, leaf4.children[5].hit_count) == (4, 2, 1)
    put(cache, alloc, [9])  # other branch: no change here
    assert (node.hit_count, leaf4.hit_count) == (4, 2)
    cache.match_prefix(RadixKey([1, 2, 3, 4]))
    assert (node.hit_count, leaf4.hit_count) == (4, 2)
    assert cache.root.hit_count == 0


def test_insert_inserted_len_counts_only_new_nodes(make_impl_per_matcher) -> None:
    """``inserted_len``: tokens of this key the same request inserted before (0.5.23
    ``cache_inserted_len``): only nodes that end beyond it count a hit, a new leaf included."""
    cache, _ = make_impl_per_matcher()
    cache.insert(RadixKey([1, 2, 3]))  # value None: the token ids as slots
    cache.insert(RadixKey([1, 2, 3, 4, 5]))
    a = cache.root.children[1]
    b = a.children[4]
    assert (a.hit_count, b.hit_count) == (2, 1)
    assert cache.insert(RadixKey([1, 2, 3, 4, 5, 6]), inserted_len=5) == 5
    c = b.children[6]
    assert (a.hit_count, b.hit_count, c.hit_count) == (2, 1, 1)  # only [6] ends beyond 5
    cache.insert(RadixKey([1, 2, 3, 4, 5, 6]), inserted_len=4)  # b, c end beyond 4
    assert (a.hit_count, b.hit_count, c.hit_count) == (2, 2, 2)
    cache.insert(RadixKey([1, 2, 3, 4, 5, 6, 7]), inserted_len=9)  # all within 9
    d = c.children[7]
    assert (a.hit_count, b.hit_count, c.hit_count, d.hit_count) == (2, 2, 2, 0)
    # A split's upper half ends at 2 > inserted_len 1: it counts; the lower half counts none.
    cache.insert(RadixKey([1, 2, 8]), inserted_len=1)
    upper = cache.root.children[1]
    assert upper is not a and a.parent is upper
    assert (upper.hit_count, a.hit_count, upper.children[8].hit_count) == (3, 2, 1)


def test_split_by_insert_counts_and_raises_only_the_upper_half(
    make_impl_per_matcher, put, check
) -> None:
    cache, alloc = make_impl_per_matcher()
    put(cache, alloc, [1, 2, 3, 4, 5], priority=3)
    put(cache, alloc, [1, 2, 3, 4, 5], priority=0)  # hit_count 2, priority stays max = 3
    leaf = cache.root.children[1]
    assert (leaf.hit_count, leaf.priority) == (2, 3)
    cache.inc_lock_ref(leaf)
    check(cache)
    assert (cache.evictable_size(), cache.protected_size()) == (0, 5)
    walk_time = cache.root.last_access_time
    p, _ = put(cache, alloc, [1, 2, 9], priority=1)
    assert p == 2
    upper = cache.root.children[1]
    assert upper is not leaf
    assert list(upper.key.token_ids) == [1, 2]
    assert leaf.parent is upper
    assert list(leaf.key.token_ids) == [3, 4, 5]
    # The split's upper half is a new node copying lock, priority and hit count, then walked:
    # one more hit. The lower half keeps its 2 hits and was touched by the walk before the
    # split; the upper half's clock readings (access, creation) come after that touch.
    assert (upper.lock_ref, upper.priority, upper.hit_count) == (1, 3, 3)
    assert (leaf.lock_ref, leaf.priority, leaf.hit_count) == (1, 3, 2)
    t = cache.root.last_access_time
    assert t > walk_time and leaf.last_access_time == t
    assert (upper.last_access_time, upper.creation_time) == (t + 1, t + 2)
    new = upper.children[9]
    assert (new.lock_ref, new.priority, new.hit_count) == (0, 1, 1)
    assert (new.last_access_time, new.creation_time) == (t + 3, t + 4)
    # A split moves no tokens between evictable and protected; only the new token is added.
    assert (cache.evictable_size(), cache.protected_size()) == (1, 5)
    # Unlocking through the (now lower) original node unlocks both halves.
    assert cache.dec_lock_ref(leaf) == 5
    assert (upper.lock_ref, leaf.lock_ref) == (0, 0)
    assert (cache.evictable_size(), cache.protected_size()) == (6, 0)
    check(cache)


def test_split_by_insert_raises_priority_of_the_upper_half_only(make_impl_per_matcher, put) -> None:
    cache, alloc = make_impl_per_matcher()
    put(cache, alloc, [1, 2, 3, 4, 5], priority=1)
    put(cache, alloc, [1, 2, 9], priority=4)
    upper = cache.root.children[1]
    lower, new = upper.children[3], upper.children[9]
    assert (upper.priority, lower.priority, new.priority) == (4, 1, 4)
    assert cache.root.priority == 4


def test_match_split_inherits_lock_priority_and_hits(make_impl_per_matcher, put, check) -> None:
    cache, alloc = make_impl_per_matcher()
    put(cache, alloc, [1, 2, 3, 4], priority=7)
    leaf = cache.root.children[1]
    cache.inc_lock_ref(leaf)
    cache.inc_lock_ref(leaf)
    r = cache.match_prefix(RadixKey([1, 2, 0]))
    check(cache)
    upper = r.last_node
    assert upper is not leaf and leaf.parent is upper
    # A match counts no hit: the upper half copies the lower's.
    assert (upper.lock_ref, upper.priority, upper.hit_count) == (2, 7, 1)
    assert (leaf.lock_ref, leaf.priority, leaf.hit_count) == (2, 7, 1)
    t = cache.root.last_access_time
    assert leaf.last_access_time == t
    assert (upper.last_access_time, upper.creation_time) == (t + 1, t + 2)
    assert (cache.evictable_size(), cache.protected_size()) == (0, 4)


def test_insert_priority_is_max_over_walked_path(make_impl_per_matcher, put) -> None:
    cache, alloc = make_impl_per_matcher()
    put(cache, alloc, [1, 2], priority=2)
    put(cache, alloc, [1, 2, 3], priority=5)
    a = cache.root.children[1]
    b = a.children[3]
    assert (a.priority, b.priority) == (5, 5)
    put(cache, alloc, [1, 2, 3], priority=1)
    assert (a.priority, b.priority) == (5, 5)
    put(cache, alloc, [1, 2], priority=9)
    assert (a.priority, b.priority) == (9, 5)


def test_insert_without_value_uses_token_ids(make_default_cache) -> None:
    cache, alloc = make_default_cache(kv_size=16)
    v = alloc.alloc(3)
    assert v is not None
    # value=None stores the token ids themselves as slots (SGLang's test convenience).
    assert cache.insert(RadixKey(v.tolist())) == 0
    r = cache.match_prefix(RadixKey(v.tolist()))
    assert r.device_indices.tolist() == v.tolist()
    assert r.device_indices.dtype == torch.int64
    check_integrity(cache)


def test_reset_drops_tree(make_cache_per_evictor, put) -> None:
    cache, alloc = make_cache_per_evictor(kv_size=16)
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


def test_insert_keeps_a_copy_of_the_value(make_default_impl, check) -> None:
    """The tree clones what it keeps of ``value`` (SGLang ``value.clone()``), on insert and on
    both halves of a split: later writes to the caller's tensor, to a node's value from before
    a split, or to the indices a match returned change no cached index."""
    cache, alloc = make_default_impl()
    slots = alloc.alloc(5)
    assert slots is not None
    expected = slots.tolist()
    v = slots.clone()  # the caller's tensor
    cache.insert(RadixKey([1, 2, 3, 4, 5]), v)
    v.fill_(0)
    full = RadixKey([1, 2, 3, 4, 5])
    assert cache.match_prefix(full).device_indices.tolist() == expected
    (node,) = cache.root.children.values()
    before_split = node.value
    r = cache.match_prefix(RadixKey([1, 2, 3, 9]))  # splits [1,2,3] | [4,5]
    assert r.device_indices.tolist() == expected[:3]
    before_split.fill_(0)
    r.device_indices.fill_(0)
    assert cache.match_prefix(full).device_indices.tolist() == expected
    assert r.last_node.value.tolist() == expected[:3]
    dup = torch.tensor([*expected[:3], 0, 0], dtype=torch.int64)
    assert cache.insert(full, dup) == 5  # fully cached: the tree keeps its own slots
    dup.fill_(-1)
    assert cache.match_prefix(full).device_indices.tolist() == expected
    check(cache)


def test_clock_is_read_where_sglang_reads_time(make_default_impl) -> None:
    """Reads of the injected clock: two per new node (access, then creation time), one per
    insert walk, one per match walk, none for a match whose page-aligned key is empty."""
    ticks: list[int] = []

    def clock() -> int:
        ticks.append(len(ticks) + 100)
        return ticks[-1]

    cache, _ = make_default_impl(page_size=2, clock=clock)
    assert (cache.root.last_access_time, cache.root.creation_time) == (100, 101)
    cache.insert(RadixKey([1, 2, 3, 4]))  # walk 102, leaf 103 / 104
    (leaf,) = cache.root.children.values()
    assert (cache.root.last_access_time, leaf.last_access_time, leaf.creation_time) == (
        102,
        103,
        104,
    )
    cache.match_prefix(RadixKey([1]))  # shorter than a page: no walk, no reading
    cache.match_prefix(RadixKey([]))
    assert len(ticks) == 5
    cache.match_prefix(RadixKey([7, 7]))  # a miss still walks from the root
    assert (len(ticks), cache.root.last_access_time) == (6, 105)
    r = cache.match_prefix(RadixKey([1, 2, 9, 9]))  # walk 106, split's new node 107 / 108
    assert (leaf.last_access_time, r.last_node.last_access_time, r.last_node.creation_time) == (
        106,
        107,
        108,
    )
    cache.insert(RadixKey([]))  # an empty insert still reads once (SGLang _insert_helper)
    assert (len(ticks), cache.root.last_access_time) == (10, 109)
