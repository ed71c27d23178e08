"""Smoke test of ``radixbench bench cache --quick``: runs, writes csv/plots/markdown, and its
figures are consistent (every variant timed, ratios computed against the reference)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from radixbench.cache import EVICTORS, MATCHERS
from radixbench.harness.bench_cache import BenchSpec, bench_evict
from radixbench.harness.cli import main
from radixbench.harness.cmd_bench import targets


def test_bench_cache_quick_writes_report(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    md = tmp_path / "B.md"
    assert main(["bench", "cache", "--quick", "--out", str(tmp_path), "--markdown", str(md)]) == 0
    df = pd.read_csv(tmp_path / "bench_cache.csv")
    match = df[df.bench == "match"]
    assert set(match.variant) == {"array==", *MATCHERS}
    ref = match[match.variant == "array=="]
    assert (ref.x_array_eq == 1.0).all()
    assert set(df[df.bench == "evict"].variant) >= set(EVICTORS)
    assert (df.median_ns > 0).all()
    for png in ("match_vs_len.png", "evict_vs_leaves.png"):
        assert (tmp_path / png).stat().st_size > 0
    text = md.read_text()
    assert "## Machine" in text and "| target |" in text
    assert capsys.readouterr().out.startswith("# Cache microbenchmarks")
    assert len(targets(df)) == 4


def test_bench_evict_rejects_disagreeing_evictors(monkeypatch: pytest.MonkeyPatch) -> None:
    from radixbench.cache.evictor import LRUListEvictor

    monkeypatch.setattr(LRUListEvictor, "evict", lambda self, host, n: ([], 0))
    with pytest.raises(RuntimeError, match="disagree"):
        bench_evict(BenchSpec((1000,), 10, (200,), 16, 10, 1))


def test_bench_usage_error(capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", "nothing"]) == 2
    assert "invalid choice" in capsys.readouterr().err
