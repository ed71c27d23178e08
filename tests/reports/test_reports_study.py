"""Study statistics, crossover and rendering (reports.study*)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.study import (
    block_throughput_ratio,
    crossover,
    paired_stat_ratio,
    point_rows,
)
from radixbench.reports.study_render import crossover_table, write_study


def test_paired_stat_ratio_is_the_ratio_of_the_statistic_with_a_ci() -> None:
    rng = np.random.default_rng(1)
    base = rng.exponential(1.0, 400)
    r, lo, hi = paired_stat_ratio(base, base / 2, partial(np.quantile, q=0.99))
    assert r == pytest.approx(2.0) and lo == pytest.approx(2.0) and hi == pytest.approx(2.0)
    r, lo, hi = paired_stat_ratio(base, base * rng.uniform(0.9, 1.1, 400), np.mean, seed=3)
    assert lo < r < hi and lo < 1.0 < hi
    assert paired_stat_ratio(base, base * 1.1, np.mean, seed=3) == paired_stat_ratio(
        base, base * 1.1, np.mean, seed=3
    )
    with pytest.raises(ValueError, match="differ in length"):
        paired_stat_ratio(base, base[:-1], np.mean)
    assert np.isnan(paired_stat_ratio(np.array([np.nan]), np.array([1.0]), np.mean)[0])


def test_block_throughput_ratio_compares_durations_of_the_same_requests() -> None:
    arrival = np.arange(100, dtype=float)  # 20 blocks of 5: arrivals span 4 s in each block
    r, lo, hi = block_throughput_ratio(arrival, arrival + 2.0, arrival + 1.0)
    assert r == pytest.approx(6 / 5) and lo == pytest.approx(6 / 5) and hi == pytest.approx(6 / 5)
    # one slow block only: the ratio moves, and the interval covers it
    slow = arrival + np.where(arrival < 5, 10.0, 1.0)
    r, lo, hi = block_throughput_ratio(arrival, slow, arrival + 1.0)
    assert r == pytest.approx((14 + 19 * 5) / (20 * 5)) and lo <= r <= hi and lo < hi
    same = block_throughput_ratio(arrival, arrival + 1.0, arrival + 1.0)
    assert same == pytest.approx((1.0, 1.0, 1.0))


def _points(ratios, los, xs=(10, 100, 1000, 10000)) -> pd.DataFrame:
    his = [2 * r - lo for r, lo in zip(ratios, los, strict=True)]
    return pd.DataFrame({"x": xs, "m_ratio": ratios, "m_lo": los, "m_hi": his})


def test_crossover_first_point_above_the_line_and_log_interpolation() -> None:
    c = crossover(_points([1.0, 1.005, 1.05, 1.2], [0.99, 0.99, 1.04, 1.1]), "m", "x")
    assert c["x_first"] == 1000 and c["x_max"] == 10000
    # the line is the verdicts' bar, 1.03: 5/9 of the way from 1.005 to 1.05, in log x
    # between 100 and 1000
    assert c["x_interp"] == pytest.approx(10 ** (2 + 5 / 9))
    # issue 31 item 6: one rule for every verdict: 2 % better is no crossover (it was, at 1 %)
    assert crossover(_points([1.03] * 4, [1.02] * 4), "m", "x")["x_first"] is None
    # a point estimate above the line whose CI is not does not count
    assert crossover(_points([1.2] * 4, [1.0] * 4), "m", "x")["x_first"] is None
    below = crossover(_points([1.2] * 4, [1.1] * 4), "m", "x")
    assert below["x_first"] == 10 and below["x_interp"] is None
    # a lone noisy point above the line, then below it again: not the crossover
    blip = crossover(_points([1.2, 0.9, 1.1, 1.2], [1.1, 0.8, 1.05, 1.1]), "m", "x")
    assert blip["x_first"] == 1000
    assert (
        crossover(_points([1.2, 1.2, 1.2, 1.0], [1.1, 1.1, 1.1, 0.9]), "m", "x")["x_first"] is None
    )


def test_point_rows_measure_the_window_after_the_first_evict(study_tables) -> None:
    req, ops, ts = study_tables()
    (row,) = point_rows(req, ops, ts, family="eviction", baseline="base", candidates=["cand"])
    assert row["window_start_s"] == 10.0 and row["n_requests"] == 100
    assert row["evictable_leaves"] == 500 and row["tree_nodes"] == 1000
    assert row["evicts_per_request"] == pytest.approx(0.5)
    assert row["ttft_p50_ratio"] == pytest.approx(2.0)
    assert row["ttft_p99_ratio"] == pytest.approx(2.0) and row["ttft_p99_lo"] > 1.9
    assert row["op_ratio"] == pytest.approx(500.0)
    assert row["cache_share_base"] == pytest.approx(0.5) and row[
        "cache_share_cand"
    ] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="not in the point"):
        point_rows(req, ops, ts, family="eviction", baseline="base", candidates=["nope"])
    with pytest.raises(ValueError, match="unknown study family"):
        point_rows(req, ops, ts, family="nope", baseline="base", candidates=["cand"])


def test_write_study_writes_plot_tables_and_a_verdict(tmp_path: Path, study_rows) -> None:
    points = study_rows
    meta = {
        "name": "eviction",
        "mode": "quick",
        "family": "eviction",
        "description": "d",
        "scenario": "eviction-pressure",
        "baseline": "heapify",
        "candidates": ("persistent-heap",),
        "wall_s": 1.0,
    }
    extra = (lambda pts: ["## An extra section", f"{len(pts)} rows"],)
    out = write_study(tmp_path, points, meta, extra)
    for f in ("points.parquet", "points.csv", "crossover.csv", "study.md"):
        assert (tmp_path / f).is_file()
    assert out["plot"].is_file() and out["plot"].with_suffix(".svg").is_file()
    cross = crossover_table(points, "eviction")
    ttft = cross[cross["metric"] == "ttft_p50"].iloc[0]
    assert ttft["x_first"] == 10000
    text = (tmp_path / "study.md").read_text()
    assert "> 3% better from 10,000 evictable leaves" in text
    assert text.rstrip().endswith("## An extra section\n3 rows")  # after the method
    # the load of every point is stated, and the verdict warns when its largest point queues
    rows = [x for x in text.splitlines() if x.startswith("| ") and "| persistent-heap |" in x]
    assert [x.split(" | ")[-2] for x in rows] == ["served", "served", "overloaded: heapify"]
    assert "(overloaded there: heapify; its latency ratios include queueing)" in text


def test_point_rows_against_the_best_variant(study_tables) -> None:
    """``best``: every variant (baseline included) set against the best one as well; against
    itself a variant reads 1, and with the baseline as the best the candidate's figures are
    the baseline comparison's, turned around for TTFT."""
    req, ops, ts = study_tables()
    (row,) = point_rows(req, ops, ts, family="eviction", baseline="base", candidates=["cand"],
                        best="base")  # fmt: skip
    assert row["best"] == "base"
    assert row["base_throughput_vs_best_ratio"] == pytest.approx(1.0)
    assert row["base_ttft_p50_vs_best_ratio"] == pytest.approx(1.0)
    assert row["cand_throughput_vs_best_ratio"] == pytest.approx(row["throughput_ratio"])
    assert row["cand_ttft_p50_vs_best_ratio"] == pytest.approx(1 / row["ttft_p50_ratio"])
    assert row["cand_ttft_p50_vs_best_lo"] <= row["cand_ttft_p50_vs_best_ratio"]
    assert row["op_p99_base_ns"] >= row["op_base_ns"] and row["op_p99_cand_ns"] > 0
    (plain,) = point_rows(req, ops, ts, family="eviction", baseline="base", candidates=["cand"])
    assert "best" not in plain and "cand_throughput_vs_best_ratio" not in plain
