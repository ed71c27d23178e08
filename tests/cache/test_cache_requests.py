"""cache_unfinished_req (chunked prefill) and pretty_print (SGLang semantics @ a7ec6b97)."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
import torch

from radixbench.cache import RadixKey, TreeNode, check_integrity, make_allocator
from radixbench.cache.allocator import ReqToTokenPool
from radixbench.cache.radix_cache import CacheConfig, RadixCache


@dataclass
class ChunkReq:
    req_pool_idx: int
    prefix_indices: torch.Tensor
    last_node: TreeNode
    extra_key: str | None
    tokens: list[int]

    def committed_token_ids(self) -> RadixKey:
        return RadixKey(self.tokens, self.extra_key)


def new_cache(page: int, evictor: str = "heapify", matcher: str = "linear"):
    alloc = make_allocator(256, page)
    pool = ReqToTokenPool(4, 64)
    cfg = CacheConfig(page_size=page, evictor=evictor, matcher=matcher)
    return RadixCache(pool, alloc, cfg), alloc, pool


def prefill_chunk(cache, alloc, pool, req: ChunkReq, upto: int) -> None:
    """Write fresh KV for tokens [len(prefix_indices), upto) of the request (one chunk)."""
    start = req.prefix_indices.numel()
    fresh = alloc.alloc(upto - start)
    assert fresh is not None
    pool.write(req.req_pool_idx, start, fresh)


def test_unfinished_req_moves_lock_and_rewrites_row(make_cache) -> None:
    cache, alloc = make_cache(kv_size=64)
    pool = cache.req_to_token_pool
    toks = list(range(1, 13))
    row = pool.alloc()
    req = ChunkReq(row, torch.empty(0, dtype=torch.int64), cache.root, None, toks)
    cache.inc_lock_ref(cache.root)  # root stays locked once more; harmless, as SGLang
    fresh = alloc.alloc(6)
    pool.write(row, 0, fresh)
    n = cache.cache_unfinished_req(req, RadixKey(toks[:6]))
    check_integrity(cache)
    assert n == 6
    assert req.last_node is not cache.root and req.last_node.lock_ref == 1
    assert req.prefix_indices.tolist() == fresh.tolist()
    assert cache.protected_size() == 6 and cache.evictable_size() == 0
    # Another request caches tokens 7..12 meanwhile with its own slots.
    other = alloc.alloc(12)
    p = cache.insert(RadixKey(toks), other)
    alloc.free(other[:p])
    # Second chunk: the request's own slots for 7..12 are duplicates and get freed; the row is
    # rewritten with the tree's slots; the lock moves down.
    fresh2 = alloc.alloc(6)
    pool.write(row, 6, fresh2)
    free_before = alloc.available_size()
    n = cache.cache_unfinished_req(req, RadixKey(toks))
    check_integrity(cache)
    assert n == 12
    assert alloc.available_size() == free_before + 6
    assert bool(alloc.is_free[fresh2].all())
    assert pool.req_to_token[row, :12].tolist() == fresh.tolist() + other[6:].tolist()
    assert req.prefix_indices.tolist() == fresh.tolist() + other[6:].tolist()
    assert cache.protected_size() == 12
    cache.dec_lock_ref(req.last_node)
    cache.dec_lock_ref(cache.root)
    check_integrity(cache)
    assert cache.evictable_size() == 12


def test_unfinished_req_paged_keeps_unaligned_tail() -> None:
    cache, alloc, pool = new_cache(page=4)
    toks = list(range(1, 11))  # 10 tokens: 2 whole pages + 2
    row = pool.alloc()
    assert row is not None
    req = ChunkReq(row, torch.empty(0, dtype=torch.int64), cache.root, None, toks)
    kv = alloc.alloc(12)
    pool.write(row, 0, kv[:10])
    n = cache.cache_unfinished_req(req, RadixKey(toks))
    check_integrity(cache)
    assert n == 8
    assert req.prefix_indices.tolist() == kv[:10].tolist()  # tree part + own tail
    assert cache.total_size() == 8 and cache.protected_size() == 8


def test_pretty_print_lists_every_node(make_cache, put) -> None:
    cache, alloc = make_cache()
    put(cache, alloc, [1, 2, 3])
    put(cache, alloc, [1, 2, 4])
    out = io.StringIO()
    cache.pretty_print(out)
    text = out.getvalue()
    assert text.count("\n") == cache.num_nodes + 2  # root + nodes + sizes line
    assert "#tokens: 4" in text and "lock_ref=1" in text


def test_paged_allocator_pages() -> None:
    from radixbench.cache import DoubleFreeError, PagedTokenToKVPoolAllocator

    alloc = make_allocator(32, 4)
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
