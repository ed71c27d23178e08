"""``dynamo-kv``: Dynamo's cost (overlap_score_weight x prefill blocks + decode blocks), its
router-side load (active blocks, prefill tokens until the first token), ties and temperature."""

from __future__ import annotations

import math
from array import array
from types import SimpleNamespace

import pytest

from radixbench.cache.kv_events import BlockStored
from radixbench.cluster.routers import RouterError, make_router, router_options
from radixbench.cluster.routers.base import RouteRequest
from radixbench.cluster.routers.page_hash import engine_block_ids

A = list(range(64))  # 16 blocks of 4


def req(tokens: list[int], rid: int) -> RouteRequest:
    return RouteRequest(rid, array("q", tokens), len(tokens), 8, 0.0)


def stored(tokens: list[int]) -> BlockStored:
    return BlockStored(engine_block_ids(array("q", tokens), 4), None, tokens, 4)


def test_cost_prefers_the_cached_worker_until_its_load_outweighs(View: type) -> None:
    d = make_router("dynamo-kv", 2, None, 0, 4)
    d.on_events(1, [stored(A)])
    assert d.route(req(A, 0), View(2)) == 1  # 16 + 16 blocks vs 0 + 16
    assert d.prefill_tokens == [0, 0] and d.active_blocks == [0, 16]
    assert d.route(req(A, 1), View(2)) == 1  # the same blocks are active there: no new ones
    assert d.active_blocks == [0, 16]
    b = [x + 1000 for x in A]
    assert d.route(req(b, 2), View(2)) == 0  # 16 + 16 on 0 vs 16 + 32 on 1
    assert d.prefill_tokens == [64, 0]
    c = [x + 2000 for x in A]
    assert d.route(req(c, 3), View(2)) == 1  # 0: 32 + 32 blocks; 1: 16 + 32


def test_prefill_load_ends_with_the_first_token(View: type) -> None:
    d = make_router("dynamo-kv", 2, None, 0, 4)
    i = d.route(req(A, 0), View(2))
    r0 = SimpleNamespace(rid=0, first_token_s=math.nan)
    d.on_dispatch(i, r0)
    assert d.prefill_tokens[i] == 64
    assert d.route(req([x + 500 for x in A], 1), View(2)) == 1 - i  # the other is less loaded
    r0.first_token_s = 0.5
    d.route(req([x + 900 for x in A], 2), View(2))
    assert d.prefill_tokens[i] in (0, 64)  # the prefill of request 0 is done
    assert d.active[0][2] == 0
    d.on_finish(i, 0)
    assert 0 not in d.active and d.active_blocks[i] in (0, 16)


def test_ties_tree_size_then_seeded_random(View: type) -> None:
    d = make_router("dynamo-kv", 3, None, 0, 4)
    d.on_events(0, [stored([9] * 8)])  # a tree of 2 blocks on 0, nothing matching
    assert d.route(req(A, 0), View(3)) in (1, 2)  # equal logits: the smaller trees
    picks = {make_router("dynamo-kv", 2, None, s, 4).route(req(A, 0), View(2)) for s in range(8)}
    assert picks == {0, 1}


def test_temperature_spreads(View: type) -> None:
    opts = router_options("dynamo-kv", {"temperature": 1.0})
    picks = set()
    for s in range(20):
        d = make_router("dynamo-kv", 2, opts, s, 4)
        d.on_events(1, [stored(A)])
        picks.add(d.route(req(A, 0), View(2)))
    assert picks == {0, 1}
    with pytest.raises(RouterError, match="temperature must be finite and >= 0"):
        router_options("dynamo-kv", {"temperature": -1.0})
