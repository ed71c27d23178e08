"""Tests for radixbench.reports.markdown: report.md content, tables, links, atomicity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.axes import VariantSet
from radixbench.reports.markdown import format_cell, pipe_table, write_report_md
from radixbench.reports.record import RunMeta
from radixbench.reports.summary import op_summary, speedups, variant_summary

BASELINE = {"evictor": "heapify", "matcher": "linear"}


def _speedups(ops_sum, ops_df):
    vs = VariantSet.from_frames(ops_df)
    return speedups(ops_sum, vs.resolve_baseline(BASELINE), vs)


def _write(run_dir: Path, requests_df, ops_df, meta, equivalence) -> str:
    ops_sum = op_summary(ops_df)
    plots = {"op_cdf": run_dir / "plots" / "op_cdf.png"}
    tables = {"ops": (run_dir / "ops.parquet", run_dir / "ops.csv")}
    path = write_report_md(
        run_dir,
        meta=meta,
        op_summary=ops_sum,
        variant_summary=variant_summary(requests_df),
        speedups=_speedups(ops_sum, ops_df),
        equivalence=equivalence,
        plots=plots,
        tables=tables,
    )
    assert path == run_dir / "report.md"
    return path.read_text(encoding="utf-8")


def test_pass_report(tmp_path, requests_df, ops_df, meta, equivalence_ok) -> None:
    text = _write(tmp_path, requests_df, ops_df, meta, equivalence_ok)
    # the title states what ran (issue 31 item 11)
    assert text.startswith("# radixbench report: synthetic-smoke — 300 requests\n")
    assert "## Equivalence: PASS" in text
    assert "identical `prefix_hit_tokens` for all 300 requests" in text
    assert "FAILED" not in text
    for line in (
        "- **scenario**: synthetic-smoke",
        "- **requests**: 300",
        "- **seed**: 1234",
        "- **device**: cpu",
        "- **clock mode**: isolated",
        "- **wall time**: 12.3 s",
    ):
        assert line in text
    # every variant appears in the variant table, every op in the op table
    for variant in equivalence_ok["variants"]:
        assert f"| {variant} | 300 |" in text
    assert "| evict | persistent-heap/linear/chain | heapify/linear/chain |" in text
    # relative links only
    assert "![op_cdf](plots/op_cdf.png)" in text
    assert "[parquet](ops.parquet) | [csv](ops.csv)" in text
    assert str(tmp_path) not in text
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_table_links_say_where_no_csv_was_written(tmp_path: Path) -> None:
    from radixbench.reports.markdown import table_links

    tables = {"ops": (tmp_path / "ops.parquet", None), "requests": (tmp_path / "r.parquet",
              tmp_path / "r.csv")}  # fmt: skip
    assert table_links(tables, tmp_path) == [
        "- `ops`: [parquet](ops.parquet) | no CSV (more rows than a spreadsheet holds)",
        "- `requests`: [parquet](r.parquet) | [csv](r.csv)",
    ]


def test_failed_equivalence_is_loud(tmp_path, requests_df, ops_df, meta, equivalence_bad) -> None:
    text = _write(tmp_path, requests_df, ops_df, meta, equivalence_bad)
    head = text.split("## Run")[0]
    assert "EQUIVALENCE FAILED" in head  # flagged before anything else
    assert "## Equivalence: FAILED" in text
    assert "PASS" not in text
    assert "**First differing request: rid 17**" in text
    section = text.split("## Equivalence: FAILED")[1].split("## Variants")[0]
    assert "| persistent-heap/galloping/chain | 1536 |" in section
    for variant in ("heapify/linear/chain", "heapify/galloping/chain"):
        assert f"| {variant} | 1024 |" in section


def test_failed_equivalence_without_diff(tmp_path, requests_df, ops_df, meta) -> None:
    eq = {"ok": False, "n_requests": 3, "variants": ["a/b/c"], "first_diff": None}
    text = _write(tmp_path, requests_df, ops_df, meta, eq)
    assert "## Equivalence: FAILED" in text
    assert "No first differing request was recorded." in text


def test_missing_meta_defaults(tmp_path, requests_df, ops_df, equivalence_ok) -> None:
    meta = RunMeta.from_json({"scenario": "s", "note": "x"})  # an unknown key: an extra row
    text = _write(tmp_path, requests_df, ops_df, meta, equivalence_ok)
    assert "- **clock mode**: isolated" in text
    assert "- **seed**: n/a" in text
    assert "- **note**: x" in text


def test_failed_write_keeps_old_report(
    tmp_path, requests_df, ops_df, meta, equivalence_ok, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "report.md").write_text("old report\n", encoding="utf-8")

    def boom(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_text", boom)
    with pytest.raises(OSError, match="disk full"):
        _write(tmp_path, requests_df, ops_df, meta, equivalence_ok)
    monkeypatch.undo()
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == "old report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_pipe_table_format() -> None:
    df = pd.DataFrame(
        {"name": ["a|b", "c"], "n": np.array([1, 22], dtype=np.int64), "x": [0.5, np.nan]}
    )
    assert pipe_table(df).splitlines() == [
        "| name | n | x |",
        "| :--- | ---: | ---: |",
        "| a\\|b | 1 | 0.5 |",
        "| c | 22 | n/a |",
    ]
    assert pipe_table(df.iloc[0:0]) == "_no rows_"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1.23456789, "1.23457"),
        (12345.678, "12345.7"),
        (2_500_000.4, "2500000"),
        (float("inf"), "inf"),
        (np.float64("nan"), "n/a"),
        (np.int64(7), "7"),
        (None, "n/a"),
        ("x\ny", "x y"),
    ],
)
def test_format_cell(value, shown) -> None:
    assert format_cell(value) == shown


def test_report_leads_with_the_answer_and_flags_overload(
    tmp_path, requests_df, ops_df, meta, equivalence_ok
) -> None:
    from radixbench.reports.headline import Answer

    ans = Answer(
        load=["OVERLOADED (a/b/c): queue grows without bound", "Load: overloaded — GPU busy"],
        headline=["evict: persistent-heap 38× faster than heapify [35–41], 4,210 calls each"],
        serving=["Serving metrics (TTFT, TPOT, E2E) are identical"],
    )
    ops_sum = op_summary(ops_df)
    text = write_report_md(
        tmp_path,
        meta=meta,
        op_summary=ops_sum,
        variant_summary=variant_summary(requests_df),
        speedups=_speedups(ops_sum, ops_df),
        equivalence=equivalence_ok,
        plots={},
        tables={},
        answer=ans,
    ).read_text(encoding="utf-8")
    top = text.split("## Run")[0]  # everything before the run settings
    assert "> **OVERLOADED (a/b/c): queue grows without bound**" in top
    assert top.index("OVERLOADED") < top.index("## Answer") < top.index("### Serving effect")
    assert "- evict: persistent-heap 38× faster than heapify [35–41]" in top


def test_rendered_report_puts_the_answer_first(rendered_run) -> None:
    result, _ = rendered_run
    text = result["report_md"].read_text(encoding="utf-8")
    assert text.index("## Answer") < text.index("## Run") < text.index("## Verdicts")
    assert "- evict: persistent-heap" in text and "Load: served" in text
    assert "identical across variants by construction" in text  # isolated clock
    html = result["report_html"].read_text(encoding="utf-8")
    assert "<h2>Answer</h2>" in html and 'class="scroll"' in html
    assert html.index("<h2>Answer</h2>") < html.index("<h2>Run</h2>")
