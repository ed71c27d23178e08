"""End-to-end tests for radixbench.reports.pipeline.write_report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from radixbench.reports.pipeline import write_report
from radixbench.reports.tables import read_table

PLOT_NAMES = (
    "verdict_bars",
    "op_cdf",
    "evict_vs_leaves",
    "cost_vs_tree",
    "match_vs_len",
    "match_vs_matched",
    "request_cdfs",
    "hit_rate_over_time",
)

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
    "verdicts.parquet",
    "verdicts.csv",
    "report.md",
    "report.html",
    *(f"plots/{name}.png" for name in PLOT_NAMES),  # SVG only with svg=True
}


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_write_report_end_to_end(tmp_path, requests_df, ops_df, meta, equivalence_ok) -> None:
    run_dir = tmp_path / "run"
    result = write_report(run_dir, requests_df, ops_df, meta, equivalence_ok, n_resamples=200)
    assert _files(run_dir) == EXPECTED_FILES  # and no temp files
    assert result["report_md"] == run_dir / "report.md"
    assert set(result["tables"]) == {
        "requests",
        "ops",
        "summary_ops",
        "summary_variants",
        "speedups",
        "verdicts",
    }
    assert {f"plots/{p.name}" for p in result["plots"].values()} == {
        f for f in EXPECTED_FILES if f.endswith(".png")
    }
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
    # old run: no time series, metrics, ceiling or environment -> those parts are simply absent
    assert "kv_queue_over_time" not in text and "## Serving metrics" not in text
    assert "ceiling" not in text
    assert "- **CPU model**: n/a" in text
    # verdicts: heapify vs persistent-heap on evict, linear vs galloping on match_prefix
    verdicts = result["verdicts"]
    pd.testing.assert_frame_equal(read_table(run_dir, "verdicts"), verdicts)
    fast = verdicts[verdicts["metric"].isin(["evict ns", "match_prefix ns"])]
    assert len(fast) == 4 and (fast["verdict"] == "faster").all()
    assert "## Verdicts" in text and "| evict ns | ns | persistent-heap/linear/chain |" in text


def test_new_tables_and_meta_are_rendered(
    tmp_path, requests_df, ops_df, meta, equivalence_ok, timeseries_df, metrics_df
) -> None:
    meta = meta.replace(
        clock="coupled",
        hit_rate_ceiling={"all": 0.5, "last_half": 0.625},
        spec={"max_requests": 10, "trace": None},
        environment={"cpu": "Test CPU", "cores": 2, "cuda_device": None, "git_commit": "abc"},
    )
    result = write_report(
        tmp_path,
        requests_df,
        ops_df,
        meta,
        equivalence_ok,
        timeseries=timeseries_df,
        metrics=metrics_df,
        n_resamples=50,
    )
    assert {"timeseries", "metrics"} <= set(result["tables"])
    pd.testing.assert_frame_equal(read_table(tmp_path, "timeseries"), timeseries_df)
    assert (tmp_path / "plots" / "kv_queue_over_time.png").is_file()
    assert not (tmp_path / "plots" / "kv_queue_over_time.svg").exists()
    text = result["report_md"].read_text(encoding="utf-8")
    assert "- **clock mode**: coupled (measured CPU time advances simulated time)" in text
    assert "vs ceiling 50.0 %" in text and "last half of the trace: 62.5 %" in text
    assert "## Serving metrics" in text and "prefix_hit_rate_last_half" in text
    assert "- **CPU model**: Test CPU" in text and "- **CUDA device**: none" in text
    assert "![kv_queue_over_time](plots/kv_queue_over_time.png)" in text
    html = result["report_html"].read_text(encoding="utf-8")
    assert "Test CPU" in html and "vs ceiling 50.0 %" in html
    # the hit rate with its bounds is part of the first screen: before the run settings
    assert text.index("**Prefix hit rate**") < text.index("## Run")
    assert html.index("<strong>Prefix hit rate</strong>") < html.index("<h2>Run</h2>")


def test_bad_timeseries_writes_nothing(tmp_path, requests_df, ops_df, meta, equivalence_ok):
    with pytest.raises(ValueError, match="timeseries table: missing column 'queue_len'"):
        write_report(
            tmp_path / "run",
            requests_df,
            ops_df,
            meta,
            equivalence_ok,
            timeseries=pd.DataFrame({"variant": ["a"], "sim_time_s": [0.0]}),
        )
    assert not (tmp_path / "run").exists()


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


def test_unrendered_report_writes_the_same_tables_only(
    tmp_path, requests_df, ops_df, meta, equivalence_ok
) -> None:
    full = write_report(
        tmp_path / "full", requests_df, ops_df, meta, equivalence_ok, n_resamples=50
    )
    bare = write_report(
        tmp_path / "bare", requests_df, ops_df, meta, equivalence_ok, n_resamples=50, render=False
    )
    tables_only = {f for f in EXPECTED_FILES if not f.startswith("plots/") and ".md" not in f}
    assert _files(tmp_path / "bare") == tables_only - {"report.html"}
    assert bare["report_md"] is None and bare["report_html"] is None and bare["plots"] == {}
    for stem in full["tables"]:
        pd.testing.assert_frame_equal(
            read_table(tmp_path / "bare", stem), read_table(tmp_path / "full", stem)
        )


def test_unrendered_report_still_validates(tmp_path, requests_df, ops_df, meta, equivalence_ok):
    with pytest.raises(ValueError, match="ops"):
        write_report(
            tmp_path / "run",
            requests_df,
            ops_df.drop(columns=["ns"]),
            meta,
            equivalence_ok,
            render=False,
        )
    assert not (tmp_path / "run").exists()


def test_svg_on_request_and_progress_on_stderr(
    tmp_path, requests_df, ops_df, meta, equivalence_ok, capsys
) -> None:
    result = write_report(
        tmp_path / "run",
        requests_df,
        ops_df,
        meta,
        equivalence_ok,
        n_resamples=20,
        svg=True,
        progress=True,
    )
    svgs = {f"plots/{name}.svg" for name in PLOT_NAMES}
    assert _files(tmp_path / "run") == EXPECTED_FILES | svgs
    for png in result["plots"].values():
        assert "<svg" in png.with_suffix(".svg").read_text(encoding="utf-8")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "report" in captured.err and "step" in captured.err  # the tqdm bar, on stderr
    write_report(
        tmp_path / "quiet",
        requests_df,
        ops_df,
        meta,
        equivalence_ok,
        n_resamples=20,
        progress=False,
    )
    assert capsys.readouterr().err == ""


def test_import_does_not_load_matplotlib() -> None:
    """matplotlib is imported when a report is rendered, not by importing the pipeline (the
    compare CLI imports it before its first simulated event)."""
    import subprocess
    import sys

    code = "import sys, radixbench.reports.pipeline; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_package_imports_nothing() -> None:
    """``import radixbench.reports`` loads no report module, no pandas and no tqdm, and a
    module of it (the run record) loads what it needs, not the pipeline."""
    import subprocess
    import sys

    code = (
        "import sys, radixbench.reports; a = sorted(m for m in sys.modules if m.startswith("
        "('pandas', 'tqdm', 'radixbench.reports.'))); import radixbench.reports.record; "
        "print(a, 'radixbench.reports.pipeline' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] False"


def test_answer_html_renders_inline_code() -> None:
    from radixbench.reports.headline import ISOLATED_NOTE, Answer
    from radixbench.reports.html import answer_html

    out = answer_html(Answer([], ["evict: a <b> `x`"], [ISOLATED_NOTE]))
    assert "<code>--clock coupled</code>" in out and "`" not in out
    assert "a &lt;b&gt; <code>x</code>" in out
