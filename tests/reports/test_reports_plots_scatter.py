"""The scatter plots' axis-scale decision (issue 31 item 11): a log axis only where the values
span a decade; the demo's evicts see 1,096-1,112 evictable leaves and got a log x axis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from radixbench.reports import plots
from radixbench.reports.plotaxes import MIN_LOG_SPAN, axis_label, axis_scale


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    seen: list[Figure] = []
    real = plots._save

    def spy(fig: Figure, path: Path | str, **kwargs) -> Path:
        seen.append(fig)
        return real(fig, path, **kwargs)

    monkeypatch.setattr(plots, "_save", spy)
    return seen


def _evicts(leaves: np.ndarray) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    ns = rng.lognormal(10, 2, leaves.size)  # spans decades: log y
    return pd.DataFrame({"op": "evict", "variant": "heapify/linear/chain", "evictor": "heapify",
                         "ns": ns, "evictable_leaves": leaves})  # fmt: skip


def test_axis_scale_needs_a_decade() -> None:
    assert axis_scale([1096, 1104, 1112]) == "linear"
    assert axis_scale([10, 99]) == "linear" and axis_scale([10, 100]) == "log"
    assert axis_scale([0, -3, 5, 5 * MIN_LOG_SPAN]) == "log"  # non-positive values left out
    assert axis_scale([]) == "linear" and axis_scale([0, 0]) == "linear"
    assert axis_label("evict latency", "ns", "log") == "evict latency (ns, log scale)"
    assert axis_label("evictable leaves", "count", "linear") == "evictable leaves (count)"


def test_narrow_leaf_range_gets_a_linear_axis(tmp_path: Path, figures) -> None:
    leaves = np.random.default_rng(0).integers(1096, 1113, 2000)
    plots.plot_evict_vs_leaves(_evicts(leaves), tmp_path / "e.png")
    (ax,) = figures[0].axes
    assert ax.get_xscale() == "linear" and ax.get_yscale() == "log"
    assert "log scale" not in ax.get_xlabel() and "log scale" in ax.get_ylabel()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)  # counts: whole ticks


def test_wide_leaf_range_keeps_a_log_axis(tmp_path: Path, figures) -> None:
    leaves = np.geomspace(10, 100_000, 2000).round()
    plots.plot_evict_vs_leaves(_evicts(leaves), tmp_path / "e.png")
    (ax,) = figures[0].axes
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()
