"""``radixbench diff RUN_A RUN_B``: two saved runs side by side, and ``compare
--summary-only`` (the block a reviewer pastes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.harness.cli import main
from radixbench.reports.tables import read_table


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two runs of the same small comparison (two evictors, the A/A replica)."""
    out = tmp_path_factory.mktemp("runs")
    runs = []
    for name in ("a", "b"):
        argv = ["compare", "eviction-pressure", "--requests", "1800", "--out",
                str(out / name), "--no-progress"]  # fmt: skip
        assert main(argv) == 0
        (run,) = (out / name).iterdir()
        runs.append(run)
    return runs[0], runs[1]


def test_diff_prints_ratios_with_cis_and_writes_md_and_html(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = two_runs
    assert main(["diff", str(a), str(b), "--out", str(tmp_path), "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# radixbench diff: {a} vs {b}")
    assert f"- Equivalence: {a} PASS, {b} PASS." in out
    assert "| heapify/galloping/numpy | evict |" in out and "| ci_low |" in out
    (folder,) = tmp_path.iterdir()
    assert (folder / "diff.md").read_text(encoding="utf-8").startswith("# radixbench diff")
    assert "<table" in (folder / "diff.html").read_text(encoding="utf-8")
    ops = read_table(folder, "diff_ops")
    evict = ops[(ops["op"] == "evict") & (ops["variant"] == "persistent-heap/galloping/numpy")]
    row = evict.iloc[0]
    assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
    assert row["aa_low"] < 1 < row["aa_high"]  # the runs' A/A noise floor
    req = read_table(folder, "diff_requests")
    hit = req[req["metric"] == "prefix hit rate"]
    assert (hit["a"] == hit["b"]).all()  # same seed, same trace: same hits


@pytest.mark.parametrize("case", ["missing", "same", "not-a-run"])
def test_diff_bad_input_is_one_line(
    case: str, two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = two_runs[0]
    other = {"missing": tmp_path / "nope", "same": a, "not-a-run": tmp_path}[case]
    assert main(["diff", str(a), str(other), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("radixbench: error:") and "Traceback" not in err[0]
    assert not (tmp_path / "out").exists()


def test_summary_only_prints_the_pr_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "eviction-pressure", "--requests", "1800", "--evictors",
            "heapify,persistent-heap", "--out", str(tmp_path), "--no-progress",
            "--summary-only"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("### radixbench: eviction-pressure")
    assert "| evict | persistent-heap/galloping/numpy vs heapify/galloping/numpy |" in out
    assert "(A/A " in out and "- Equivalence: PASS" in out
    assert "- Reproduce: `radixbench compare eviction-pressure --requests 1800" in out
    assert "answer:" not in out  # only the block
    (run,) = tmp_path.iterdir()
    md = (run / "report.md").read_text(encoding="utf-8")
    assert md.index("## Summary (for a PR comment)") < md.index("## Answer")
