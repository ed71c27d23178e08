"""Issue 31 item 6: one verdict rule everywhere, floored by the A/A control shifted by its
median, and the A/A rows never drawn as a verdict."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.routing import router_verdicts
from radixbench.reports.verdicts import (
    AA_VERDICT,
    NO_DIFFERENCE,
    verdict,
    verdict_bars,
    verdict_table,
)


def test_the_bars_are_the_aa_interval_shifted_by_its_median_both_ways() -> None:
    lo, hi = verdict_bars(0.936, 0.966, 0.95)  # identical code read 5 % slower
    assert lo == pytest.approx(0.936)
    assert hi == pytest.approx(0.966 / 0.95 / 0.95)  # ~1.07: the same offset the other way
    # a candidate 4-6 % faster clears 3 % but not the noise identical code showed
    assert verdict(1.04, 1.06, 0.936, 0.966, 0.95) == NO_DIFFERENCE
    assert verdict(1.08, 1.1, 0.936, 0.966, 0.95) == "faster"
    assert verdict(0.90, 0.93, 0.936, 0.966, 0.95) == "slower"
    # an A/A centred on 1 keeps the 3 % bars; no A/A: the 3 % bars
    assert verdict_bars(0.99, 1.01, 1.0) == pytest.approx((1 / 1.03, 1.03))
    assert verdict_bars() == verdict_bars(math.nan, math.nan, math.nan)
    assert verdict(1.04, 1.05) == "faster" and verdict(0.5, 0.6, words=("up", "down")) == "down"


def _ops(variant: str, evictor: str, replica: str | None, scale: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    return pd.DataFrame(
        {
            "variant": variant, "impl": "radixbench", "evictor": evictor, "matcher": "linear",
            "flatten": "sum", "replica": replica, "op": "evict",
            "ns": (10_000 * scale * rng.lognormal(0, 0.02, n)).astype("int64"), "key_len": 16,
            "result": 16, "tree_nodes": 500, "tree_tokens": 5000, "evictable_leaves": 400,
            "parent": "", "sim_time_s": np.arange(n, dtype=float),
        }
    )  # fmt: skip


def test_aa_rows_are_no_claim_and_floor_the_others() -> None:
    """The replica reads 5 % slower than the identical baseline; a candidate 5 % faster is
    then no claim (the old rule called it faster, and the replica "slower")."""
    ops = pd.concat(
        [
            _ops("heapify/linear/sum", "heapify", None, 1.0, 1),
            _ops("persistent-heap/linear/sum", "persistent-heap", None, 1 / 1.05, 2),
            _ops("heapify/linear/sum/replica=2", "heapify", "2", 1.05, 3),
        ],
        ignore_index=True,
    )
    requests = pd.DataFrame(columns=["variant", "rid", "status"])
    table = verdict_table(requests, ops, {"evictor": "heapify"}, n_resamples=200,
                          request_metrics=False)  # fmt: skip
    aa = table[table["axis"] == "replica"]
    assert (aa["verdict"] == AA_VERDICT).all()
    cand = table[(table["axis"] == "evictor") & (table["metric"] == "evict ns")].iloc[0]
    assert cand["ci_low"] > 1.03  # clears the smallest effect...
    assert cand["aa_ratio"] == pytest.approx(aa[aa["metric"] == "evict ns"]["ratio"].iloc[0])
    assert cand["verdict"] == NO_DIFFERENCE  # ...but not the A/A's own offset


def test_router_verdicts_use_the_same_rule() -> None:
    """A throughput 1.01x [1.004-1.016] is no difference (it was "better")."""
    rows = []
    for router, scale in (("round-robin", 1.0), ("cache-aware", 1 / 1.01)):
        n = 2000
        arrival = np.arange(n, dtype=float)
        jitter = np.random.default_rng(1).normal(0, 0.01, n)
        frame = {"variant": f"v/router={router}", "impl": "radixbench", "router": router,
                 "rid": np.arange(n), "arrival_s": arrival, "output_len": 100,
                 "finish_s": arrival + 10 * scale + jitter, "ttft_s": 0.5 * scale,
                 "status": "finished"}  # fmt: skip
        rows.append(pd.DataFrame(frame))
    v = router_verdicts(pd.concat(rows, ignore_index=True), {"router": "round-robin"})
    tput = v[v["metric"] == "output_throughput"].iloc[0]
    assert tput["ci_low"] > 1.0
    assert tput["verdict"] == NO_DIFFERENCE
