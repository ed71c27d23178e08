"""kv_account: free + tree + pages of live requests == pool, with no page owned twice."""

from __future__ import annotations

from array import array

import pytest
import torch

from radixbench.cache import RadixKey, make_allocator
from radixbench.cache.allocator import ReqToTokenPool
from radixbench.cache.radix_cache import CacheConfig, RadixCache
from radixbench.sim.accounting import KVAccountingError, kv_account
from radixbench.sim.request import Req


def setup():
    """Tree: tokens 1..8 in pages 1, 2. Live request: 8 cached tokens + 2 own in page 3."""
    alloc = make_allocator(64, 4)
    pool = ReqToTokenPool(4, 32)
    cache = RadixCache(pool, alloc, CacheConfig(page_size=4))
    tree = alloc.alloc(8)
    cache.insert(RadixKey(list(range(1, 9))), tree)
    own = alloc.alloc(4)
    r = Req(0, 0.0, array("q", range(1, 11)), 4)
    r.req_pool_idx, r.seq_len = 1, 10
    r.prefix_indices = tree
    r.cache_protected_len = 8
    pool.req_to_token[1, :10] = torch.cat([tree, own[:2]]).to(torch.int32)
    return cache, alloc, pool, r


def test_consistent_pool_adds_up_with_partial_pages_counted_whole() -> None:
    cache, _, _, r = setup()
    acct = kv_account(cache, [r])
    assert (acct.pool, acct.free, acct.tree, acct.requests) == (64, 64 - 12, 8, 4)
    assert acct.live_requests == 1
    with pytest.raises(KVAccountingError, match="does not add up"):
        kv_account(cache, [])  # forgetting the live request leaves its page unaccounted


def test_a_leaked_page_is_reported() -> None:
    cache, alloc, _, r = setup()
    alloc.alloc(4)  # owned by nobody
    with pytest.raises(KVAccountingError, match="does not add up"):
        kv_account(cache, [r])


def test_a_page_held_by_the_tree_and_a_request_is_reported() -> None:
    cache, _, _, r = setup()
    r.cache_protected_len = 4  # claims tree page 2 as its own
    with pytest.raises(KVAccountingError, match="also held"):
        kv_account(cache, [r])


def test_a_request_holding_a_free_page_is_reported() -> None:
    cache, alloc, pool, r = setup()
    alloc.free(pool.req_to_token[1, 8:10].to(torch.int64))
    with pytest.raises(KVAccountingError, match="free page"):
        kv_account(cache, [r])


def test_scattered_slots_are_reported() -> None:
    cache, alloc, pool, r = setup()
    extra = alloc.alloc(4)
    pool.req_to_token[1, 9] = int(extra[0])  # positions 8, 9 in two pages
    with pytest.raises(KVAccountingError, match="holds 2 pages"):
        kv_account(cache, [r])
