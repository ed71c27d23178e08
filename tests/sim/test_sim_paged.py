"""The simulator at page_size 1, 4 and 16 on the bundled Mooncake trace and a generated
multi-turn scenario: every run finishes, the KV pool adds up before every (checked) step and at
the end, every evictor x matcher variant sees the same hits, runs repeat exactly, and bigger
pages never raise the prefix hit rate."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from radixbench.cache.evictor import EVICTORS
from radixbench.cache.integrity import check_integrity
from radixbench.cache.matcher import MATCHERS
from radixbench.harness.experiments.equivalence import check_equivalence
from radixbench.sim import SimConfig, Variant, VariantSim
from radixbench.sim.accounting import kv_account
from radixbench.sim.config import VARIANT_COLUMNS
from radixbench.sim.cost import LinearCostModel
from radixbench.sim.run import VariantResult
from radixbench.workloads import load_mooncake
from radixbench.workloads.arrivals import Arrivals
from radixbench.workloads.generators import MultiTurn
from radixbench.workloads.sources import load_workload

CPU = torch.device("cpu")
PAGES = (1, 4, 16)


def _mooncake():
    """The first 20 bundled requests, 4x denser; outputs capped at 32 tokens so the runs take
    few decode steps (the prompts, whose prefixes paging changes, are the trace's own)."""
    trace = load_mooncake(max_requests=20)
    return [
        dataclasses.replace(t, arrival_s=t.arrival_s / 4, output_length=min(t.output_length, 32))
        for t in trace
    ]


def _multi_turn():
    """6 chat sessions x 4 turns; 5-token blocks, so shared prefixes end inside 16-token pages."""
    params = MultiTurn(
        sessions=6,
        turns=4,
        system_prompt_tokens=200,
        user_tokens=60,
        reply_tokens=40,
        block_size=5,
    )
    arrivals = Arrivals(process="poisson", rate=20.0)
    return load_workload("multi-turn", params, arrivals, np.random.default_rng(0))


WORKLOADS = {"mooncake": (_mooncake, 30_000, 5), "multi-turn": (_multi_turn, 3_000, 1)}
"""name -> (requests, KV pool small enough to evict, check the pool every N-th step)."""


def simulate(trace, cfg: SimConfig, variant: Variant, check_every: int = 0) -> VariantResult:
    """Run to the end; with ``check_every`` check the KV accounting and the tree before every
    N-th step. ``result()`` checks the accounting once more at the end."""
    sim = VariantSim(trace, cfg, variant, CPU)
    steps = itertools.count()
    if check_every:

        def check(sched) -> None:
            if next(steps) % check_every == 0:
                kv_account(sched.cache, sched.live_requests())
                check_integrity(sched.cache)

        sim.sched.before_step = check
    while sim.step(1 << 30):
        pass
    cache, alloc = sim.cache, sim.sched.allocator
    check_integrity(cache)
    assert cache.protected_size() == 0 and not sim.sched.live_requests()
    assert alloc.available_size() + cache.total_size() == alloc.size  # nothing leaked
    return sim.result()


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, int], list[VariantResult]]:
    """Per (workload, page): every evictor x matcher variant (the first checked step by step),
    then the first variant again. Mooncake at page 1 runs the first variant only: every variant
    on it is tests/sim/test_run.py's test_variants_see_identical_schedule (100 requests)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the harness runs; small tensor ops stall on 2 shared cores
    out = {}
    variants = [Variant(e, m) for e in sorted(EVICTORS) for m in sorted(MATCHERS)]
    for name, (make, kv, every) in WORKLOADS.items():
        trace = make()
        for page in PAGES:
            cfg = SimConfig(
                kv_capacity_tokens=kv,
                max_running=16,
                chunked_prefill_size=2048,
                page_size=page,
                cost=LinearCostModel(),
            )
            some = variants[:1] if (name, page) == ("mooncake", 1) else variants
            res = [simulate(trace, cfg, v, every if i == 0 else 0) for i, v in enumerate(some)]
            res.append(simulate(trace, cfg, variants[0]))
            out[name, page] = res
    torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_runs_finish_and_evict_within_the_pool(runs, workload: str, page: int) -> None:
    res = runs[workload, page][0]
    df, ts = res.requests, res.timeseries
    assert set(df["status"]) <= {"finished", "rejected"}
    assert (df["status"] == "finished").mean() > 0.9
    hits = df.loc[df["status"] == "finished", "prefix_hit_tokens"]
    assert (hits % page == 0).all()  # hits are whole pages
    cap = ts["kv_capacity_tokens"]
    assert (cap % page == 0).all() and (ts["kv_used_tokens"] <= cap).all()
    assert res.ops.loc[res.ops["op"] == "evict", "result"].sum() > 0  # the pool was tight


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_variants_agree_and_runs_repeat(runs, workload: str, page: int) -> None:
    *variants, again = runs[workload, page]
    eq = check_equivalence(pd.concat([r.requests for r in variants], ignore_index=True))
    assert eq["ok"], eq["first_diff"]
    frames = [r.requests.drop(columns=list(VARIANT_COLUMNS)) for r in variants]
    for f in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], f)
    pd.testing.assert_frame_equal(variants[0].requests, again.requests)
    cols = ["op", "key_len", "result", "tree_nodes", "tree_tokens", "evictable_leaves"]
    pd.testing.assert_frame_equal(variants[0].ops[cols], again.ops[cols])


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_bigger_pages_never_raise_the_hit_rate(runs, workload: str) -> None:
    rate = [runs[workload, p][0].metrics["prefix_hit_rate"] for p in PAGES]
    assert rate[2] <= rate[1] <= rate[0]
    if workload == "multi-turn":  # prefixes of 5-token blocks: 16-token pages lose their ends
        assert rate[2] < rate[0]


def test_retraction_frees_whole_pages_and_everything_finishes(pressure_trace) -> None:
    cfg = SimConfig(kv_capacity_tokens=8_000, max_running=16, page_size=16, cost=LinearCostModel())
    res = simulate(pressure_trace, cfg, Variant(), check_every=10)
    assert res.metrics["retractions"] > 0
    assert (res.requests["status"] == "finished").all()


def test_chunks_are_whole_pages_and_stay_within_the_chunk(trace100) -> None:
    cfg = SimConfig(
        kv_capacity_tokens=300_000,
        chunked_prefill_size=1024,
        max_running=8,
        page_size=16,
        cost=LinearCostModel(),
    )
    trace = [dataclasses.replace(t, output_length=min(t.output_length, 16)) for t in trace100[:8]]
    res = simulate(trace, cfg, Variant(), check_every=2)
    pre = res.timeseries[res.timeseries["step"] == "prefill"]
    assert (pre["new_tokens"] <= 1024).all() and (pre["new_tokens"] == 1024).any()
    assert (res.requests["status"] == "finished").all()
