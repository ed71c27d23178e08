"""Tests for radixbench.reports.diagnostics (overload and axis checks) and
radixbench.reports.headline (the answer a report leads with)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.axes import VariantSet
from radixbench.reports.diagnostics import axis_checks, load_check, load_lines
from radixbench.reports.headline import ISOLATED_NOTE, answer, withhold
from radixbench.reports.record import RunMeta
from radixbench.reports.verdicts import verdict_table

BASELINE = {"evictor": "heapify", "matcher": "linear", "flatten": "chain"}
META = RunMeta(max_running=8, chunked_prefill_size=1000)


def _run(n: int, gap_s: float, ttft_s: float, queue: np.ndarray, rejected: int = 0):
    """Requests arriving every ``gap_s`` with TTFT ``ttft_s``, and 0.01-s steps (prefill and
    decode alternating) with waiting queue ``queue`` (one value per step)."""
    arrival = np.arange(n) * gap_s
    status = ["finished"] * (n - rejected) + ["rejected"] * rejected
    req = pd.DataFrame(
        {
            "variant": "a/b/c",
            "rid": np.arange(n),
            "arrival_s": arrival,
            "input_len": np.full(n, 500),
            "output_len": np.full(n, 10),
            "prefix_hit_tokens": np.zeros(n, dtype=np.int64),
            "first_token_s": arrival + ttft_s,
            "finish_s": arrival + ttft_s + 0.1,
            "ttft_s": np.full(n, ttft_s),
            "e2e_s": np.full(n, ttft_s + 0.1),
            "status": status,
        }
    )
    steps = len(queue)
    t = np.linspace(0.0, arrival[-1] + ttft_s, steps)
    ts = pd.DataFrame(
        {
            "variant": "a/b/c",
            "sim_time_s": t,
            "step": np.where(np.arange(steps) % 2 == 0, "prefill", "decode"),
            "step_s": np.full(steps, 0.01),
            "queue_len": queue.astype(np.int64),
            "running": np.full(steps, 4, dtype=np.int64),
            "kv_used_tokens": np.zeros(steps, dtype=np.int64),
            "kv_capacity_tokens": np.full(steps, 1000, dtype=np.int64),
        }
    )
    return req, ts


def test_served_run_is_not_flagged() -> None:
    req, ts = _run(100, 0.1, 0.02, np.zeros(200))
    (load,) = load_check(req, ts, META)
    assert not load.overloaded
    assert load.service_p50_s == pytest.approx(0.01) and load.ttft_p50_s == pytest.approx(0.02)
    assert load.occupancy == pytest.approx(0.5)  # 4 of max_running 8
    (line,) = load_lines([load])
    assert line.startswith("Load: served") and "4.0 of 8 running slots" in line


def test_growing_queue_and_long_ttft_are_flagged() -> None:
    req, ts = _run(100, 0.1, 50.0, np.clip(np.linspace(0, 3600, 200), 0, 600))  # full by 9.9 s
    (load,) = load_check(req, ts, META)
    assert load.overloaded and len(load.reasons) == 2
    assert "queue grows without bound: peak 600" in load.reasons[0]
    assert "5,000x the p50 prefill service time" in load.reasons[1]  # 50 s vs 0.01 s
    lines = load_lines([load])
    assert lines[0].startswith("OVERLOADED (a/b/c)") and "overloaded" in lines[1]


def test_a_drained_burst_is_not_overload() -> None:
    queue = np.concatenate([np.linspace(0, 100, 50), np.linspace(100, 0, 50), np.zeros(100)])
    req, ts = _run(100, 0.1, 0.02, queue)
    assert not load_check(req, ts, META)[0].overloaded


def test_rejections_are_stated() -> None:
    req, ts = _run(100, 0.1, 0.02, np.zeros(200), rejected=3)
    lines = load_lines(load_check(req, ts, META))
    assert any(line.startswith("3 request(s) rejected") for line in lines)


def test_old_runs_without_step_columns_give_no_load() -> None:
    req, ts = _run(10, 0.1, 0.02, np.zeros(20))
    assert load_check(req, ts.drop(columns=["step_s"]), META) == []
    assert load_check(req, None, META) == []


def test_axis_checks_flag_unexercised_and_trivial_axes(ops_df) -> None:
    no_evict = axis_checks(ops_df[ops_df["op"] != "evict"], ["evictor", "matcher"])
    assert not no_evict["evictor"].ok
    assert no_evict["evictor"].reason.startswith("evict ran 0 times: the evictors were not")
    assert no_evict["matcher"].ok and "median matched" in no_evict["matcher"].condition
    tiny = ops_df.assign(evictable_leaves=3, result=10)
    checks = axis_checks(tiny, ["evictor", "matcher"])
    assert "median of 3 evictable leaves" in checks["evictor"].reason
    assert "trivial" in checks["matcher"].reason


def test_answer_leads_with_one_line_per_axis(requests_df, ops_df) -> None:
    verdicts = verdict_table(requests_df, ops_df, BASELINE, n_resamples=50)
    ans = answer(verdicts, ops_df, BASELINE, VariantSet.from_frames(ops_df), clock="coupled")
    evict = [h for h in ans.headline if h.startswith("evict:")]
    match = [h for h in ans.headline if h.startswith("match_prefix:")]
    assert len(evict) == 1 and len(match) == 1  # at the baseline's other axes only
    assert "persistent-heap" in evict[0] and "faster than heapify [" in evict[0]
    assert "calls each" in evict[0] and "evictable leaves" in evict[0]
    assert "galloping" in match[0] and "median matched" in match[0]
    assert any(s.startswith("TTFT p50: persistent-heap") for s in ans.serving)
    assert ISOLATED_NOTE not in ans.serving


def test_isolated_clock_states_why_serving_metrics_are_identical(requests_df, ops_df) -> None:
    verdicts = verdict_table(requests_df, ops_df, BASELINE, n_resamples=20, request_metrics=False)
    metrics = pd.DataFrame(
        {"variant": ["a", "b"], "measured_cpu_s": [1.0, 2.0], "duration_s": [100.0, 100.0]}
    )
    ans = answer(
        verdicts,
        ops_df,
        BASELINE,
        VariantSet.from_frames(ops_df),
        metrics=metrics,
        clock="isolated",
    )
    assert ans.serving[0] == ISOLATED_NOTE
    assert "a 1.0%, b 2.0%" in ans.serving[1]


def test_unexercised_axis_gets_no_claim(requests_df, ops_df) -> None:
    ops = ops_df.assign(evictable_leaves=2)
    verdicts = verdict_table(requests_df, ops, BASELINE, n_resamples=20, request_metrics=False)
    ans = answer(verdicts, ops, BASELINE, VariantSet.from_frames(ops))
    (line,) = [h for h in ans.headline if h.startswith("evictor")]
    assert line.startswith("evictor: NOT COMPARED — evict ran")
    held = withhold(verdicts, ans.checks)
    assert set(held.loc[held["axis"] == "evictor", "verdict"]) == {"not compared"}
    assert "not compared" not in set(held.loc[held["axis"] == "matcher", "verdict"])


def test_varied_axis_whose_op_never_ran_is_reported_not_compared(requests_df, ops_df) -> None:
    # two evictors, but the KV pool never filled: no evict rows, so no evictor verdict rows
    ops = ops_df[ops_df["op"] != "evict"]
    verdicts = verdict_table(requests_df, ops, BASELINE, n_resamples=20, request_metrics=False)
    assert not (verdicts["axis"] == "evictor").any()
    ans = answer(verdicts, ops, BASELINE, VariantSet.from_frames(ops))
    (line,) = [h for h in ans.headline if h.startswith("evictor")]
    assert line == (
        "evictor: NOT COMPARED — evict ran 0 times: the evictors were not compared (the KV "
        "pool never filled)."
    )
    assert any(h.startswith("match_prefix:") for h in ans.headline)


def test_varied_axes_from_the_axis_columns(ops_df) -> None:
    vs = VariantSet.from_frames(ops_df)
    assert vs.varied() == ["evictor", "matcher"]
    one = ops_df[ops_df["variant"] == "heapify/linear/chain"]
    assert VariantSet.from_frames(one).varied() == []
    sgl = one.assign(variant="sglang/chain", impl="sglang", evictor=None, matcher=None)
    assert VariantSet.from_frames(one, sgl).varied() == ["impl"]


def test_impl_headline_gives_each_ops_own_condition_and_the_pairing(requests_df, ops_df) -> None:
    """Issue 22, defect 1: on the impl axis each op's line states that op's condition (evict:
    evictable leaves, not match_prefix's key length); the pairing is named."""
    base = ops_df[ops_df["variant"] == "heapify/galloping/chain"]
    sgl = base.assign(variant="sglang/chain", impl="sglang", evictor=None, matcher=None)
    ops = pd.concat([base, sgl], ignore_index=True)
    req = requests_df[requests_df["variant"] == "heapify/galloping/chain"]
    req = pd.concat([req, req.assign(variant="sglang/chain", impl="sglang", evictor=None,
                                     matcher=None)])  # fmt: skip
    ref = {"sglang": {"evictor": "heapify", "matcher": "galloping"}}
    vs = VariantSet.from_frames(req, ops, reference=ref)
    base_axes = vs.resolve_baseline()
    verdicts = verdict_table(req, ops, base_axes, variants=vs, n_resamples=20,
                             request_metrics=False)  # fmt: skip
    ans = answer(verdicts, ops, base_axes, vs)
    evict = next(h for h in ans.headline if h.startswith("evict:"))
    leaves = float(base.loc[base["op"] == "evict", "evictable_leaves"].median())
    assert f"median {leaves:,.0f} evictable leaves" in evict and "tokens per call" not in evict
    match = next(h for h in ans.headline if h.startswith("match_prefix:"))
    assert "median matched" in match
    assert any("like-for-like" in h and "heapify/galloping/chain" in h for h in ans.headline)


def test_an_impl_pair_not_like_for_like_names_the_algorithms_it_compared(
    requests_df, ops_df
) -> None:
    """Issue 31 item 7: sglang runs a matcher this run does not have, so it is paired with the
    baseline's (linear): no line may read as "sglang faster than radixbench" as a whole."""
    base = ops_df[ops_df["variant"] == "heapify/linear/chain"]
    sgl = base.assign(variant="sglang/chain", impl="sglang", evictor=None, matcher=None)
    ops = pd.concat([base, sgl], ignore_index=True)
    req = requests_df[requests_df["variant"] == "heapify/linear/chain"]
    req = pd.concat([req, req.assign(variant="sglang/chain", impl="sglang", evictor=None,
                                     matcher=None)])  # fmt: skip
    vs = VariantSet.from_frames(
        req, ops, reference={"sglang": {"evictor": "heapify", "matcher": "memview"}}
    )
    base_axes = vs.resolve_baseline()
    verdicts = verdict_table(req, ops, base_axes, variants=vs, n_resamples=20,
                             request_metrics=False)  # fmt: skip
    lines = answer(verdicts, ops, base_axes, vs).headline
    ops_lines = [h for h in lines if h.split(":")[0] in ("match_prefix", "insert", "evict")]
    assert ops_lines and all(
        "radixbench heapify/linear (not like-for-like)" in h for h in ops_lines
    ), ops_lines
