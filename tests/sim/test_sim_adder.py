from __future__ import annotations

from array import array

import pytest
import torch

from radixbench.cache import RadixCache, RadixKey, TokenToKVPoolAllocator
from radixbench.sim.adder import CONTINUE, NO_TOKEN, OTHER, PrefillAdder
from radixbench.sim.config import SimConfig
from radixbench.sim.cost import LinearCostModel
from radixbench.sim.request import Req


def _cache_with_prefix(capacity: int, prefix: list[int]) -> RadixCache:
    alloc = TokenToKVPoolAllocator(capacity, torch.device("cpu"))
    cache = RadixCache(None, alloc)
    cache.insert(RadixKey(array("q", prefix)), alloc.alloc(len(prefix)))
    return cache


def _cfg(**kw) -> SimConfig:
    return SimConfig(kv_capacity_tokens=1000, cost=LinearCostModel(), **kw)


def test_own_prefix_is_locked_before_free_space_is_counted() -> None:
    prefix = list(range(600))
    cache = _cache_with_prefix(1000, prefix)  # 400 free + 600 evictable (the prefix)
    req = Req(0, 0.0, array("q", prefix + [7] * 450), 10)
    # Counting its own prefix as evictable, 461 tokens would fit in 1,000; locked, only 400.
    adder = PrefillAdder(_cfg(), cache, [], ratio=0.7)
    assert adder.add_one_req(req) == NO_TOKEN
    assert cache.evictable_size() == 600 and cache.protected_size() == 0  # lock released
    small = Req(1, 0.0, array("q", prefix + [7] * 300), 10)
    assert adder.add_one_req(small) == CONTINUE
    assert cache.protected_size() == 600 and small.prefix_hit_tokens == 600


def test_running_requests_reserve_their_decode_by_new_token_ratio() -> None:
    cache = _cache_with_prefix(1000, [1])
    running = [Req(9, 0.0, array("q", [5] * 10), 501)]  # 500 tokens left to decode
    req = Req(0, 0.0, array("q", [3] * 700), 1)  # needs 701: fits beside 50, not beside 501
    assert PrefillAdder(_cfg(), cache, running, ratio=1.0).add_one_req(req) == NO_TOKEN
    assert PrefillAdder(_cfg(), cache, running, ratio=0.1).add_one_req(req) == CONTINUE


def test_chunked_prefill_truncates_and_stops_the_round() -> None:
    cache = _cache_with_prefix(100_000, [1])
    adder = PrefillAdder(_cfg(chunked_prefill_size=256), cache, [], ratio=0.7)
    long = Req(0, 0.0, array("q", [4] * 1000), 5)
    assert adder.add_one_req(long) == OTHER
    assert adder.new_chunked is long and len(long.fill_ids) == 256
    assert not adder.has_budget()
    long.prefix_indices = torch.arange(256)  # as cache_unfinished_req leaves it
    nxt = PrefillAdder(_cfg(chunked_prefill_size=256), cache, [], ratio=0.7)
    assert nxt.add_chunked_req(long) is long and len(long.fill_ids) == 512


def _paged_cache(page: int) -> RadixCache:
    from radixbench.cache import make_allocator
    from radixbench.cache.radix_cache import CacheConfig

    return RadixCache(None, make_allocator(1024, page), CacheConfig(page_size=page))


@pytest.mark.parametrize(("page", "second"), [(1, CONTINUE), (16, OTHER)])
def test_prefill_budget_counts_new_tokens_in_whole_pages(page: int, second: str) -> None:
    """SGLang ceil_paged_tokens: a 17-token extend takes 32 of a 64-token prefill budget at
    page 16 (17 at page 1), so a 20-token request (32 in pages) no longer fits beside it."""
    cfg = SimConfig(
        kv_capacity_tokens=1024, max_prefill_tokens=64, page_size=page, cost=LinearCostModel()
    )
    adder = PrefillAdder(cfg, _paged_cache(page), [], ratio=0.7)
    first = Req(0, 0.0, array("q", range(100, 117)), 4)
    assert adder.add_one_req(first) == CONTINUE
    assert adder.rem_input == 64 - (32 if page == 16 else 17)
    assert adder.offset == pytest.approx((32 if page == 16 else 17) + 4)
    assert adder.add_one_req(Req(1, 0.0, array("q", range(200, 220)), 4)) == second
