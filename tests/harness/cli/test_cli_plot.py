"""Tests for ``radixbench plot RUN_DIR``: re-rendering a real run folder from its Parquet."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.reports.tables import read_table


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One real (tiny) compare run on the bundled Mooncake trace."""
    out = tmp_path_factory.mktemp("runs")
    argv = ["compare", "--requests", "30", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    (run,) = out.iterdir()
    return run


def test_plot_rerenders_everything(run_dir, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    verdicts = read_table(run, "verdicts")
    md = (run / "report.md").read_text()
    shutil.rmtree(run / "plots")
    for name in ("report.md", "report.html", "verdicts.parquet", "summary_ops.parquet"):
        (run / name).unlink()
    assert main(["plot", str(run)]) == 0
    out = capsys.readouterr().out
    assert "report: " in out and "report.html" in out
    assert sorted(p.name for p in run_dir.joinpath("plots").iterdir()) == sorted(
        p.name for p in (run / "plots").iterdir()
    )
    # seeded bootstrap: the re-rendered verdicts equal the original ones
    pd.testing.assert_frame_equal(read_table(run, "verdicts"), verdicts)
    new_md = (run / "report.md").read_text()
    assert new_md.split("## Plots")[0] == md.split("## Plots")[0]
    assert (run / "report.html").stat().st_size > 10_000


def test_plot_restores_the_runs_baseline(tmp_path) -> None:
    """A ``--baseline persistent-heap`` run re-renders against persistent-heap, not against
    the first evictor listed (the record keeps the baseline)."""
    out = tmp_path / "runs"
    argv = ["compare", "eviction-pressure", "--requests", "1800", "--baseline", "persistent-heap",
            "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    (run,) = out.iterdir()
    verdicts = read_table(run, "verdicts")
    evict = verdicts[verdicts["axis"] == "evictor"]
    assert len(evict) and set(evict["baseline"]) == {"persistent-heap/galloping/numpy"}
    (run / "verdicts.parquet").unlink()
    assert main(["plot", str(run), "--no-progress"]) == 0
    pd.testing.assert_frame_equal(read_table(run, "verdicts"), verdicts)


def test_plot_of_a_version_1_run_takes_the_axes_from_its_config(run_dir, tmp_path) -> None:
    """A run written before variants had axis columns (schema 1) re-renders from its
    config.json's variant records."""
    import json

    run = tmp_path / "v1"
    shutil.copytree(run_dir, run)
    evictors = set(read_table(run, "summary_ops")["evictor"].dropna())
    assert {"heapify", "persistent-heap"} <= evictors
    for stem in ("requests", "ops", "timeseries", "metrics"):
        df = read_table(run, stem)
        df.drop(columns=["impl", "evictor", "matcher", "flatten"]).to_parquet(
            run / f"{stem}.parquet"
        )
    doc = json.loads((run / "config.json").read_text())
    for key in ("schema", "variants", "command", "max_running", "baseline"):
        doc.pop(key, None)
    (run / "config.json").write_text(json.dumps(doc))
    assert main(["plot", str(run), "--resamples", "20", "--no-progress"]) == 0
    assert set(read_table(run, "summary_ops")["evictor"].dropna()) == evictors
    assert "Load: served" in (run / "report.md").read_text()  # max_running from spec


def test_plot_old_run_without_config(run_dir, tmp_path) -> None:
    run = tmp_path / "old"
    shutil.copytree(run_dir, run)
    (run / "config.json").unlink()
    assert main(["plot", str(run), "--resamples", "20"]) == 0
    text = (run / "report.md").read_text()
    assert "## Equivalence: PASS" in text and "- **CPU model**: n/a" in text


@pytest.mark.parametrize("case", ["missing", "file", "empty", "corrupt", "bad_json"])
def test_bad_run_dir_is_a_one_line_error(case, run_dir, tmp_path, capsys) -> None:
    target = tmp_path / "x"
    if case == "file":
        target.write_text("not a folder")
    elif case == "empty":
        target.mkdir()
    elif case in ("corrupt", "bad_json"):
        shutil.copytree(run_dir, target)
        if case == "corrupt":
            (target / "ops.parquet").write_bytes(b"PAR1 garbage")
        else:
            (target / "config.json").write_text("{\n  oops")
    before = sorted(p.name for p in target.rglob("*")) if target.is_dir() else None
    assert main(["plot", str(target)]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("radixbench: error:"), err
    assert str(target) in lines[0]
    if case == "bad_json":
        assert "config.json:2" in lines[0]
    if before is not None:
        assert sorted(p.name for p in target.rglob("*")) == before  # nothing written
