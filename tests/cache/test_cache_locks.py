"""inc_lock_ref / dec_lock_ref accounting (radixbench.cache.radix_cache), on every evictor: a lock
or unlock moves nodes in and out of the evictable set the evictor keeps (``check_integrity``
compares its members with the unlocked leaves)."""

from __future__ import annotations

import pytest

from radixbench.cache import RadixKey, check_integrity


def _sizes(cache) -> tuple[int, int]:
    assert cache.total_size() == cache.evictable_size() + cache.protected_size()
    return cache.evictable_size(), cache.protected_size()


@pytest.fixture
def forked(make_cache_per_evictor, put):
    """[1,2,3] -> {[4,5], [7,8]}: returns (cache, alloc, upper, left, right)."""
    cache, alloc = make_cache_per_evictor()
    put(cache, alloc, [1, 2, 3, 4, 5])
    put(cache, alloc, [1, 2, 3, 7, 8])
    upper = cache.root.children[1]
    return cache, alloc, upper, upper.children[4], upper.children[7]


def test_lock_moves_whole_path_to_protected(forked) -> None:
    cache, _, upper, left, right = forked
    assert _sizes(cache) == (7, 0)
    assert cache.inc_lock_ref(left) == -5  # [4,5] and [1,2,3]
    check_integrity(cache)
    assert _sizes(cache) == (2, 5)
    assert (upper.lock_ref, left.lock_ref, right.lock_ref) == (1, 1, 0)
    # Locking the sibling only adds its own 2 tokens; the shared parent is counted once.
    assert cache.inc_lock_ref(right) == -2
    check_integrity(cache)
    assert _sizes(cache) == (0, 7)
    assert (upper.lock_ref, left.lock_ref, right.lock_ref) == (2, 1, 1)
    # A second lock of the same path changes no sizes.
    assert cache.inc_lock_ref(left) == 0
    check_integrity(cache)
    assert _sizes(cache) == (0, 7)
    assert (upper.lock_ref, left.lock_ref, right.lock_ref) == (3, 2, 1)


def test_unlock_reverses(forked) -> None:
    cache, _, upper, left, right = forked
    cache.inc_lock_ref(left)
    cache.inc_lock_ref(left)
    cache.inc_lock_ref(right)
    assert cache.dec_lock_ref(left) == 0
    check_integrity(cache)
    assert _sizes(cache) == (0, 7)
    assert cache.dec_lock_ref(left) == 2  # left 1->0; upper 2->1 stays protected
    check_integrity(cache)
    assert _sizes(cache) == (2, 5)
    assert cache.dec_lock_ref(right) == 5
    check_integrity(cache)
    assert _sizes(cache) == (7, 0)
    assert (upper.lock_ref, left.lock_ref, right.lock_ref) == (0, 0, 0)


def test_dec_on_unlocked_node_raises_and_changes_nothing(forked) -> None:
    cache, _, upper, left, right = forked
    with pytest.raises(RuntimeError):
        cache.dec_lock_ref(left)
    check_integrity(cache)
    assert _sizes(cache) == (7, 0)
    cache.inc_lock_ref(left)
    cache.dec_lock_ref(left)
    with pytest.raises(RuntimeError):
        cache.dec_lock_ref(left)
    check_integrity(cache)
    assert (upper.lock_ref, left.lock_ref, right.lock_ref) == (0, 0, 0)


def test_lock_root_is_noop(forked) -> None:
    cache, *_ = forked
    assert cache.inc_lock_ref(cache.root) == 0
    assert cache.dec_lock_ref(cache.root) == 0
    assert cache.root.lock_ref == 1
    check_integrity(cache)
    assert _sizes(cache) == (7, 0)


def test_lock_flips_evictable_leaf_flags(forked) -> None:
    cache, _, upper, left, right = forked
    assert (upper.evictable, left.evictable, right.evictable) == (False, True, True)
    assert cache.num_evictable_leaves == 2
    cache.inc_lock_ref(left)
    assert (left.evictable, right.evictable) == (False, True)
    assert cache.num_evictable_leaves == 1
    cache.dec_lock_ref(left)
    assert (left.evictable, right.evictable) == (True, True)
    assert cache.num_evictable_leaves == 2
    check_integrity(cache)


def test_lock_of_matched_prefix_then_insert_below(make_cache_per_evictor, put) -> None:
    cache, alloc = make_cache_per_evictor()
    put(cache, alloc, [1, 2, 3, 4])
    r = cache.match_prefix(RadixKey([1, 2, 9]))
    assert r.prefix_len == 2
    assert cache.inc_lock_ref(r.last_node) == -2
    check_integrity(cache)
    assert _sizes(cache) == (2, 2)
    # Inserting below a locked node adds an unlocked (evictable) leaf.
    p, _ = put(cache, alloc, [1, 2, 9, 9])
    assert p == 2
    assert _sizes(cache) == (4, 2)
    assert cache.dec_lock_ref(r.last_node) == 2
    assert _sizes(cache) == (6, 0)
    check_integrity(cache)
