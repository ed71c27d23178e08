"""Tests for the infinite-cache prefix-hit ceiling."""

from __future__ import annotations

import pytest

from radixbench.workloads import load_mooncake
from radixbench.workloads.ceiling import hit_ceiling, hit_rates, prefix_hits
from radixbench.workloads.tokens import HashBlocks, block_tokens
from radixbench.workloads.trace import TraceRequest


def brute_force(reqs: list[TraceRequest]) -> list[int]:
    """Token-level reference: longest common prefix with any earlier prompt, <= input - 1."""
    toks = [list(block_tokens(r.hash_ids, r.input_length)) for r in reqs]
    out = []
    for i, t in enumerate(toks):
        best = 0
        for u in toks[:i]:
            k = 0
            while k < min(len(t), len(u)) and t[k] == u[k]:
                k += 1
            best = max(best, k)
        out.append(min(best, len(t) - 1))
    return out


def test_matches_token_level_brute_force_with_partial_blocks() -> None:
    bs = 4
    specs = [
        ((0, 1, 2), 10),
        ((0, 1, 2), 12),
        ((0, 1), 6),
        ((0, 1, 3), 9),
        ((5,), 2),
        ((0, 1, 2), 9),
    ]
    reqs = [TraceRequest(i, 0.0, n, 1, HashBlocks(h, bs)) for i, (h, n) in enumerate(specs)]
    got = prefix_hits(reqs)
    assert got == brute_force(reqs)
    assert got[1] == 10  # only 10 tokens of the third block were seen before
    assert got[5] == 8  # identical prompt: at most input - 1


def test_mooncake_subset_matches_brute_force() -> None:
    reqs = load_mooncake(max_requests=40)
    assert prefix_hits(reqs) == brute_force(reqs)


def test_bundled_mooncake_reference_figures() -> None:
    c = hit_ceiling(load_mooncake())
    assert c["all"] == pytest.approx(0.374, abs=5e-4)
    assert c["last_half"] == pytest.approx(0.398, abs=5e-4)


def test_empty_gives_nan() -> None:
    c = hit_ceiling([])
    assert c["all"] != c["all"]


def test_hit_rates_over_all_and_the_warm_second_half() -> None:
    """One rate for every ceiling (``hit_ceiling``, the replay's block ceiling): hit tokens
    over input tokens, over all requests and from request ``len // 2`` on."""
    assert hit_rates([1, 2, 3, 4], [2, 2, 4, 4]) == {"all": 10 / 12, "last_half": 7 / 8}
    assert hit_rates([0, 5], [4, 10]) == {"all": 5 / 14, "last_half": 0.5}
    empty = hit_rates([], [])
    assert empty["all"] != empty["all"] and empty["last_half"] != empty["last_half"]  # NaN
