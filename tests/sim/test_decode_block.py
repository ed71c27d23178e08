"""Decode blocks (``sim.decode_block``): each part does what ``m`` single decode steps do — the
slots (same slots, same order, free list left the same), the batch arrays' advance and inputs,
the batch builds and ``req_to_token`` writes — and a scheduler run in blocks gives the
step-by-step tables at every page size (tests/sim/test_coalesce.py runs every bundled
scenario)."""

from __future__ import annotations

import dataclasses
from array import array
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import torch

import radixbench.sim.scheduler as scheduler_mod
from radixbench.cache import make_allocator
from radixbench.cache.allocator import ReqToTokenPool
from radixbench.cache.radix_cache import CacheConfig, RadixCache
from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.experiments.workload import load_requests
from radixbench.sim import decode_block
from radixbench.sim.batch import BatchBuilder
from radixbench.sim.instrument import OpRecorder, instrument
from radixbench.sim.kv_alloc import SlotAllocator
from radixbench.sim.request import Req
from radixbench.sim.run import VariantSim
from radixbench.sim.running import RunningArrays
from radixbench.workloads.tokens import output_tokens

CPU = torch.device("cpu")


def _slots(page: int, size: int = 4096) -> tuple[SlotAllocator, ReqToTokenPool]:
    alloc = make_allocator(size, page)
    pool = ReqToTokenPool(8, 512)
    cache = RadixCache(pool, alloc, CacheConfig(page_size=page))
    rec = OpRecorder()
    instrument(cache, rec)
    return SlotAllocator(cache, rec), pool


def _fill(slots: SlotAllocator, pool: ReqToTokenPool, rows: np.ndarray, seq: np.ndarray) -> None:
    """Give each request ``seq`` tokens of KV (whole pages, as an extend would)."""
    ps = slots.page_size
    for r, n in zip(rows.tolist(), seq.tolist()):
        pages = -(-n // ps)
        pool.req_to_token[r, : pages * ps] = slots.allocator.alloc(pages * ps).to(torch.int32)


@pytest.mark.parametrize("page", [1, 4, 16])
def test_a_block_takes_the_slots_of_m_single_steps(page: int) -> None:
    rng = np.random.default_rng(page)
    rows = np.array([3, 1, 6, 2, 5], dtype=np.int64)
    seq = rng.integers(1, 3 * page + 2, size=rows.size).astype(np.int64)
    seq[0] = page  # the next token opens a page at once
    m = 2 * page + 3
    out = []
    for single in (True, False):
        slots, pool = _slots(page)
        _fill(slots, pool, rows, seq)
        # half the slots the steps take from the free list's head, the rest after a merge of
        # the release list (allocation midway through the block)
        need = int(np.count_nonzero((seq + np.arange(m)[:, None]) % page == 0)) * page
        half = need // 2 // page * page
        hold = slots.allocator.alloc(slots.allocator.available_size() - half)
        slots.allocator.free(hold[: need - half + 2 * page].clone())
        if single:
            steps = []
            for i in range(m):
                loc = slots.decode([None] * rows.size, seq + i, rows).numpy().copy()  # type: ignore[list-item]
                pool.req_to_token.numpy()[rows, seq + i] = loc
                steps.append(loc)
            got = np.stack(steps)
        else:
            got = slots.decode_block(seq, rows, m)
        out.append((got, slots.allocator.free_list().tolist()))
    (a, free_a), (b, free_b) = out
    np.testing.assert_array_equal(a, b)
    assert free_a == free_b


def test_a_block_refuses_a_pool_off_the_cpu() -> None:
    slots, _ = _slots(4)
    slots.cpu = False
    with pytest.raises(ValueError, match="not on the CPU"):
        slots.decode_block(np.array([4]), np.array([1]), 2)


def _prefilled(rid: int, row: int, n_in: int, n_out: int) -> Req:
    r = Req(rid, 0.0, array("q", range(n_in)), n_out)
    r.output_plan = output_tokens(rid, n_out)
    r.output_ids = r.output_plan[:1]
    r.token_s = array("d", [0.5])
    r.req_pool_idx, r.seq_len = row, n_in
    return r


def test_block_inputs_are_each_steps_decode_inputs_and_finishing_is_refused() -> None:
    reqs = [_prefilled(0, 1, 10, 9), _prefilled(1, 2, 5, 12)]
    one, many = RunningArrays(), RunningArrays()
    one.add(reqs)
    many.add(reqs)
    single = []
    for t in (2.0, 3.0, 4.0):  # each step of a block begins once the step before it ended
        one.advance(t)
        single.append(one.decode_inputs())
    many.advance_many([2.0, 3.0, 4.0])
    assert many.block_inputs(3).tolist() == np.stack(single, axis=1).tolist()
    assert many.times == one.times and many.seq_total == one.seq_total
    with pytest.raises(ValueError, match="finishes"):
        many.advance_many([5.0] * 5)  # the first request samples its last (9th) token at step 8
    assert many.steps == one.steps


@pytest.mark.parametrize("builder_on", [True, False])
def test_a_block_build_is_each_steps_build_and_writes_the_same_rows(builder_on: bool) -> None:
    m, bs = 5, 3
    rng = np.random.default_rng(1)
    inputs = np.stack(
        [rng.integers(0, 1000, (m, bs)), 7 + np.arange(m)[:, None] + np.array([0, 3, 9]),
         np.broadcast_to(np.array([2, 0, 4]), (m, bs))]
    ).astype(np.int64)  # fmt: skip
    loc = rng.integers(1, 10_000, (m, bs)).astype(np.int64)
    pools = [ReqToTokenPool(8, 64), ReqToTokenPool(8, 64)]
    block, single = BatchBuilder(pools[0], "numpy"), BatchBuilder(pools[1], "numpy")
    batch = block.build_decode_block(loc, inputs) if builder_on else None
    if not builder_on:
        block.write_decode_block_rows(loc, inputs)
    for i in range(m):
        b = single.build_decode([], torch.from_numpy(loc[i].copy()), inputs[:, i].copy())
        if batch is not None:
            for name in ("input_ids", "seq_lens", "positions", "extend_lens", "out_cache_loc"):
                assert getattr(batch, name)[i].tolist() == getattr(b, name).tolist(), name
            assert batch.req_pool_indices[i].tolist() == b.req_pool_indices.tolist()
    assert torch.equal(pools[0].req_to_token, pools[1].req_to_token)


def _run(page: int, coalesce: bool, builder: bool = True) -> tuple[object, Counter]:
    sc = load_scenario(
        "mooncake-conversation",
        {"arrivals.max_requests": 40, "sim.page_size": page, "sim.kv_capacity_tokens": 60_000},
    )
    cfg = dataclasses.replace(sc.sim, clock="isolated", batch_builder=builder)
    blocks: Counter = Counter()
    real = decode_block.run_block

    def counted(s, end):  # type: ignore[no-untyped-def]
        m, t = real(s, end)
        blocks[m > 1] += 1
        return m, t

    scheduler_mod.run_block = counted
    try:
        sim = VariantSim(load_requests(sc, None).requests, cfg, sc.variants[0], CPU,
                         coalesce=coalesce)  # fmt: skip
        while sim.step(1 << 30):
            pass
    finally:
        scheduler_mod.run_block = real
    return sim.result(), blocks


@pytest.mark.parametrize(("page", "builder"), [(1, True), (16, True), (64, True), (16, False)])
def test_runs_in_blocks_give_the_step_by_step_tables(page: int, builder: bool) -> None:
    a, none = _run(page, coalesce=False, builder=builder)
    b, blocks = _run(page, coalesce=True, builder=builder)
    assert not none and blocks[True] > 10  # not vacuous: multi-step blocks ran
    for stem in ("requests", "timeseries", "ops"):
        x, y = getattr(a, stem), getattr(b, stem)
        cols = [c for c in x.columns if c not in ("ns", "measured_cpu_s")]
        pd.testing.assert_frame_equal(x[cols], y[cols], check_exact=True)
    # the measured time is spread, not lost: a block's steps carry its ns
    ops = b.ops[b.ops["op"] == "alloc"]
    assert (ops["ns"] > 0).mean() > 0.9


def test_shares_add_up() -> None:
    assert decode_block._shares(10, 3).tolist() == [4, 3, 3]
    assert int(decode_block._shares(10**12 + 7, 256).sum()) == 10**12 + 7
