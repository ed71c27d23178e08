"""``bench peers``' memory slope (case m): the fit, the text, and the runs it makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.bench.peers_memory import MemoryPoint, fit, memory_text, run_memory


def _points(rss: list[float]) -> list[MemoryPoint]:
    return [MemoryPoint(n, r, 1.0, 2.0) for n, r in zip((1, 2, 4, 8), rss)]


def test_fit_gives_the_line_and_the_largest_distance_from_it() -> None:
    slope, icept, worst = fit(_points([600.0, 650.0, 750.0, 950.0]))  # 550 + 50 n exactly
    assert slope == pytest.approx(50.0) and icept == pytest.approx(550.0) and worst < 1e-9
    slope, icept, worst = fit(_points([600.0, 650.0, 760.0, 950.0]))
    assert 0 < worst <= 10.0 and slope == pytest.approx(50.0, abs=2.0)
    with pytest.raises(ValueError, match="two instance counts"):
        fit(_points([600.0]))


def test_text_states_the_slope_and_the_target_at_the_largest_count() -> None:
    text = memory_text(_points([600.0, 650.0, 750.0, 1100.0]), None)
    assert "whole trace" in text and "MB per instance" in text
    assert "8 instances within 1,024 MB peak RSS: NOT MET (1,100 MB)" in text
    assert ": MET (950 MB)" in memory_text(_points([600.0, 650.0, 750.0, 950.0]), 200)


def test_run_memory_runs_the_cluster_at_each_count(tmp_path: Path) -> None:
    points = run_memory(tmp_path, 20, instances=(1, 2))
    assert [p.instances for p in points] == [1, 2]
    assert all(p.rss_mb > 0 and p.cpu_s > 0 for p in points)
