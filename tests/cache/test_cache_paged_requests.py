"""checkpoint / release with pages (page 4): a chunk's unaligned tail is freed exactly once,
with the duplicates counted from the page-aligned ``cache_protected_len`` (sglang 0.5.23
``_insert_cache`` / ``release_kv_cache``).

Every test runs on radixbench's cache (the default evictor and matcher: request bookkeeping
depends on neither) and on sglang 0.5.23's own ``RadixCache`` (``SGLangCache``): the expectations
are SGLang's behaviour.
"""

from __future__ import annotations

import pytest
import torch

from radixbench.cache import RadixKey

PAGE = 4
KV = 64
TOKS = list(range(1, 21))


def other_caches(cache, alloc, n: int) -> None:
    """Another request caches TOKS[:n] with its own whole pages and frees its duplicates."""
    kv = alloc.alloc(n)
    p = cache.insert(RadixKey(TOKS[:n]), kv)
    alloc.free(kv[:p])


def balance(cache, alloc) -> int:
    return alloc.available_size() + cache.total_size()


def row(cache, req, n: int) -> list[int]:
    return cache.req_to_token_pool.req_to_token[req.req_pool_idx, :n].tolist()


def test_duplicate_tail_page_is_freed_once_and_row_rewritten_from_the_page(
    make_default_impl, admit, extend, check
) -> None:
    cache, alloc = make_default_impl(page_size=PAGE, kv_size=KV, paged_alloc=True)
    req, kv = admit(cache, alloc, TOKS, n_prompt=20, prefill=10)
    assert req.last_node is cache.root
    assert kv.tolist() == list(range(4, 14))  # pages 1-3
    cache.checkpoint(req, 10)
    assert (req.cache_protected_len, req.cache_inserted_len) == (8, 8)
    assert row(cache, req, 10) == list(range(4, 14))  # tree's 8 + own tail 12, 13
    other_caches(cache, alloc, 16)  # pages 4-7; 4, 5 duplicate -> freed; tree gets 6, 7
    # Next chunk: positions 10, 11 finish page 3 (14, 15), then pages 8, 9.
    assert extend(cache, alloc, req, 18).tolist() == [14, 15, 32, 33, 34, 35, 36, 37]
    cache.checkpoint(req, 18)
    check(cache)
    assert (req.cache_protected_len, req.cache_inserted_len) == (16, 16)
    tree = list(range(4, 12)) + list(range(24, 32))
    # [8, 16) duplicated the other request's pages: page 3 (own tail included) and 8 are free;
    # the whole row up to the match is the tree's, from the page boundary 8 on, not from 10.
    assert row(cache, req, 16) == tree
    assert bool(alloc.is_free[12:16].all()) and bool(alloc.is_free[32:36].all())
    assert row(cache, req, 18) == [*tree, 36, 37]
    assert cache.path_device_indices(req.last_node).tolist() == tree
    assert alloc.available_size() == KV - 5 * PAGE  # tree pages 1, 2, 6, 7 + own page 9
    cache.release(req, 18, checkpoint=True)  # tail page 9 freed; nothing left but the tree
    check(cache)
    assert cache.total_size() == 16 and cache.protected_size() == 0
    assert balance(cache, alloc) == KV


@pytest.mark.parametrize("paged", [True, False], ids=["paged-allocator", "token-allocator"])
def test_finish_after_a_chunk_frees_the_duplicated_tail_exactly_once(
    make_default_impl, admit, extend, check, paged: bool
) -> None:
    """Prefix = tree (8) + own tail (2); the final chunk ends at 14; meanwhile another request
    caches 16 tokens. At finish [8, 12) duplicates the tree, [12, 14) is the unaligned rest: all
    of it goes back. With a token allocator, freeing duplicates from the row's KV length 10
    instead of the page-aligned ``cache_protected_len`` 8 would leak the slots of positions 8,
    9."""
    cache, alloc = make_default_impl(page_size=PAGE, kv_size=KV, paged_alloc=paged)
    req, _ = admit(cache, alloc, TOKS[:14], prefill=10)
    cache.checkpoint(req, 10)
    extend(cache, alloc, req, 14)
    other_caches(cache, alloc, 16)
    slots = torch.tensor(row(cache, req, 14))
    cache.release(req, 14, checkpoint=True)
    check(cache)
    assert (req.cache_protected_len, req.cache_inserted_len) == (12, 12)
    assert cache.total_size() == 16 and cache.protected_size() == 0
    assert balance(cache, alloc) == KV
    tree = cache.match_prefix(RadixKey(TOKS[:16])).device_indices
    own = slots[~torch.isin(slots, tree)]
    assert own.numel() >= 6
    assert bool(alloc.is_free[own].all())  # every slot the tree did not keep is free


def test_retract_after_a_chunk_frees_from_the_protected_length(
    make_default_impl, admit, extend, check
) -> None:
    """A retraction frees ``[cache_protected_len, owned_len)``: the own tail of the
    checkpointed chunk and the next chunk, once each; the checkpointed pages stay cached."""
    cache, alloc = make_default_impl(page_size=PAGE, kv_size=KV, paged_alloc=True)
    req, kv = admit(cache, alloc, TOKS, prefill=10)
    cache.checkpoint(req, 10)
    extend(cache, alloc, req, 15)
    cache.release(req, 15, checkpoint=False)
    check(cache)
    assert cache.total_size() == 8 and cache.protected_size() == 0
    assert cache.match_prefix(RadixKey(TOKS)).device_indices.tolist() == kv[:8].tolist()
    assert balance(cache, alloc) == KV
