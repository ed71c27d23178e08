"""What the commands print (issue 31, item 11): terminal tables with units and readable numbers,
``--expect-divergence`` when nothing diverged, ``profile``'s tables printed once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.harness.cli.tables import fmt_number, text_table
from radixbench.harness.profiling.scalene_profile import SOURCE_ROOT, ProfileOutcome


def test_numbers_keep_three_digits_and_thousands_separators() -> None:
    got = [fmt_number(x) for x in (0.475, 3.1333, 14.788, 530.600589, 4277562.60, 102400, 0.0)]
    assert got == ["0.475", "3.13", "14.8", "530.6", "4,277,562.6", "102,400", "0"]
    assert fmt_number(float("nan")) == fmt_number(None) == "-"
    rates = text_table(pd.DataFrame({"hit_rate": [0.0391, 0.388], "imbalance": [1.11, 1.2]}))
    assert [ln.split() for ln in rates.splitlines()[1:]] == [["0.039", "1.11"], ["0.388", "1.20"]]


def test_a_table_shows_one_unit_per_kind_in_its_headers() -> None:
    df = pd.DataFrame(
        {
            "variant": ["a/b", "c"],
            "p50_ns": [35267.5, 4883443.95],
            "total_ms": [34.304382, 178.152148],
            "ttft_p50_s": [0.014788, 1.5],
            "route_p99_us": [12.25, None],
            "output_throughput": [4277562.60, 530.600589],
            "count": [174, 600],
        }
    )
    lines = text_table(df).splitlines()
    assert lines[0].split() == ["variant", "p50_us", "total_ms", "ttft_p50_ms", "route_p99_us",
                                "output_throughput", "count"]  # fmt: skip
    assert lines[1].split() == ["a/b", "35.3", "34.3", "14.8", "12.2", "4,277,562.6", "174"]
    assert lines[2].split() == ["c", "4,883.4", "178.2", "1,500.0", "-", "530.6", "600"]
    assert lines[1].startswith("a/b ")  # text left aligned, numbers right aligned
    assert lines[0].endswith("count") and lines[1].endswith("174")


def test_compare_prints_no_raw_floats_and_no_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "prefix-repetition", "--requests", "60", "--evictors", "heapify,lru-list",
            "--matchers", "linear", "--reference", "none", "--kv-capacity", "20000",
            "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    tables = out.split("\nscenario:")[0] + out.split("serving metrics")[1].split("wall time")[0]
    for whole, frac in re.findall(r"(\d[\d,]*)\.(\d+)", tables):  # not 530.600589, 4277562.60
        digits = (whole.replace(",", "").lstrip("0") + frac).lstrip("0")
        assert len(digits) <= max(3, len(whole.replace(",", "")) + 1), (whole, frac)
        assert "," in whole or len(whole) < 4, whole
    assert not re.search(r"\b\w+_s\b", tables.replace("_per_s", "")), tables  # ms, never s
    assert "ttft_p50_ms" in tables and "p50_us" in tables and "median_ttft_ms" in tables


def test_expect_divergence_says_when_nothing_diverged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "prefix-repetition", "--requests", "60", "--evictors", "heapify,lru-list",
            "--matchers", "linear", "--reference", "none", "--out", str(tmp_path), "--no-progress",
            "--expect-divergence"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "--expect-divergence: no divergence: all 3 variants saw identical prefix hits for all "
        "60 requests" in out
    )
    assert main([*argv, "--summary-only"]) == 0
    assert "--expect-divergence: no divergence" in capsys.readouterr().out


def _fake_profile(tmp_path: Path, files: dict[str, list[int]]) -> ProfileOutcome:
    profile = {
        "elapsed_time_sec": 1.0,
        "files": {
            f: {"lines": [{"lineno": n, "n_cpu_percent_python": 10.0 - i, "line": "x = 1"}
                          for i, n in enumerate(lines)]}
            for f, lines in files.items()
        },
    }  # fmt: skip
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    return ProfileOutcome(tmp_path, path, None, None, True)


@pytest.mark.parametrize("outside", [False, True])
def test_profile_prints_the_hottest_lines_table_once(
    outside: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """When every hot line is in cache/ and sim/, the second table repeated the first."""
    import radixbench.harness.profiling.scalene_profile as scalene_profile

    files = {str(SOURCE_ROOT / "cache" / "radix_cache.py"): [10, 20]}
    if outside:
        files[str(SOURCE_ROOT / "workloads" / "trace.py")] = [5]
    outcome = _fake_profile(tmp_path, files)
    monkeypatch.setattr(scalene_profile, "profile_compare", lambda *a, **k: outcome)
    argv = ["profile", "prefix-repetition", "--requests", "10", "--reference", "none",
            "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    tables = out.count("cpu %")
    assert tables == (2 if outside else 1), out
    if not outside:
        assert "the hottest lines above are all in the cache and simulator" in out


def test_compare_prints_the_answer_before_the_plots_are_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: the answer comes before the report's slowest part (the plots are drawn once
    their results are asked); the run folder then holds every plot, and the last line names
    it."""
    from radixbench.reports.drawing import Drawing

    real = Drawing.results

    def marked(self):  # type: ignore[no-untyped-def]
        print("<drawing plots>")
        yield from real(self)

    monkeypatch.setattr(Drawing, "results", marked)
    argv = ["compare", "prefix-repetition", "--requests", "40", "--evictors", "heapify",
            "--matchers", "linear", "--reference", "none", "--kv-capacity", "20000",
            "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.index("\nanswer:\n") < out.index("<drawing plots>") < out.index("\nwall time")
    run = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert (run / "plots" / "op_cdf.png").stat().st_size > 0
    assert out.rstrip().splitlines()[-1].endswith(str(run / "report.md"))
