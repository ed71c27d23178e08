"""release: KV-slot bookkeeping of a finished (``checkpoint=True``) or retracted
(``checkpoint=False``) request, as sglang 0.5.23's ``release_kv_cache`` for a ``RadixCache``.

Every test runs on radixbench's cache and on sglang 0.5.23's own ``RadixCache``
(``SGLangCache``): the expectations are SGLang's behaviour. radixbench's cache has the default
evictor and matcher (request bookkeeping depends on neither), except in the test that evicts
(every evictor). Request flows on every evictor and matcher: test_sglang_fidelity.py and
test_sglang_served_fidelity.py.
"""

from __future__ import annotations

import pytest

from radixbench.cache import DoubleFreeError, RadixKey


def finish(cache, req, owned_len: int | None = None, checkpoint: bool = True) -> None:
    """Release ``req`` (owning KV for all of its tokens by default); its row must be freed."""
    pool = cache.req_to_token_pool
    rows = pool.available_size()
    cache.release(req, len(req.tokens) if owned_len is None else owned_len, checkpoint)
    assert (req.lock, req.last_node) == (None, None)
    assert pool.available_size() == rows + 1
    with pytest.raises(DoubleFreeError):  # the row really was freed
        pool.free(req.req_pool_idx)


def test_finish_first_request_caches_everything(make_default_impl, admit, paths, check) -> None:
    cache, alloc = make_default_impl(kv_size=64)
    toks = list(range(1, 9))
    req, kv = admit(cache, alloc, toks)
    assert req.last_node is cache.root and req.cache_protected_len == 0
    finish(cache, req)
    check(cache)
    assert paths(cache) == {(None, tuple(toks)): kv.tolist()}
    assert alloc.available_size() == 64 - 8
    assert (cache.evictable_size(), cache.protected_size()) == (8, 0)
    assert cache.root.lock_ref == 1
    (leaf,) = cache.root.children.values()
    assert (leaf.lock_ref, leaf.hit_count) == (0, 1)


def test_finish_request_with_cached_prefix_releases_lock(
    make_default_impl, admit, paths, check
) -> None:
    cache, alloc = make_default_impl(kv_size=64)
    req1, kv1 = admit(cache, alloc, list(range(1, 9)))
    finish(cache, req1)
    req2, kv2 = admit(cache, alloc, [1, 2, 3, 4, 5, 20, 21, 22])
    assert req2.cache_protected_len == 5
    prefix_node = req2.last_node
    assert prefix_node.lock_ref == 1
    assert cache.protected_size() == 5
    finish(cache, req2)
    check(cache)
    assert prefix_node.lock_ref == 0
    assert (cache.evictable_size(), cache.protected_size()) == (11, 0)
    assert alloc.available_size() == 64 - 11
    assert paths(cache)[(None, (1, 2, 3, 4, 5, 20, 21, 22))] == kv1[:5].tolist() + kv2.tolist()


def test_finish_second_request_frees_duplicate_slots(
    make_default_impl, admit, paths, check
) -> None:
    cache, alloc = make_default_impl(kv_size=64)
    req1, kv1 = admit(cache, alloc, list(range(1, 9)))
    finish(cache, req1)
    # Two requests with the same new tail, scheduled before either finished.
    toks = [1, 2, 3, 4, 5, 20, 21, 22]
    req2, kv2 = admit(cache, alloc, toks)
    req3, kv3 = admit(cache, alloc, toks)
    assert req2.last_node is req3.last_node
    assert req2.last_node.lock_ref == 2
    assert alloc.available_size() == 64 - 8 - 3 - 3
    finish(cache, req2)
    assert alloc.available_size() == 64 - 8 - 3 - 3
    # req3's tail [20,21,22] was cached by req2 meanwhile: its own 3 slots are duplicates.
    finish(cache, req3)
    check(cache)
    assert alloc.available_size() == 64 - 8 - 3
    assert bool(alloc.is_free[kv3].all())
    assert not bool(alloc.is_free[kv2].any())
    assert (cache.evictable_size(), cache.protected_size()) == (11, 0)
    assert paths(cache)[(None, tuple(toks))] == kv1[:5].tolist() + kv2.tolist()
    # Hits: [20,21,22] was created by req2 (1) and walked by req3 (2); [1..5] was walked by both.
    tail = cache.match_prefix(RadixKey(toks)).last_node
    assert (tail.hit_count, tail.parent.hit_count) == (2, 3)


def test_finish_without_cache_hit_frees_recomputed_prefix(
    make_default_impl, admit, paths, check
) -> None:
    cache, alloc = make_default_impl(kv_size=64)
    # Both scheduled on an empty tree: neither had a prefix hit.
    req_a, kv_a = admit(cache, alloc, list(range(1, 9)))
    req_b, kv_b = admit(cache, alloc, [1, 2, 3, 4, 30])
    assert req_b.cache_protected_len == 0
    finish(cache, req_a)
    finish(cache, req_b)
    check(cache)
    # kv_b[:4] recomputed what req_a cached: freed; kv_b[4] is the tree's.
    assert bool(alloc.is_free[kv_b[:4]].all())
    assert not bool(alloc.is_free[kv_b[4:]].any())
    assert alloc.available_size() == 64 - 9
    assert paths(cache)[(None, (1, 2, 3, 4, 30))] == kv_a[:4].tolist() + kv_b[4:].tolist()


def test_finish_request_in_namespace(make_default_impl, admit, paths, check) -> None:
    cache, alloc = make_default_impl(kv_size=64)
    req, kv = admit(cache, alloc, [1, 2, 3], extra_key="lora")
    finish(cache, req)
    check(cache)
    assert paths(cache) == {("lora", (1, 2, 3)): kv.tolist()}
    assert cache.match_prefix(RadixKey([1, 2, 3])).prefix_len == 0
    assert cache.match_prefix(RadixKey([1, 2, 3], "lora")).prefix_len == 3


@pytest.mark.parametrize("page", [4, 16])
def test_paged_finish_frees_unaligned_tail(make_default_impl, admit, paths, check, page) -> None:
    cache, alloc = make_default_impl(page_size=page, kv_size=32 * page, paged_alloc=True)
    size = 32 * page
    n = 2 * page + 2
    toks = list(range(1, n + 1))
    # C is scheduled before A finishes: no hit, all of its slots are fresh (3 pages each).
    req_a, kv_a = admit(cache, alloc, toks)
    req_c, kv_c = admit(cache, alloc, toks)
    finish(cache, req_a)
    check(cache)
    # Only the 2 whole pages are cached; the page holding the 2-token tail went back.
    assert paths(cache) == {(None, tuple(toks[: 2 * page])): kv_a[: 2 * page].tolist()}
    assert bool(alloc.is_free[kv_a[2 * page :]].all())
    assert alloc.available_size() == size - 2 * page - 3 * page
    # C: its 2 pages duplicate A's and its tail is unaligned: all 3 of its pages go back.
    finish(cache, req_c)
    check(cache)
    assert bool(alloc.is_free[kv_c].all())
    assert alloc.available_size() == size - 2 * page
    # B diverges inside the 2nd page: its hit is 1 page; 3 pages get cached under it.
    toks_b = toks[: page + 2] + [-1] * (2 * page - 2) + [-2, -3]
    req_b, kv_b = admit(cache, alloc, toks_b)
    assert req_b.cache_protected_len == page
    assert cache.path_device_indices(req_b.last_node).tolist() == kv_a[:page].tolist()
    assert cache.protected_size() == page
    finish(cache, req_b)
    check(cache)
    assert bool(alloc.is_free[kv_b[-2:]].all())  # unaligned tail
    assert not bool(alloc.is_free[kv_b[:-2]].any())
    assert alloc.available_size() == size - 2 * page - 2 * page
    assert (cache.evictable_size(), cache.protected_size()) == (4 * page, 0)
    assert cache.match_prefix(RadixKey(toks_b)).prefix_len == 3 * page


def test_finished_slots_are_evictable(make_impl_per_evictor, admit, check) -> None:
    cache, alloc = make_impl_per_evictor(kv_size=16)
    req, _ = admit(cache, alloc, list(range(1, 9)))
    finish(cache, req)
    req2, _ = admit(cache, alloc, [1, 2, 3, 9, 9])
    # req2 runs: its prefix [1,2,3] is locked, [4..8] is not.
    res = cache.evict(100)
    check(cache)
    assert res.num_evicted == 5
    assert cache.total_size() == 3
    finish(cache, req2)
    assert cache.evict(100).num_evicted == 5
    assert alloc.available_size() == 16
    check(cache)


@pytest.mark.parametrize("page", [1, 4])
def test_retract_frees_the_uncached_part_and_keeps_checkpoints(
    make_default_impl, admit, extend, check, paths, page
) -> None:
    """A retracted request (``checkpoint=False``) caches nothing more: what its last checkpoint
    published stays in the tree (now unlocked), the rest of its row, ``[cache_protected_len,
    owned_len)``, goes back to the allocator."""
    cache, alloc = make_default_impl(page_size=page, kv_size=64, paged_alloc=True)
    toks = list(range(1, 4 * page + 1))
    req, kv = admit(cache, alloc, toks, prefill=2 * page)
    cache.checkpoint(req, 2 * page)
    kv2 = extend(cache, alloc, req, 4 * page)
    free_before = alloc.available_size()
    finish(cache, req, checkpoint=False)
    check(cache)
    assert paths(cache) == {(None, tuple(toks[: 2 * page])): kv.tolist()}
    assert bool(alloc.is_free[kv2].all())
    assert alloc.available_size() == free_before + 2 * page
    assert (cache.evictable_size(), cache.protected_size()) == (2 * page, 0)


def test_release_leaves_slots_beyond_owned_len_to_the_caller(
    make_default_impl, admit, check
) -> None:
    """``owned_len`` excludes the last sampled token: a slot allocated for it is the caller's
    to free (0.5.23 ``_release_overallocated_kv_indices``), and it is not cached."""
    cache, alloc = make_default_impl(kv_size=32)
    req, kv = admit(cache, alloc, [1, 2, 3, 4, 5])
    finish(cache, req, owned_len=4)
    check(cache)
    assert cache.match_prefix(RadixKey([1, 2, 3, 4, 5])).prefix_len == 4
    assert not bool(alloc.is_free[kv[4:]].any())  # still allocated: the caller's
    alloc.free(kv[4:])
    assert alloc.available_size() + cache.total_size() == 32
