"""cache_unfinished_req / cache_finished_req with pages: a chunk's unaligned tail is freed once,
with the duplicates from the page-aligned protected length (SGLang ``cache_protected_len``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from radixbench.cache import RadixKey, TreeNode, check_integrity, make_allocator
from radixbench.cache.allocator import ReqToTokenPool
from radixbench.cache.radix_cache import CacheConfig, RadixCache

T = torch.tensor
TOKS = list(range(1, 21))


@dataclass
class Chunked:
    req_pool_idx: int
    prefix_indices: torch.Tensor
    last_node: TreeNode
    extra_key: str | None
    seq_len: int = 0

    def committed_token_ids(self) -> RadixKey:
        return RadixKey(TOKS[: self.seq_len], self.extra_key)


def setup(paged: bool = True):
    alloc = make_allocator(64, 4) if paged else make_allocator(64, 1)
    pool = ReqToTokenPool(4, 32)
    cache = RadixCache(pool, alloc, CacheConfig(page_size=4))
    row = pool.alloc()
    assert row is not None
    req = Chunked(row, torch.empty(0, dtype=torch.int64), cache.root, None)
    cache.inc_lock_ref(cache.root)  # as admission with an empty match does
    return cache, alloc, pool, req


def write_chunk(cache, alloc, pool, req: Chunked, upto: int) -> torch.Tensor:
    """KV for positions [len(prefix_indices), upto), allocated as the simulator does."""
    pre = req.prefix_indices.numel()
    if hasattr(alloc, "alloc_extend"):
        last = req.prefix_indices[-1:] if pre else T([-1])
        kv = alloc.alloc_extend(T([pre]), T([upto]), last, upto - pre)
    else:
        kv = alloc.alloc(upto - pre)
    pool.write(req.req_pool_idx, pre, kv)
    req.seq_len = upto
    return kv


def other_caches(cache, alloc, n: int) -> None:
    """Another request caches TOKS[:n] with its own whole pages and frees its duplicates."""
    kv = alloc.alloc(n)
    p = cache.insert(RadixKey(TOKS[:n]), kv)
    alloc.free(kv[:p])


def balance(cache, alloc) -> int:
    return alloc.available_size() + cache.total_size()


def test_duplicate_tail_page_is_freed_once_and_row_rewritten_from_the_page() -> None:
    cache, alloc, pool, req = setup()
    assert write_chunk(cache, alloc, pool, req, 10).tolist() == list(range(4, 14))  # pages 1-3
    assert cache.cache_unfinished_req(req, RadixKey(TOKS[:10])) == 8
    assert req.prefix_indices.tolist() == list(range(4, 14))  # tree's 8 + own tail 12, 13
    other_caches(cache, alloc, 16)  # pages 4-7; 4, 5 duplicate -> freed; tree gets 6, 7
    # Next chunk: positions 10, 11 finish page 3 (14, 15), then pages 8, 9.
    assert write_chunk(cache, alloc, pool, req, 18).tolist() == [14, 15, 32, 33, 34, 35, 36, 37]
    assert cache.cache_unfinished_req(req, RadixKey(TOKS[:18])) == 16
    check_integrity(cache)
    tree = list(range(4, 12)) + list(range(24, 32))
    # [8, 16) duplicated the other request's pages: page 3 (own tail included) and 8 are free;
    # the whole row up to the match is the tree's, from the page boundary 8 on, not from 10.
    assert pool.req_to_token[req.req_pool_idx, :16].tolist() == tree
    assert bool(alloc.is_free[12:16].all()) and bool(alloc.is_free[32:36].all())
    assert req.prefix_indices.tolist() == [*tree, 36, 37]
    assert alloc.available_size() == 64 - 5 * 4  # tree pages 1, 2, 6, 7 + own page 9
    cache.cache_finished_req(req)  # tail page 9 freed; nothing left but the tree
    cache.dec_lock_ref(cache.root)
    check_integrity(cache)
    assert cache.total_size() == 16 and balance(cache, alloc) == 64


@pytest.mark.parametrize("paged", [True, False], ids=["paged-allocator", "token-allocator"])
def test_finish_after_a_chunk_frees_the_duplicated_tail_exactly_once(paged: bool) -> None:
    """Prefix = tree (8) + own tail (2); the final chunk ends at 14; meanwhile another request
    caches 16 tokens. At finish [8, 12) duplicates the tree, [12, 14) is the unaligned rest: all
    of it goes back. With a token allocator, freeing duplicates from len(prefix_indices) = 10
    (SGLang before cache_protected_len) would leak the tail slots of positions 8, 9."""
    cache, alloc, pool, req = setup(paged)
    write_chunk(cache, alloc, pool, req, 10)
    cache.cache_unfinished_req(req, RadixKey(TOKS[:10]))
    write_chunk(cache, alloc, pool, req, 14)
    other_caches(cache, alloc, 16)
    assert cache.cache_finished_req(req) == 12
    cache.dec_lock_ref(cache.root)
    check_integrity(cache)
    assert cache.total_size() == 16 and cache.protected_size() == 0
    assert balance(cache, alloc) == 64
    slots = pool.req_to_token[req.req_pool_idx, :14].to(torch.int64)
    tree = torch.cat([cache.match_prefix(RadixKey(TOKS[:16])).device_indices])
    own = slots[~torch.isin(slots, tree)]
    assert bool(alloc.is_free[own].all())  # every slot the tree did not keep is free
