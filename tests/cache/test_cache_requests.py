"""checkpoint: publishing a running request's KV after each extend (sglang 0.5.23
``RadixCache.checkpoint`` / ``_insert_cache``), lock / unlock / path_device_indices, and
pretty_print.

Every test taking ``make_default_impl`` runs on radixbench's cache (the default evictor and
matcher: these tests check request bookkeeping, which neither changes) and on sglang 0.5.23's own
``RadixCache`` (``SGLangCache``): the expectations are SGLang's behaviour. Request flows on every
evictor and matcher: test_sglang_fidelity.py and test_sglang_served_fidelity.py.
"""

from __future__ import annotations

import io
from array import array

import pytest
import torch

from radixbench.cache import RadixKey, make_allocator

INT64_MAX = (1 << 63) - 1


def row_of(cache, req, n: int) -> list[int]:
    return cache.req_to_token_pool.req_to_token[req.req_pool_idx, :n].tolist()


def test_lock_unlock_and_path_device_indices(make_default_impl, put, check) -> None:
    cache, alloc = make_default_impl()
    _, v = put(cache, alloc, [1, 2, 3, 4])
    put(cache, alloc, [1, 2, 7])
    node = cache.match_prefix(RadixKey([1, 2, 3, 4])).last_node
    handle = cache.lock(node)
    assert (cache.evictable_size(), cache.protected_size()) == (1, 4)
    assert node.lock_ref == 1 and node.parent.lock_ref == 1
    path = cache.path_device_indices(node)
    assert path.tolist() == v.tolist()
    assert cache.path_device_indices(cache.root).numel() == 0
    handle2 = cache.lock(node)
    assert node.lock_ref == 2
    cache.unlock(handle)
    cache.unlock(None)  # no-op
    assert node.lock_ref == 1 and cache.protected_size() == 4
    cache.unlock(handle2)
    assert (cache.evictable_size(), cache.protected_size()) == (5, 0)
    check(cache)


def test_checkpoint_moves_lock_and_rewrites_row(make_default_impl, admit, extend, check) -> None:
    """Chunked prefill of a 12-token prompt in two chunks of 6; between them another request
    caches all 12 tokens with its own slots."""
    cache, alloc = make_default_impl(kv_size=64)
    toks = list(range(1, 13))
    req, fresh = admit(cache, alloc, toks, prefill=6)
    assert req.last_node is cache.root and req.cache_protected_len == 0
    cache.checkpoint(req, 6)
    check(cache)
    leaf = req.last_node
    assert leaf is not cache.root and leaf.lock_ref == 1
    assert list(leaf.key.token_ids) == toks[:6]
    assert (req.cache_protected_len, req.cache_inserted_len) == (6, 6)
    assert (cache.evictable_size(), cache.protected_size()) == (0, 6)
    assert leaf.value.tolist() == fresh.tolist() == row_of(cache, req, 6)
    assert alloc.available_size() == 64 - 6
    # Another request caches tokens 1..12 with its own slots; 1..6 are duplicates.
    other = alloc.alloc(12)
    p = cache.insert(RadixKey(toks), other)
    assert p == 6
    alloc.free(other[:p])
    # Second chunk: the request's slots for 7..12 duplicate the tree's and are freed; the row is
    # rewritten from cache_protected_len (6) with the tree's slots; the lock moves down.
    fresh2 = extend(cache, alloc, req, 12)
    free_before = alloc.available_size()
    cache.checkpoint(req, 12)
    check(cache)
    assert alloc.available_size() == free_before + 6
    assert bool(alloc.is_free[fresh2].all())
    assert row_of(cache, req, 12) == fresh.tolist() + other[6:].tolist()
    assert (req.cache_protected_len, req.cache_inserted_len) == (12, 12)
    assert req.last_node is not leaf and req.last_node.parent is leaf
    assert (leaf.lock_ref, req.last_node.lock_ref) == (1, 1)
    assert (cache.evictable_size(), cache.protected_size()) == (0, 12)
    cache.release(req, 12, checkpoint=False)
    check(cache)
    assert (cache.evictable_size(), cache.protected_size()) == (12, 0)
    assert alloc.available_size() == 64 - 12


def test_checkpoint_keeps_no_view_of_the_row(make_default_impl, admit, check) -> None:
    """The tree holds a copy of the row's slots: rewriting the row later changes nothing cached."""
    cache, alloc = make_default_impl(kv_size=64)
    req, fresh = admit(cache, alloc, [5, 6, 7, 8])
    cache.checkpoint(req, 4)
    pool = cache.req_to_token_pool
    pool.req_to_token[req.req_pool_idx, :4] = 0
    assert cache.match_prefix(RadixKey([5, 6, 7, 8])).device_indices.tolist() == fresh.tolist()
    pool.req_to_token[req.req_pool_idx, :4] = fresh.to(torch.int32)
    cache.release(req, 4, checkpoint=False)
    check(cache)


@pytest.mark.parametrize("page", [1, 4, 16])
def test_checkpoint_splits_the_prompt_off_with_priority_plus_one(
    make_default_impl, admit, extend, check, page: int
) -> None:
    """Prompt of 2 pages, 1 page of output, checkpointed at once: the first insert makes one
    leaf (priority 3, one hit); the prompt re-insert (``inserted_len`` = prompt, priority + 1)
    splits it at the prompt boundary: the new upper node (the prompt) gets priority 4, keeps the
    hit count (it ends within ``inserted_len``: no hit), the lower half (the output) keeps
    priority 3. The lock is on the lower half, the request's last node."""
    cache, alloc = make_default_impl(page_size=page, kv_size=128, paged_alloc=True)
    n_prompt, n = 2 * page, 3 * page
    toks = list(range(1, n + 1))
    req, _ = admit(cache, alloc, toks, n_prompt=n_prompt, priority=3)
    extend(cache, alloc, req, n)  # output tokens' KV (decode steps), not checkpointed yet
    cache.checkpoint(req, n)
    check(cache)
    (upper,) = cache.root.children.values()
    (lower,) = upper.children.values()
    assert list(upper.key.token_ids) == toks[:n_prompt]
    assert list(lower.key.token_ids) == toks[n_prompt:]
    assert (upper.priority, upper.hit_count) == (4, 1)
    assert (lower.priority, lower.hit_count) == (3, 1)
    assert req.last_node is lower and (upper.lock_ref, lower.lock_ref) == (1, 1)
    assert (req.cache_protected_len, req.cache_inserted_len) == (n, n)
    # The upper node is the split's new node (newer clock readings than the lower half's); the
    # checkpoint's re-match then touched both.
    assert upper.creation_time > lower.creation_time
    assert upper.last_access_time == lower.last_access_time == cache.root.last_access_time
    cache.release(req, n, checkpoint=False)
    check(cache)
    assert cache.total_size() == n and alloc.available_size() == 128 - n


@pytest.mark.parametrize("page", [4, 16])
def test_checkpoint_after_prefill_then_decode(
    make_default_impl, admit, extend, check, page
) -> None:
    """Checkpoint after the prefill (prompt: 2 pages + 1 token), then after decode steps: only
    whole pages enter the tree; ``cache_protected_len`` and ``cache_inserted_len`` follow the
    page-aligned key; the prompt boundary is not page-aligned, so the prompt re-insert is cut to
    its whole pages (2), inside what is cached: it only raises their priority, and counts no
    hit (they end within ``inserted_len``)."""
    cache, alloc = make_default_impl(page_size=page, kv_size=256, paged_alloc=True)
    n_prompt = 2 * page + 1
    toks = list(range(1, 4 * page + 1))
    req, fresh = admit(cache, alloc, toks, n_prompt=n_prompt, priority=1)
    cache.checkpoint(req, n_prompt)
    check(cache)
    aligned = 2 * page
    (node,) = cache.root.children.values()
    assert list(node.key.token_ids) == toks[:aligned]
    assert (node.priority, node.hit_count, node.lock_ref) == (1, 1, 1)
    assert (req.cache_protected_len, req.cache_inserted_len) == (aligned, aligned)
    assert req.last_node is node
    assert cache.total_size() == aligned
    assert row_of(cache, req, n_prompt) == fresh.tolist()  # the tail slot stays the request's
    # Decode until 4 pages have KV, then checkpoint: pages 3 and 4 join as one new leaf (one
    # hit); the prompt re-insert (2 pages, inserted_len 2 pages) walks node: priority 2.
    extend(cache, alloc, req, 4 * page)
    cache.checkpoint(req, 4 * page)
    check(cache)
    (leaf,) = node.children.values()
    assert list(leaf.key.token_ids) == toks[aligned:]
    assert (node.priority, node.hit_count) == (2, 1)
    assert (leaf.priority, leaf.hit_count) == (1, 1)
    assert (req.cache_protected_len, req.cache_inserted_len) == (4 * page, 4 * page)
    assert req.last_node is leaf and (node.lock_ref, leaf.lock_ref) == (1, 1)
    assert (cache.evictable_size(), cache.protected_size()) == (0, 4 * page)
    # A second checkpoint at the same length changes no counts: everything is within
    # inserted_len; the priority is already 2.
    cache.checkpoint(req, 4 * page)
    assert (node.hit_count, leaf.hit_count, node.priority) == (1, 1, 2)
    cache.release(req, 4 * page, checkpoint=True)
    check(cache)
    assert (cache.evictable_size(), cache.protected_size()) == (4 * page, 0)
    assert alloc.available_size() == 256 - 4 * page


def test_checkpoint_priority_clamped_to_int64(make_default_impl, admit, extend, check) -> None:
    cache, alloc = make_default_impl(kv_size=64)
    req, _ = admit(cache, alloc, [1, 2, 3, 4], n_prompt=2, priority=INT64_MAX)
    extend(cache, alloc, req, 4)
    cache.checkpoint(req, 4)
    (upper,) = cache.root.children.values()
    assert upper.priority == INT64_MAX
    cache.release(req, 4, checkpoint=False)
    check(cache)


def test_checkpoint_of_a_request_with_a_cached_prefix(
    make_default_impl, admit, extend, check
) -> None:
    """A second request shares the first's prompt: its prefix is the tree's (protected from the
    start); its checkpoint inserts the rest with ``inserted_len`` 0: every node on the walk ends
    beyond it and counts a hit."""
    cache, alloc = make_default_impl(kv_size=64)
    a, kv_a = admit(cache, alloc, [1, 2, 3, 4])
    cache.release(a, 4, checkpoint=True)
    (node,) = cache.root.children.values()
    assert node.hit_count == 1
    b, kv_b = admit(cache, alloc, [1, 2, 3, 4, 5, 6], n_prompt=6)
    assert b.cache_protected_len == 4 and b.last_node is node and node.lock_ref == 1
    assert row_of(cache, b, 6) == kv_a.tolist() + kv_b.tolist()
    cache.checkpoint(b, 6)
    check(cache)
    (leaf,) = node.children.values()
    assert (node.hit_count, leaf.hit_count) == (2, 1)
    assert b.last_node is leaf and (node.lock_ref, leaf.lock_ref) == (1, 1)
    assert (b.cache_protected_len, b.cache_inserted_len) == (6, 6)
    assert row_of(cache, b, 6) == kv_a.tolist() + kv_b.tolist()
    cache.release(b, 6, checkpoint=False)
    check(cache)
    assert alloc.available_size() == 64 - 6


def test_checkpoint_in_namespace(make_default_impl, admit, check) -> None:
    cache, alloc = make_default_impl(kv_size=64)
    req, kv = admit(cache, alloc, [1, 2, 3], extra_key="lora")
    cache.checkpoint(req, 3)
    assert cache.match_prefix(RadixKey([1, 2, 3])).prefix_len == 0
    r = cache.match_prefix(RadixKey([1, 2, 3], "lora"))
    assert r.prefix_len == 3 and r.last_node is req.last_node
    assert r.device_indices.tolist() == kv.tolist()
    cache.release(req, 3, checkpoint=False)
    check(cache)


def test_checkpoint_paged_keeps_unaligned_tail(make_default_impl, admit, check) -> None:
    """Page 4, a 10-token prompt: the tree takes 2 pages; the row keeps all 10 slots (the last
    2 are the request's until released)."""
    cache, alloc = make_default_impl(page_size=4, kv_size=64, paged_alloc=True)
    toks = list(range(1, 11))
    req, kv = admit(cache, alloc, toks)
    assert kv.tolist() == list(range(4, 14))  # pages 1-3, the last one half used
    cache.checkpoint(req, 10)
    check(cache)
    assert (req.cache_protected_len, req.cache_inserted_len) == (8, 8)
    assert row_of(cache, req, 10) == kv.tolist()
    assert cache.total_size() == 8 and cache.protected_size() == 8
    assert alloc.available_size() == 64 - 12
    cache.release(req, 10, checkpoint=False)  # the tail page goes back
    check(cache)
    assert alloc.available_size() == 64 - 8 and cache.evictable_size() == 8


def test_request_paths_need_a_pool() -> None:
    from radixbench.cache import RadixCache, TokenToKVPoolAllocator

    cache = RadixCache(None, TokenToKVPoolAllocator(4))
    with pytest.raises(RuntimeError):
        cache.checkpoint(object(), 1)
    with pytest.raises(RuntimeError):
        cache.release(object(), 1, checkpoint=False)


def test_pretty_print_lists_every_node(make_default_cache, put) -> None:
    cache, alloc = make_default_cache()
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 2, 4])
    out = io.StringIO()
    cache.pretty_print(out)
    text = out.getvalue()
    assert text.count("\n") == cache.num_nodes + 2  # root + nodes + sizes line
    assert "#tokens: 4" in text and "lock_ref=1" in text


def test_paged_allocator_pages() -> None:
    from radixbench.cache import DoubleFreeError, PagedTokenToKVPoolAllocator

    alloc = make_allocator(32, 4, debug=True)  # the double-free check is a debug check
    assert isinstance(alloc, PagedTokenToKVPoolAllocator)
    assert alloc.available_size() == 32
    a = alloc.alloc(8)
    assert a is not None and a.tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    with pytest.raises(ValueError):
        alloc.alloc(3)
    alloc.free(a[:1])  # a slot frees its whole page (SGLang)
    assert alloc.available_size() == 28
    assert bool(alloc.is_free[4:8].all()) and not bool(alloc.is_free[8:12].any())
    with pytest.raises(DoubleFreeError):
        alloc.free(a[2:3])
    assert alloc.alloc(32) is None
    b = alloc.alloc(28)
    assert b is not None and alloc.available_size() == 0
    assert sorted(set((b // 4).tolist())) == [1, 3, 4, 5, 6, 7, 8]


def _int64_rows(cache) -> None:
    """Give the cache's ``ReqToTokenPool`` an int64 table: ``row.to(torch.int64)`` is then the
    row itself, not a copy (sglang's own ``req_to_token`` is int32, but nothing forbids int64)."""
    pool = cache.req_to_token_pool
    pool.req_to_token = pool.req_to_token.to(torch.int64)
    if hasattr(cache, "sgl"):  # SGLang's shim holds the table too
        cache.sgl.req_to_token_pool.req_to_token = pool.req_to_token


def test_checkpoint_frees_a_copy_of_the_row(make_default_impl, put, admit, check) -> None:
    """Regression: checkpoint freed a view of the request's row and then rewrote the row with the
    tree's slots, so with an int64 table the tree's slots went back to the free list and the
    duplicates leaked. sglang 0.5.23's allocators never keep what they are given: ``free``
    concatenates it into the free list (``allocator/token.py:73``) or copies it
    (``_copy_for_free_group``, ``token.py:75``; paged: ``torch.unique``, ``paged.py:333``)."""
    cache, alloc = make_default_impl(kv_size=64)
    _int64_rows(cache)
    put(cache, alloc, [1, 2, 3, 4])
    req, fresh = admit(cache, alloc, [9, 9, 9, 9, 5], prefill=5)  # matches nothing
    req.tokens[:4] = array("q", [1, 2, 3, 4])  # it computes [1, 2, 3, 4, 5]
    cache.checkpoint(req, 5)  # [1, 2, 3, 4] were cached: the row's first 4 slots are duplicates
    free = set(torch.nonzero(alloc.is_free).flatten().tolist())
    assert not set(cache.held_slots().tolist()) & free, "the tree's slots are on the free list"
    assert set(fresh[:4].tolist()) <= free, "the request's duplicate slots leaked"
    check(cache)


def test_release_frees_a_copy_of_the_row(make_default_impl, admit, check) -> None:
    """Regression: release freed a view of the row; the next request given that row overwrote
    the freed slots before the free list was merged (int64 table, as above)."""
    cache, alloc = make_default_impl(kv_size=64)
    _int64_rows(cache)
    req, fresh = admit(cache, alloc, [1, 2, 3, 4, 5], prefill=5)
    cache.release(req, owned_len=5, checkpoint=False)  # retraction: all 5 slots are freed
    cache.req_to_token_pool.req_to_token[req.req_pool_idx].fill_(0)  # the row's next holder
    free = set(torch.nonzero(alloc.is_free).flatten().tolist())
    assert set(fresh.tolist()) <= free and 0 not in free
    check(cache)
