"""End-to-end tests for radixbench.reports.write_report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from radixbench.reports import write_report
from radixbench.reports.tables import read_table

EXPECTED_FILES = {
    "requests.parquet",
    "requests.csv",
    "ops.parquet",
    "ops.csv",
    "summary_ops.parquet",
    "summary_ops.csv",
    "summary_variants.parquet",
    "summary_variants.csv",
    "speedups.parquet",
    "speedups.csv",
    "report.md",
    "plots/op_cdf.png",
    "plots/evict_vs_leaves.png",
    "plots/match_vs_len.png",
}


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_write_report_end_to_end(tmp_path, requests_df, ops_df, meta, equivalence_ok) -> None:
    run_dir = tmp_path / "run"
    result = write_report(run_dir, requests_df, ops_df, meta, equivalence_ok)
    assert _files(run_dir) == EXPECTED_FILES  # and no temp files
    assert result["report_md"] == run_dir / "report.md"
    assert set(result["tables"]) == {
        "requests",
        "ops",
        "summary_ops",
        "summary_variants",
        "speedups",
    }
    assert set(result["plots"]) == {"op_cdf", "evict_vs_leaves", "match_vs_len"}
    for path in result["plots"].values():
        assert path.stat().st_size > 2000
    pd.testing.assert_frame_equal(read_table(run_dir, "summary_ops"), result["op_summary"])
    pd.testing.assert_frame_equal(
        read_table(run_dir, "summary_variants"), result["variant_summary"]
    )
    pd.testing.assert_frame_equal(read_table(run_dir, "speedups"), result["speedups"])
    pd.testing.assert_frame_equal(read_table(run_dir, "requests"), requests_df)
    assert len(result["variant_summary"]) == 4
    assert len(result["speedups"]) == 4  # 2 evictor + 2 matcher comparisons
    text = result["report_md"].read_text(encoding="utf-8")
    assert "## Equivalence: PASS" in text
    assert "![evict_vs_leaves](plots/evict_vs_leaves.png)" in text


def test_custom_baseline_inverts_ratios(tmp_path, requests_df, ops_df, meta, equivalence_ok):
    result = write_report(
        tmp_path,
        requests_df,
        ops_df,
        meta,
        equivalence_ok,
        baseline={"evictor": "persistent-heap", "matcher": "galloping"},
    )
    speed = result["speedups"]
    assert set(speed["baseline_variant"].str.split("/").str[0]) <= {"persistent-heap", "heapify"}
    assert (speed[["p50_ratio", "p99_ratio"]] < 1.0).all().all()


@pytest.mark.parametrize("which", ["requests", "ops"])
def test_invalid_frame_writes_nothing(
    tmp_path, requests_df, ops_df, meta, equivalence_ok, which
) -> None:
    if which == "requests":
        requests_df = requests_df.drop(columns=["status"])
        match = "requests table: missing column 'status'"
    else:
        ops_df = ops_df.assign(ns=ops_df["ns"].astype(float))
        match = "ops table: column 'ns' has dtype float64"
    with pytest.raises(ValueError, match=match):
        write_report(tmp_path / "run", requests_df, ops_df, meta, equivalence_ok)
    assert not (tmp_path / "run").exists()
