"""Tests for radixbench.reports.summary: op/variant summaries and speed-up ratios."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.axes import VariantSet
from radixbench.reports.summary import (
    OP_SUMMARY_COLUMNS,
    SPEEDUP_COLUMNS,
    VARIANT_SUMMARY_COLUMNS,
    axis_speedup,
    op_summary,
    speedups,
    variant_summary,
)


def rb(evictor: str, matcher: str, flatten: str = "chain") -> dict[str, str | None]:
    """The axis record of a variant of radixbench's cache."""
    return {"impl": "radixbench", "evictor": evictor, "matcher": matcher, "flatten": flatten}


BASELINE = {"evictor": "heapify", "matcher": "linear"}


def test_op_summary_matches_numpy(ops_df: pd.DataFrame) -> None:
    summary = op_summary(ops_df)
    assert list(summary.columns) == OP_SUMMARY_COLUMNS
    pairs = ops_df[["op", "variant"]].drop_duplicates()
    assert len(summary) == len(pairs) == 4 * 5
    assert summary[["op", "variant"]].values.tolist() == sorted(pairs.values.tolist())
    for row in summary.itertuples(index=False):
        ns = ops_df.loc[(ops_df["op"] == row.op) & (ops_df["variant"] == row.variant), "ns"]
        ns = ns.to_numpy()
        assert row.count == ns.size
        assert row.mean_ns == pytest.approx(ns.mean(), rel=1e-12)
        assert row.p50_ns == np.percentile(ns, 50)
        assert row.p90_ns == np.percentile(ns, 90)
        assert row.p99_ns == np.percentile(ns, 99)
        assert row.max_ns == ns.max()
        assert row.total_ms == pytest.approx(ns.sum() / 1e6, rel=1e-12)


def test_op_summary_small_exact() -> None:
    ops = pd.DataFrame(
        {"variant": ["v"] * 4, "op": ["insert"] * 4, "ns": np.array([10, 20, 30, 1000])}
    )
    (row,) = op_summary(ops).to_dict("records")
    assert row["p50_ns"] == 25.0  # linear interpolation, as numpy
    assert row["p90_ns"] == pytest.approx(30 + 0.7 * 970)
    assert row["max_ns"] == 1000
    assert row["total_ms"] == pytest.approx(1060 / 1e6)


def test_op_summary_empty(ops_df: pd.DataFrame) -> None:
    summary = op_summary(ops_df.iloc[0:0])
    assert summary.empty
    assert list(summary.columns) == OP_SUMMARY_COLUMNS


def test_variant_summary_matches_manual(requests_df: pd.DataFrame) -> None:
    raw = variant_summary(requests_df)
    assert list(raw.columns) == VARIANT_SUMMARY_COLUMNS
    summary = raw.set_index("variant")
    assert sorted(summary.index) == sorted(requests_df["variant"].unique())
    for variant, group in requests_df.groupby("variant"):
        fin = group[group["status"] == "finished"]
        row = summary.loc[variant]
        assert row["requests"] == len(group)
        assert row["finished"] == len(fin)
        assert row["rejected"] == len(group) - len(fin) > 0
        hits = sum(int(h) for h in fin["prefix_hit_tokens"])
        inputs = sum(int(n) for n in fin["input_len"])
        assert row["prefix_hit_rate"] == pytest.approx(hits / inputs, rel=1e-12)
        assert row["ttft_p50_s"] == np.percentile(fin["ttft_s"].to_numpy(), 50)
        assert row["ttft_p99_s"] == np.percentile(fin["ttft_s"].to_numpy(), 99)
        assert row["e2e_p99_s"] == np.percentile(fin["e2e_s"].to_numpy(), 99)
        assert row["e2e_mean_s"] == pytest.approx(fin["e2e_s"].mean(), rel=1e-12)
        assert np.isfinite(row["ttft_mean_s"])


def _requests(rows: list[tuple[str, int, int, str]]) -> pd.DataFrame:
    """Minimal per-request table from (variant, input_len, prefix_hit_tokens, status)."""
    n = len(rows)
    finished = np.array([r[3] == "finished" for r in rows])
    t = np.where(finished, 1.0, np.nan)
    return pd.DataFrame(
        {
            "variant": [r[0] for r in rows],
            "rid": np.arange(n, dtype=np.int64),
            "arrival_s": np.zeros(n),
            "input_len": np.array([r[1] for r in rows], dtype=np.int64),
            "output_len": np.ones(n, dtype=np.int64),
            "prefix_hit_tokens": np.array([r[2] for r in rows], dtype=np.int64),
            "first_token_s": t,
            "finish_s": t * 2,
            "ttft_s": t,
            "e2e_s": t * 2,
            "status": [r[3] for r in rows],
        }
    )


def test_hit_rate_over_finished_requests_only() -> None:
    df = _requests(
        [
            ("a/b/c", 100, 50, "finished"),
            ("a/b/c", 300, 0, "finished"),
            ("a/b/c", 1000, 0, "rejected"),
            ("x/y/z", 1000, 0, "rejected"),
        ]
    )
    summary = variant_summary(df).set_index("variant")
    assert summary.loc["a/b/c", "prefix_hit_rate"] == 50 / 400
    assert summary.loc["a/b/c", "input_tokens"] == 400
    assert summary.loc["a/b/c", "finished"] == 2
    assert summary.loc["a/b/c", "rejected"] == 1
    # nothing finished: no rate, no latencies, but still reported
    assert summary.loc["x/y/z", "rejected"] == 1
    assert np.isnan(summary.loc["x/y/z", "prefix_hit_rate"])
    assert np.isnan(summary.loc["x/y/z", "ttft_p99_s"])


def test_unknown_status_rejected() -> None:
    df = _requests([("a/b/c", 100, 0, "finished"), ("a/b/c", 100, 0, "timeout")])
    with pytest.raises(ValueError, match="unknown status 'timeout'"):
        variant_summary(df)


def _op_summary(rows: list[tuple[str, str, float, float, float]]) -> pd.DataFrame:
    """Minimal op summary from (op, variant, p50_ns, p99_ns, total_ms)."""
    return pd.DataFrame(rows, columns=["op", "variant", "p50_ns", "p99_ns", "total_ms"])


def _vs(records: dict[str, tuple[str, str, str]]) -> VariantSet:
    """Variants of radixbench's cache from name -> (evictor, matcher, flatten) records."""
    return VariantSet(
        tuple(records),
        ("impl", "evictor", "matcher", "flatten"),
        {n: rb(*r) for n, r in records.items()},
    )


def test_ratio_is_baseline_over_variant() -> None:
    summary = _op_summary(
        [
            ("evict", "heapify/linear/chain", 200.0, 1000.0, 8.0),
            ("evict", "pheap/linear/chain", 100.0, 250.0, 2.0),
            ("evict", "slow/linear/chain", 400.0, 2000.0, 16.0),
        ]
    )
    vs = _vs({n: (n.split("/")[0], "linear", "chain") for n in summary["variant"]})
    raw = axis_speedup(summary, "evict", "evictor", {"evictor": "heapify"}, vs)
    assert list(raw.columns) == SPEEDUP_COLUMNS
    out = raw.set_index("variant")
    assert out.loc["pheap/linear/chain", "baseline_variant"] == "heapify/linear/chain"
    assert out.loc["pheap/linear/chain", ["p50_ratio", "p99_ratio", "total_ratio"]].tolist() == [
        2.0,
        4.0,
        4.0,
    ]
    assert out.loc["slow/linear/chain", "p50_ratio"] == 0.5  # slower than baseline -> < 1
    assert "heapify/linear/chain" not in out.index


def test_other_axes_held_equal_and_unpaired_skipped() -> None:
    summary = _op_summary(
        [
            ("match_prefix", "h/linear/chain", 100.0, 100.0, 1.0),
            ("match_prefix", "h/galloping/chain", 50.0, 50.0, 0.5),
            ("match_prefix", "h/linear/flat", 1000.0, 1000.0, 10.0),
            ("match_prefix", "h/galloping/flat", 10.0, 10.0, 0.1),
            ("match_prefix", "p/galloping/chain", 1.0, 1.0, 0.01),  # no p/linear/chain
            ("evict", "h/linear/chain", 1.0, 1.0, 1.0),
        ]
    )
    vs = _vs({n: tuple(n.split("/")) for n in dict.fromkeys(summary["variant"])})
    base = {"evictor": "h", "matcher": "linear", "flatten": "chain"}
    out = axis_speedup(summary, "match_prefix", "matcher", base, vs).set_index("variant")
    assert sorted(out.index) == ["h/galloping/chain", "h/galloping/flat"]
    assert out.loc["h/galloping/chain", "p50_ratio"] == 2.0
    assert out.loc["h/galloping/flat", "p50_ratio"] == 100.0
    flat = axis_speedup(summary, "match_prefix", "flatten", base, vs).set_index("variant")
    assert flat.loc["h/linear/flat", "baseline_variant"] == "h/linear/chain"
    assert flat.loc["h/linear/flat", "p50_ratio"] == 0.1


def test_zero_latency_is_an_infinite_ratio() -> None:
    summary = _op_summary([("evict", "a/b/c", 5.0, 5.0, 1.0), ("evict", "z/b/c", 0.0, 0.0, 0.0)])
    vs = _vs({"a/b/c": ("a", "b", "c"), "z/b/c": ("z", "b", "c")})
    (row,) = axis_speedup(summary, "evict", "evictor", {"evictor": "a"}, vs).to_dict("records")
    assert row["p50_ratio"] == float("inf")


def test_speedups_on_synthetic_run(ops_df: pd.DataFrame) -> None:
    vs = VariantSet.from_frames(ops_df)
    out = speedups(op_summary(ops_df), vs.resolve_baseline(BASELINE), vs)
    evict = out[out["op"] == "evict"].set_index("variant")
    match = out[out["op"] == "match_prefix"].set_index("variant")
    assert sorted(evict.index) == [
        "persistent-heap/galloping/chain",
        "persistent-heap/linear/chain",
    ]
    assert sorted(match.index) == ["heapify/galloping/chain", "persistent-heap/galloping/chain"]
    assert evict.loc["persistent-heap/linear/chain", "baseline_variant"] == "heapify/linear/chain"
    assert match.loc["persistent-heap/galloping/chain", "baseline_variant"] == (
        "persistent-heap/linear/chain"
    )
    # heapify evict is linear in leaves and linear match is linear in key length: both slower
    for ratios in (evict, match):
        assert (ratios[["p50_ratio", "p99_ratio", "total_ratio"]] > 1.0).all().all()
    # swapping the baseline inverts the direction
    swapped = speedups(
        op_summary(ops_df),
        vs.resolve_baseline({"evictor": "persistent-heap", "matcher": "galloping"}),
        vs,
    )
    assert (swapped[["p50_ratio", "p99_ratio", "total_ratio"]] < 1.0).all().all()


def test_speedups_empty_summary(ops_df: pd.DataFrame) -> None:
    vs = VariantSet.from_frames(ops_df)
    out = speedups(op_summary(ops_df.iloc[0:0]), vs.resolve_baseline(BASELINE), vs)
    assert out.empty
    assert list(out.columns) == SPEEDUP_COLUMNS


def test_hit_rate_text_covers_the_same_finished_requests() -> None:
    from radixbench.reports.record import RunMeta
    from radixbench.reports.runmeta import hit_rate_text

    meta = RunMeta(hit_rate_ceiling={"all": 0.3, "last_half": 0.35, "requests": 99, "rejected": 1})
    text = hit_rate_text(0.283, meta)
    assert text is not None and text.startswith("achieved 28.3 % vs ceiling 30.0 %")
    assert "both over the 99 finished requests (1 rejected, left out of both" in text
    none_rejected = RunMeta(hit_rate_ceiling={"all": 0.3, "requests": 5, "rejected": 0})
    assert "rejected" not in str(hit_rate_text(0.2, none_rejected))
    assert "finished" not in str(hit_rate_text(0.2, RunMeta(hit_rate_ceiling={"all": 0.3})))


def test_total_ratio_compares_the_same_number_of_calls() -> None:
    """Issue 31 item 7: sglang made 3,000 inserts at the simulator's call site and radixbench
    9,000 (6,000 inside its checkpoints): equal calls must not read as 3x faster."""
    rows = []
    for variant, impl, sites in (("h/linear/chain", "radixbench", ("", "checkpoint", "release")),
                                 ("sglang/chain", "sglang", ("",))):  # fmt: skip
        for parent in sites:
            rows += [{"variant": variant, "impl": impl, "op": "insert", "ns": 100,
                      "parent": parent}] * 3000  # fmt: skip
    ops = pd.DataFrame(rows)
    records = {"h/linear/chain": rb("h", "linear", "chain"),
               "sglang/chain": {"impl": "sglang", "flatten": "chain"}}  # fmt: skip
    vs = VariantSet(tuple(records), ("impl", "evictor", "matcher", "flatten"), records)
    summary = op_summary(ops)
    for table in (ops, None):  # at the common call sites, and per call from the summary
        base = {"impl": "radixbench", "evictor": "h", "matcher": "linear", "flatten": "chain"}
        out = speedups(summary, base, vs, table)
        (row,) = out[out["op"] == "insert"].to_dict("records")
        assert row["variant"] == "sglang/chain" and row["total_ratio"] == 1.0
