"""The sequential cache replay (sim/replay.py): real RadixCache per policy, no scheduler."""

from __future__ import annotations

import numpy as np
import pytest

from radixbench.cache.integrity import check_integrity
from radixbench.cache.key import RadixKey
from radixbench.cache.policy import POLICIES
from radixbench.sim.replay import PolicyReplay, block_ceiling, replay
from radixbench.workloads.ceiling import prefix_hits
from radixbench.workloads.tokens import HashBlocks, block_tokens, output_tokens
from radixbench.workloads.trace import TraceRequest


def req(rid: int, hashes: tuple[int, ...], n: int, bs: int = 4, out: int = 1) -> TraceRequest:
    return TraceRequest(rid, float(rid), n, out, HashBlocks(hashes, bs))


# Shared prefixes, partial last blocks and several outputs (block size 4).
WORKLOAD = [
    req(0, (101, 102, 103), 11, out=3),
    req(1, (101, 102, 104), 12, out=2),
    req(2, (101, 105), 8),
    req(3, (101, 102, 103), 10, out=4),
    req(4, (106,), 3),
    req(5, (101, 102, 104, 107), 15, out=2),
    req(6, (101, 105), 6),
]


@pytest.mark.parametrize("page", [1, 2])
@pytest.mark.parametrize("outputs", [True, False])
def test_room_for_everything_gives_the_ceiling(page: int, outputs: bool) -> None:
    res = replay(WORKLOAD, 10_000, page, include_outputs=outputs)
    ceiling = np.asarray(prefix_hits(WORKLOAD)) // page * page
    table = res.requests
    assert table["ceiling"].tolist() == ceiling.tolist()
    for policy in [*POLICIES, "belady"]:
        assert table[policy].tolist() == ceiling.tolist(), policy
    assert (res.summary["evict_calls"].dropna() == 0).all()


def test_summary_rows_and_columns() -> None:
    res = replay(WORKLOAD, 12, policies=["mru", "lru"])
    s = res.summary
    assert s["policy"].tolist() == ["mru", "lru", "belady", "ceiling"]
    lens = np.array([r.input_length for r in WORKLOAD])
    for _, row in s.iterrows():
        assert row["hit_rate"] == pytest.approx(res.requests[row["policy"]].sum() / lens.sum())
    lru = s.set_index("policy")
    assert lru.loc["lru", "vs_lru_pts"] == 0.0
    assert lru.loc["belady", "of_belady"] == pytest.approx(1.0)
    assert lru.loc["mru", "vs_lru_pts"] == pytest.approx(
        100 * (lru.loc["mru", "hit_rate"] - lru.loc["lru", "hit_rate"])
    )
    assert lru.loc["lru", "evict_calls"] > 0  # 12 slots: evictions happened
    assert res.requests.columns.tolist() == [
        "rid", "input_len", "output_len", "mru", "lru", "belady", "ceiling",
    ]  # fmt: skip


def test_every_summary_row_has_its_time_the_ceiling_included() -> None:
    s = replay(WORKLOAD, 12, policies=["lru"]).summary.set_index("policy")
    assert s["wall_s"].notna().all() and (s["wall_s"] >= 0).all(), s["wall_s"]


def run_policy(policy: str, capacity: int, page: int, outputs: bool) -> PolicyReplay:
    run = PolicyReplay(policy, capacity, page, len(WORKLOAD))
    for j, r in enumerate(WORKLOAD):
        ids = block_tokens(r.hash_ids, r.input_length)
        prompt = full = RadixKey(ids)
        if outputs and r.output_length > 1:
            full = RadixKey(ids + output_tokens(r.rid, r.output_length - 1))
        run.step(j, prompt, full)
        cache = run.cache
        check_integrity(cache)
        # no KV slot leaks: the pool holds exactly the tree
        assert cache.total_size() + run.allocator.available_size() == capacity // page * page
        assert cache.protected_size() == 0  # every lock released
    return run


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(("capacity", "page"), [(12, 1), (16, 2), (30, 1)])
def test_pool_and_tree_stay_consistent(policy: str, capacity: int, page: int) -> None:
    run = run_policy(policy, capacity, page, outputs=True)
    assert run.cache.total_size() <= capacity
    # a request fits when prompt + outputs (whole pages) fit: all else can be evicted for it
    sizes = [(r.input_length + r.output_length - 1) // page * page for r in WORKLOAD]
    assert run.not_cached == sum(n > capacity for n in sizes)


def test_outputs_are_inserted_as_the_simulator_does() -> None:
    """Prompt + outputs but the last sampled token, split at the prompt end: LRU evicts the
    output tail first."""
    r = req(0, (101, 102, 103), 11, out=4)
    run = PolicyReplay("lru", 100, 1, 1)
    ids = block_tokens(r.hash_ids, r.input_length)
    run.step(0, RadixKey(ids), RadixKey(ids + output_tokens(0, 3)))
    assert run.cache.total_size() == 11 + 3
    leaves = run.cache.collect_evictable_leaves()
    assert [len(n.key) for n in leaves] == [3]  # the output tail is a leaf of its own
    assert run.cache.evict(1).num_evicted == 3
    assert run.cache.total_size() == 11


def test_request_larger_than_the_pool_is_not_cached() -> None:
    res = replay([req(0, (101, 102, 103), 12), req(1, (101, 102, 103), 12)], 8)
    assert res.summary.set_index("policy").loc["lru", "not_cached"] == 2
    assert res.requests["lru"].tolist() == [0, 0]
    assert res.requests["belady"].tolist() == [0, 8]  # Belady keeps the first 8 tokens


def test_block_ceiling_counts_whole_blocks_only() -> None:
    """r0 covers block 101 fully and 102 partly (6 of 8 tokens); r1 = the same two blocks in
    full. Token level: r1 hits 6 (all r0 has). Block level: only the whole block 101, 4."""
    reqs = [req(0, (101, 102), 6), req(1, (101, 102), 8)]
    assert prefix_hits(reqs) == [0, 6]
    assert block_ceiling(reqs) == {"all": 4 / 14, "last_half": 4 / 8}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown eviction policy 'nope'"):
        replay(WORKLOAD, 100, policies=["nope"])
    with pytest.raises(ValueError, match="distinct"):
        replay(WORKLOAD, 100, policies=["lru", "lru"])
    with pytest.raises(ValueError, match="at least one request"):
        replay([], 100)
