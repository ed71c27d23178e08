"""Tests for HashBlocks carrying a block size, segment prompts and the synthetic-prefix rule."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from radixbench.workloads.segments import BlockIds, PrefixRule, build_request, round_up
from radixbench.workloads.tokens import HashBlocks, block_tokens


def test_hash_blocks_carry_block_size_into_block_tokens() -> None:
    hb = HashBlocks((3, 4), 16)
    assert hb == (3, 4) and hb.block_size == 16
    assert list(block_tokens(hb, 20)) == list(block_tokens((3, 4), 20, block_size=16))
    assert list(block_tokens(hb, 20)) != list(block_tokens((3, 4), 20))  # 512 by default
    with pytest.raises(ValueError, match="contradicts"):
        block_tokens(hb, 20, block_size=512)
    back = pickle.loads(pickle.dumps(hb))
    assert back == hb and back.block_size == 16
    with pytest.raises(ValueError, match="block_size"):
        HashBlocks((1,), 0)


def test_segments_share_token_prefixes() -> None:
    ids = BlockIds(16)
    system = ids.segment(40)  # rounded up to 3 blocks
    assert len(system) == 3 and round_up(40, 16) == 48
    a = build_request(0, [system, ids.segment(10)], 10, 5, 16)
    b = build_request(1, [system, ids.segment(10)], 7, 5, 16)
    assert a.input_length == 58 and b.input_length == 55
    ta, tb = block_tokens(a.hash_ids, a.input_length), block_tokens(b.hash_ids, b.input_length)
    assert ta[:48] == tb[:48] and ta[48] != tb[48]
    with pytest.raises(ValueError, match="cannot hold"):
        build_request(2, [system], 49, 5, 16)


def test_prefix_rule_shares_at_most_prefix_tokens() -> None:
    rule = PrefixRule(prefixes=2, prefix_tokens=32, block_size=16)
    rows = [(i, float(i), n, 3) for i, n in enumerate([100, 20, 100, 100])]
    reqs = rule.apply(rows, np.random.default_rng(0))
    assert [r.input_length for r in reqs] == [100, 20, 100, 100]
    toks = [block_tokens(r.hash_ids, r.input_length) for r in reqs]
    heads = {tuple(t[:32]) for t in toks if len(t) >= 32}
    assert len(heads) <= 2  # every long prompt starts with one of the 2 shared prompts
    tails = [tuple(t[32:48]) for t in toks if len(t) > 32]
    assert len(set(tails)) == len(tails)  # beyond the prefix, prompts are unique


def test_prefix_rule_zero_prefixes_is_unique_and_validation() -> None:
    reqs = PrefixRule(prefixes=0).apply(
        [(0, 0.0, 40, 1), (1, 1.0, 40, 1)], np.random.default_rng(0)
    )
    assert set(reqs[0].hash_ids).isdisjoint(reqs[1].hash_ids)
    for bad in ({"prefixes": -1}, {"prefix_tokens": 0}, {"zipf_s": -1.0}, {"block_size": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            PrefixRule(**bad)
