"""Tests for radixbench.reports.verdicts: bootstrap CI of the median ratio and verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.axes import VariantSet
from radixbench.reports.tables import OP_COLUMNS
from radixbench.reports.verdicts import (
    EVICT_OWN,
    VERDICT_COLUMNS,
    same_call_sites,
    verdict,
    verdict_table,
)

BASELINE = {"evictor": "heapify", "matcher": "linear", "flatten": "sum"}


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (1.1, 1.5, "faster"),
        (0.5, 0.9, "slower"),
        (0.9, 1.1, "no significant difference"),
        (1.0, 1.2, "no significant difference"),
        (np.nan, np.nan, "no significant difference"),
        # identical code in two classes: 1.02 [1.02, 1.02] is below the smallest effect claimed
        (1.018, 1.022, "no significant difference"),
        (0.975, 0.985, "no significant difference"),
        (1.035, 1.05, "faster"),
    ],
)
def test_verdict(lo, hi, expected) -> None:
    assert verdict(lo, hi) == expected


def test_verdict_table_pairs_and_verdicts(requests_df, ops_df) -> None:
    table = verdict_table(requests_df, ops_df, BASELINE, n_resamples=200)
    assert list(table.columns) == VERDICT_COLUMNS
    evict = table[table["metric"] == "evict ns"]
    assert set(zip(evict["candidate"], evict["baseline"])) == {
        ("persistent-heap/linear/chain", "heapify/linear/chain"),
        ("persistent-heap/galloping/chain", "heapify/galloping/chain"),
    }
    match = table[table["metric"] == "match_prefix ns"]
    assert set(match["baseline"]) == {"heapify/linear/chain", "persistent-heap/linear/chain"}
    # the conftest makes persistent-heap and galloping faster on their own op
    assert (table.loc[table["metric"].str.endswith(" ns"), "verdict"] == "faster").all()
    # request metrics: each pair also compares TTFT and E2E over finished requests
    ttft = table[table["metric"] == "ttft_s"]
    assert len(ttft) == 4
    n_finished = int((requests_df["status"] == "finished").sum() // 4)
    assert (ttft["n_candidate"] == n_finished).all()
    assert ((table["ci_low"] <= table["ratio"]) & (table["ratio"] <= table["ci_high"])).all()


def test_identical_variants_show_no_difference(requests_df, ops_df) -> None:
    base = "heapify/linear/chain"
    one = ops_df[ops_df["variant"] == base]
    cand = one.assign(variant="persistent-heap/linear/chain", evictor="persistent-heap")
    table = verdict_table(requests_df.iloc[0:0], pd.concat([one, cand]), BASELINE, n_resamples=200)
    assert len(table) == 1
    assert table["ratio"].iloc[0] == 1.0
    assert table["verdict"].iloc[0] == "no significant difference"


def test_flatten_axis_compares_batch_builds(ops_factory, requests_df) -> None:
    ops = ops_factory(counts={"build_extend": 60, "build_decode": 60})
    moved = ops["variant"] == "persistent-heap/linear/chain"
    ops.loc[moved, "variant"] = "heapify/linear/sum"
    ops.loc[moved, "evictor"] = "heapify"
    ops.loc[moved, "flatten"] = "sum"
    table = verdict_table(requests_df.iloc[0:0], ops, BASELINE, n_resamples=100)
    flat = table[table["baseline"] == "heapify/linear/sum"]
    assert set(flat["metric"]) == {"build_extend ns", "build_decode ns"}
    assert set(flat["candidate"]) == {"heapify/linear/chain"}


def test_request_metrics_pair_by_rid(requests_df, ops_df) -> None:
    base, cand = "heapify/linear/chain", "persistent-heap/linear/chain"
    req = requests_df[requests_df["variant"] == base]
    # candidate: every request exactly 2x faster, rows shuffled -> pairing must use rid
    faster = req.assign(
        variant=cand, evictor="persistent-heap", ttft_s=req["ttft_s"] / 2, e2e_s=req["e2e_s"] / 2
    )
    faster = faster.sample(frac=1.0, random_state=0)
    table = verdict_table(pd.concat([req, faster]), ops_df.iloc[0:0], BASELINE, n_resamples=200)
    ttft = table[table["metric"] == "ttft_s"].iloc[0]
    assert (ttft["ratio"], ttft["ci_low"], ttft["ci_high"]) == pytest.approx((2.0, 2.0, 2.0))
    assert ttft["verdict"] == "faster"


def test_resolve_baseline_takes_the_named_value_else_the_first_listed() -> None:
    rb = ("impl", "evictor", "matcher", "flatten")
    records = {
        "persistent-heap/galloping/numpy": ("radixbench", "persistent-heap", "galloping", "numpy"),
        "lru-list/linear/numpy": ("radixbench", "lru-list", "linear", "numpy"),
        "sglang/chain": ("sglang", None, None, "chain"),
    }
    vs = VariantSet(tuple(records), rb, {n: dict(zip(rb, r)) for n, r in records.items()})
    assert vs.resolve_baseline() == {
        "impl": "radixbench",
        "evictor": "persistent-heap",
        "matcher": "galloping",
        "flatten": "numpy",
    }
    named = vs.resolve_baseline({"matcher": "linear", "evictor": "heapify"})
    # heapify was not run: the first listed evictor stands in
    assert named["evictor"] == "persistent-heap" and named["matcher"] == "linear"
    only = VariantSet(
        ("sglang/chain",), rb, {"sglang/chain": dict(zip(rb, records["sglang/chain"]))}
    )
    assert only.resolve_baseline() == {"impl": "sglang", "flatten": "chain"}


def test_any_set_of_variants_gets_verdicts(requests_df, ops_df) -> None:
    """No heapify / linear / sum: the first listed variant is the baseline of each axis."""
    keep = ["persistent-heap/galloping/chain", "heapify/galloping/chain"]
    ops = ops_df[ops_df["variant"].isin(keep)]
    req = requests_df[requests_df["variant"].isin(keep)]
    vs = VariantSet.from_frames(req.sort_values("variant", ascending=False), ops)
    table = verdict_table(req, ops, vs.resolve_baseline(), variants=vs, n_resamples=50)
    assert set(table["candidate"]) == {"heapify/galloping/chain"}
    assert set(table["baseline"]) == {"persistent-heap/galloping/chain"}
    row = table[table["metric"] == "evict ns"].iloc[0]
    assert row["axis"] == "evictor" and row["verdict"] == "slower"  # heapify is slower


def test_isolated_clock_has_no_request_metric_rows(requests_df, ops_df) -> None:
    table = verdict_table(requests_df, ops_df, BASELINE, n_resamples=20, request_metrics=False)
    assert len(table) and not set(table["metric"]) & {"ttft_s", "tpot_s", "e2e_s"}
    coupled = verdict_table(requests_df, ops_df, BASELINE, n_resamples=20)
    assert {"ttft_s", "e2e_s"} <= set(coupled["metric"])


def test_evictor_time_excludes_the_kv_free() -> None:
    """``evict excl. KV free ns`` = each evict call minus its evict_kv_free row."""
    rows = []
    for variant, own, free in (("heapify/linear/chain", 1000, 500), ("lru/linear/chain", 100, 500)):
        for k in range(40):
            for op, ns in (("evict", own + free + k), ("evict_kv_free", free)):
                rows.append((variant, op, ns, 16, 16, 10, 100, 5000, float(k)))
    ops = pd.DataFrame(rows, columns=list(OP_COLUMNS))
    ops = ops.assign(impl="radixbench", evictor=ops["variant"].str.partition("/")[0],
                     matcher="linear", flatten="chain")  # fmt: skip
    req = pd.DataFrame({c: pd.Series(dtype="float64") for c in ["rid"]})
    req = req.assign(variant=pd.Series(dtype=str), status=pd.Series(dtype=str))
    table = verdict_table(req, ops, {"evictor": "heapify"}, n_resamples=50)
    by = table.set_index("metric")
    assert by.loc["evict ns", "ratio"] == pytest.approx(1519.5 / 619.5)
    assert by.loc[EVICT_OWN, "ratio"] == pytest.approx(1019.5 / 119.5)
    assert by.loc[EVICT_OWN, "baseline_median"] == pytest.approx(1019.5)


def test_implementations_are_compared_at_the_call_sites_both_have() -> None:
    """radixbench re-matches inside checkpoint, sglang's served cache does not (U6): the
    match_prefix verdict compares the scheduler's own matches only; inserts (all inside
    checkpoint on both sides) are all kept; a table without ``parent`` keeps every call."""
    rows = []
    for variant, sites in (("rb", ["", "checkpoint", "checkpoint"]), ("sgl", [""])):
        for i in range(30):
            for parent in sites:
                ns = 100 + i if parent == "" else 5_000 + i
                rows.append({"variant": variant, "op": "match_prefix", "ns": ns, "parent": parent})
            rows.append({"variant": variant, "op": "insert", "ns": 50, "parent": "checkpoint"})
    ops = pd.DataFrame(rows)
    b, c = same_call_sites(ops, "rb", "sgl", "match_prefix")
    assert b.size == c.size == 30 and b.max() < 200  # no checkpoint re-match on either side
    b, c = same_call_sites(ops, "rb", "sgl", "insert")
    assert b.size == c.size == 30
    b, c = same_call_sites(ops.drop(columns="parent"), "rb", "sgl", "match_prefix")
    assert (b.size, c.size) == (90, 30)


def test_op_intervals_resample_blocks_of_simulated_time() -> None:
    """Large op samples get the block bootstrap (``ci_method`` ``block percentile``): the A/A
    replica of a run whose slices were hit by load bursts (each block of 60 calls slowed by
    its own factor, per variant) reads an interval that contains 1 and is more than twice as
    wide as the one from resampling its calls one by one (how often each covers 1:
    ``test_reports_bootstrap``); without ``sim_time_s`` (older runs) the calls are resampled
    one by one."""
    rng = np.random.default_rng(3)
    blocks, per = 50, 60
    t = np.repeat(np.arange(blocks, dtype=float), per)
    frames = []
    for variant, replica in (("heapify/linear/sum", None), ("heapify/linear/sum/replica=2", 2)):
        load = rng.lognormal(0.0, 0.05, blocks)
        ns = rng.lognormal(np.log(2000.0), 0.1, t.size) * load[t.astype(int)]
        frames.append(
            pd.DataFrame(
                {
                    "variant": variant, "impl": "radixbench", "evictor": "heapify",
                    "matcher": "linear", "flatten": "sum", "op": "match_prefix", "ns": ns,
                    "key_len": 8, "result": 0, "tree_nodes": 1, "tree_tokens": 1,
                    "evictable_leaves": 1, "parent": "", "sim_time_s": t, "replica": replica,
                }
            )
        )  # fmt: skip
    ops = pd.concat(frames, ignore_index=True)
    base = {"evictor": "heapify", "matcher": "linear", "flatten": "sum"}
    none = pd.DataFrame({"rid": [], "variant": [], "status": []})
    row = verdict_table(none, ops, base, n_resamples=400, request_metrics=False)
    aa = row[row["metric"] == "match_prefix ns"].iloc[0]
    assert aa["ci_method"] == "block percentile"
    assert aa["ci_low"] <= 1.0 <= aa["ci_high"]
    old = verdict_table(
        none, ops.drop(columns="sim_time_s"), base, n_resamples=400,
        request_metrics=False,
    )  # fmt: skip
    per_call = old[old["metric"] == "match_prefix ns"].iloc[0]
    assert per_call["ci_method"] == "percentile"
    assert per_call["ratio"] == aa["ratio"]
    # the calls of a block share its load: one by one they look 3,000 independent draws
    width = aa["ci_high"] - aa["ci_low"]
    assert width > 2 * (per_call["ci_high"] - per_call["ci_low"])
