"""Belady's bound (sim/belady.py): hand-computed examples, the infinite-capacity limit, and the
bound itself — no eviction policy of the real cache beats it on random small workloads."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radixbench.cache.policy import POLICIES
from radixbench.sim.belady import belady_bound, belady_hits
from radixbench.sim.replay import replay
from radixbench.workloads.ceiling import prefix_hits
from radixbench.workloads.tokens import HashBlocks, block_tokens, output_tokens
from radixbench.workloads.trace import TraceRequest

HASHES = range(12, 16)  # checked collision-free below (range(6) is not)
BLOCK_SIZES = (1, 2, 3, 4)
MAX_REQUESTS = 20
MAX_OUT = 3


def req(rid: int, hashes: tuple[int, ...], n: int, bs: int = 1, out: int = 1) -> TraceRequest:
    return TraceRequest(rid, float(rid), n, out, HashBlocks(hashes, bs))


def test_tokens_of_the_random_workloads_never_collide() -> None:
    """Precondition of the bound test: distinct blocks give distinct tokens at every position
    and no output token equals a prompt token, so the real cache matches exactly the hash-chain
    prefixes Belady reasons on (an accidental collision would let a policy hit one extra
    token)."""
    for bs in BLOCK_SIZES:
        prompt = [block_tokens(HashBlocks((h,), bs), bs) for h in HASHES]
        for j in range(bs):
            column = [t[j] for t in prompt]
            assert len(set(column)) == len(column), (bs, j)
        outs = {t for rid in range(MAX_REQUESTS) for t in output_tokens(rid, MAX_OUT)}
        assert not outs & {t for block in prompt for t in block}


def test_hand_example_keeps_the_reused_prefix() -> None:
    """Capacity 4 tokens, one token per block. r0 = ABC, r1 = DEF, r2 = ABX (each hits at most
    its first 2 tokens). After r1 Belady keeps A and B (next hit: r2), drops C, D, E, F (never
    hit again): r2 hits AB = 2 tokens. LRU must make room for DEF by evicting the whole leaf
    ABC (one node of 3 tokens): r2 hits nothing."""
    reqs = [req(0, (1, 2, 3), 3), req(1, (4, 5, 0), 3), req(2, (1, 2, 0), 3)]
    assert belady_hits(reqs, 4).tolist() == [0, 0, 2]
    res = replay(reqs, 4, policies=["lru"], include_outputs=False)
    assert res.requests["lru"].tolist() == [0, 0, 0]
    assert res.requests["belady"].tolist() == [0, 0, 2]


def test_hand_example_evicts_the_furthest_next_use() -> None:
    """r0 = AB, r1 = CD, r2 = CE, r3 = AF (each may hit its first token). With room for 2
    tokens A (next hit r3) and C (next hit r2) both stay: r2 and r3 hit 1 token each. With
    room for 1, after r1 Belady keeps C (next use r2) over A (r3): only r2 hits."""
    reqs = [req(0, (1, 2), 2), req(1, (3, 4), 2), req(2, (3, 5), 2), req(3, (1, 0), 2)]
    assert belady_hits(reqs, 2).tolist() == [0, 0, 1, 1]
    assert belady_hits(reqs, 1).tolist() == [0, 0, 1, 0]


def test_hand_example_pages_and_partial_blocks() -> None:
    """Block size 4, page size 2. r0 = one block, 4 tokens: inserts pages 0-1. r1 = the same
    block: may hit min(4, 4 - 1) = 3 tokens, in whole pages 2. r2 = the block plus 1 token of a
    second block (5 tokens): hits 4 (two pages; 5 - 1 = 4). r3 = r2's two blocks, 8 tokens:
    r2 inserted pages 0-1 only (its 5th token is a partial page), so r3 hits 4."""
    reqs = [req(0, (1,), 4, 4), req(1, (1,), 4, 4), req(2, (1, 2), 5, 4), req(3, (1, 2), 8, 4)]
    assert belady_hits(reqs, 100, page_size=2).tolist() == [0, 2, 4, 4]
    assert belady_hits(reqs, 100, page_size=1).tolist() == [0, 3, 4, 5]
    # room for one page: r0's first page stays, then every request hits just it
    assert belady_hits(reqs, 2, page_size=2).tolist() == [0, 2, 2, 2]


def test_bound_dict_and_errors() -> None:
    reqs = [req(0, (1, 2), 2), req(1, (1, 2), 2)]
    out = belady_bound(reqs, 10)
    assert out == {"all": 0.25, "last_half": 0.5, "kv_capacity_tokens": 10, "page_size": 1}
    with pytest.raises(ValueError, match="capacity"):
        belady_hits(reqs, 0)
    with pytest.raises(ValueError, match="page_size"):
        belady_hits(reqs, 10, page_size=0)
    assert belady_hits([], 10).tolist() == []


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[TraceRequest], int, int]:
    """Requests that share prefixes: each one extends a prefix of an earlier chain (or starts
    afresh) with random blocks; lengths end anywhere in the last block; plus a capacity and a
    page size."""
    bs = draw(st.sampled_from(BLOCK_SIZES))
    n = draw(st.integers(4, MAX_REQUESTS))
    chains: list[tuple[int, ...]] = []
    reqs = []
    for rid in range(n):
        base: tuple[int, ...] = ()
        if chains and draw(st.integers(0, 3)):
            prev = draw(st.sampled_from(chains))
            base = prev[: draw(st.integers(0, len(prev)))]
        tail = draw(st.lists(st.sampled_from(HASHES), min_size=0 if base else 1, max_size=3))
        chain = (base + tuple(tail))[:5] or (HASHES[0],)
        chains.append(chain)
        length = draw(st.integers((len(chain) - 1) * bs + 1, len(chain) * bs))
        out = draw(st.integers(1, MAX_OUT))
        reqs.append(TraceRequest(rid, float(rid), length, out, HashBlocks(chain, bs)))
    page = draw(st.sampled_from((1, 2, 4)))
    capacity = draw(st.integers(page, 10))
    return reqs, capacity, page


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.booleans())
def test_no_policy_beats_belady(case: tuple[list[TraceRequest], int, int], outputs: bool) -> None:
    reqs, capacity, page = case
    res = replay(reqs, capacity, page, include_outputs=outputs)
    table = res.requests
    best = int(table["belady"].sum())
    for policy in POLICIES:
        assert int(table[policy].sum()) <= best, (policy, table.to_dict("list"))
    assert best <= int(table["ceiling"].sum())
    assert (table["belady"] % page == 0).all()


@settings(max_examples=60, deadline=None)
@given(workloads())
def test_infinite_capacity_is_the_ceiling_and_capacity_only_helps(
    case: tuple[list[TraceRequest], int, int],
) -> None:
    reqs, capacity, page = case
    ceiling = np.asarray(prefix_hits(reqs)) // page * page
    assert belady_hits(reqs, 10**9, page).tolist() == ceiling.tolist()
    totals = [int(belady_hits(reqs, c, page).sum()) for c in (capacity, capacity + 3, 10**9)]
    assert totals == sorted(totals)


def test_bundled_trace_limits() -> None:
    """On the first 300 Mooncake requests: Belady equals the ceiling with room for everything,
    and shrinks with the pool."""
    from radixbench.workloads import load_mooncake

    reqs = load_mooncake(max_requests=300)
    ceiling = prefix_hits(reqs)
    assert belady_hits(reqs, 10**10).tolist() == list(ceiling)
    rates = [belady_bound(reqs, c)["all"] for c in (50_000, 200_000, 10**10)]
    assert rates[0] < rates[1] <= rates[2]
    assert list(itertools.accumulate(rates, max)) == rates
