"""check_integrity: it passes on healthy caches and catches each kind of corruption."""

from __future__ import annotations

import pytest
import torch

from radixbench.cache import (
    CacheConfig,
    IntegrityError,
    RadixCache,
    RadixKey,
    check_integrity,
    make_allocator,
)


def _healthy(make, put):
    """[1,2,3] -> {[4,5] (locked), [7,8]}, and [9]: (cache, alloc, upper)."""
    cache, alloc = make(kv_size=64)
    put(cache, alloc, [1, 2, 3, 4, 5])
    put(cache, alloc, [1, 2, 3, 7, 8])
    put(cache, alloc, [9])
    upper = cache.root.children[1]
    cache.inc_lock_ref(upper.children[4])
    check_integrity(cache)
    return cache, alloc, upper


@pytest.fixture
def healthy(make_default_cache, put):
    """``_healthy`` on the default pair: what check_integrity detects in the tree, counters and
    slots does not depend on the evictor or matcher."""
    return _healthy(make_default_cache, put)


@pytest.fixture
def healthy_per_evictor(make_cache_per_evictor, put):
    """``_healthy`` on every evictor: for the check of the evictor's own members."""
    return _healthy(make_cache_per_evictor, put)


def test_check_integrity_mutates_nothing(healthy, paths) -> None:
    cache, alloc, _ = healthy
    before = (paths(cache), cache.evictable_size(), cache.protected_size(), cache.num_nodes)
    free_before = (alloc.is_free.clone(), alloc.available_size())
    check_integrity(cache)
    after = (paths(cache), cache.evictable_size(), cache.protected_size(), cache.num_nodes)
    assert after == before
    assert torch.equal(alloc.is_free, free_before[0])
    assert alloc.available_size() == free_before[1]


def test_detects_wrong_evictable_size(healthy) -> None:
    cache, _, _ = healthy
    cache.evictable_size_ += 1
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_wrong_protected_size(healthy) -> None:
    cache, _, _ = healthy
    cache.protected_size_ -= 1
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_wrong_num_nodes(healthy) -> None:
    cache, _, _ = healthy
    cache.num_nodes += 1
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_lock_ref_above_parent(healthy) -> None:
    cache, _, upper = healthy
    upper.children[4].lock_ref = 2  # parent has 1
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_lock_ref_set_without_accounting(healthy) -> None:
    cache, _, _ = healthy
    cache.root.children[9].lock_ref = 1  # protected now, but the counters say evictable
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_negative_lock_ref(healthy) -> None:
    cache, _, upper = healthy
    upper.children[7].lock_ref = -1
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_root_lock_change(healthy) -> None:
    cache, _, _ = healthy
    cache.root.lock_ref = 2
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_stale_evictable_flag(healthy) -> None:
    cache, _, _ = healthy
    cache.root.children[9].evictable = False
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_wrong_evictable_leaf_count(healthy) -> None:
    cache, _, _ = healthy
    cache.num_evictable_leaves += 1
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_broken_parent_link(healthy) -> None:
    cache, _, upper = healthy
    upper.children[7].parent = cache.root
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_wrong_child_key(healthy) -> None:
    cache, _, _ = healthy
    nine = cache.root.children.pop(9)
    cache.root.children[8] = nine
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_key_value_length_mismatch(healthy) -> None:
    cache, _, upper = healthy
    upper.value = upper.value[:2]
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_slot_held_and_free(healthy) -> None:
    cache, alloc, _ = healthy
    alloc.free(cache.root.children[9].value)  # freed behind the tree's back
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_slot_held_twice(healthy) -> None:
    cache, alloc, upper = healthy
    nine = cache.root.children[9]
    spare = nine.value.clone()
    nine.value = upper.value[:1].clone()  # now two nodes claim the same slot
    alloc.free(spare)
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_evictor_missing_member(healthy_per_evictor) -> None:
    cache, _, _ = healthy_per_evictor
    if cache.config.evictor == "heapify-walk":
        # It derives its members from the tree by a walk; corrupt the cached flag instead.
        cache.root.children[9].evictable = False
    else:
        cache.evictor.reset()  # forgets the evictable leaves it keeps
    with pytest.raises(IntegrityError):
        check_integrity(cache)


@pytest.mark.parametrize("page", [4])
def test_detects_unaligned_node_in_paged_cache(make_default_cache, put, page) -> None:
    cache, alloc = make_default_cache(page_size=page, kv_size=64)
    put(cache, alloc, list(range(1, 2 * page + 1)))
    leaf = cache.root.children[tuple(range(1, page + 1))]
    leaf.key = leaf.key[:-1]
    leaf.value = leaf.value[:-1]
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_integrity_error_is_assertion_error() -> None:
    assert issubclass(IntegrityError, AssertionError)


def test_integrity_after_every_kind_of_op(make_cache, put) -> None:
    """Every pair: a split by match (the matcher), locks, evicts (the evictor)."""
    cache, alloc = make_cache(kv_size=64)
    put(cache, alloc, [1, 2, 3])
    cache.match_prefix(RadixKey([1, 2]))
    check_integrity(cache)
    node = cache.match_prefix(RadixKey([1])).last_node
    check_integrity(cache)
    cache.inc_lock_ref(node)
    check_integrity(cache)
    cache.evict(10)
    check_integrity(cache)
    cache.dec_lock_ref(node)
    check_integrity(cache)
    cache.evict(10)
    check_integrity(cache)
    assert cache.num_nodes == 0


def test_detects_node_holding_padding_slot(cache_builder, put) -> None:
    cache, alloc = cache_builder(kv_size=8)
    put(cache, alloc, [1, 2, 3])
    node = cache.root.children[1]
    alloc.free(node.value[:1])
    node.value = torch.cat([torch.zeros(1, dtype=torch.int64), node.value[1:]])
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_node_holding_out_of_range_slot(cache_builder, put) -> None:
    cache, alloc = cache_builder(kv_size=8)
    put(cache, alloc, [1, 2, 3])
    node = cache.root.children[1]
    alloc.free(node.value[:1])
    node.value = torch.cat([torch.tensor([100]), node.value[1:]])
    with pytest.raises(IntegrityError):
        check_integrity(cache)


def test_detects_node_holding_negative_slot(cache_builder, put) -> None:
    cache, alloc = cache_builder(kv_size=8)
    put(cache, alloc, [1, 2, 3])
    node = cache.root.children[1]
    alloc.free(node.value[:1])
    node.value = torch.cat([torch.tensor([-3]), node.value[1:]])
    with pytest.raises(IntegrityError, match="outside"):
        check_integrity(cache)


def test_slot_messages_name_the_fault(healthy) -> None:
    cache, alloc, upper = healthy
    nine = cache.root.children[9]
    spare = nine.value.clone()
    nine.value = upper.value[:1].clone()
    alloc.free(spare)
    with pytest.raises(IntegrityError, match="held by two tree nodes"):
        check_integrity(cache)
    nine.value = spare
    with pytest.raises(IntegrityError, match="both held by the tree and free"):
        check_integrity(cache)


@pytest.mark.parametrize("page", [4, 16])
def test_paged_pool_slot_faults(page) -> None:
    """In a paged pool all of page 0 is padding; the slot checks hold per slot."""
    alloc = make_allocator(8 * page, page)
    cache = RadixCache(None, alloc, CacheConfig(page_size=page))
    slots = alloc.alloc(2 * page)
    assert slots is not None
    cache.insert(RadixKey(list(range(1, 2 * page + 1))), slots)
    check_integrity(cache)
    node = next(iter(cache.root.children.values()))
    held = node.value
    node.value = torch.cat([held[:-1], held[:1]])  # first slot twice, last slot leaked
    with pytest.raises(IntegrityError, match="two tree nodes"):
        check_integrity(cache)
    node.value = torch.cat([held[:-1], torch.tensor([page - 1])])  # a slot of padding page 0
    with pytest.raises(IntegrityError):
        check_integrity(cache)
    node.value = held
    alloc.free(held[:page])  # the tree's first page freed behind its back
    with pytest.raises(IntegrityError, match="both held"):
        check_integrity(cache)
