"""A sweep says why a point was not compared (issue 31 item 11: the bundled
examples/grid-kv-capacity.toml answered "not compared" at every point with no reason), and the
bundled grid compares its evictors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.harness.cli import sweep as cli_sweep
from radixbench.harness.config.grid import load_grid
from radixbench.harness.experiments.sweep import SweepOutcome, gather, run_cell

GRID = """
scenario = "mooncake-conversation"
[base]
arrivals.max_requests = 20
[grid]
"sim.kv_capacity_tokens" = [4000000]
[variants]
evictors = ["heapify", "persistent-heap"]
matchers = ["galloping"]
"""

EXAMPLE = Path(__file__).parents[3] / "examples" / "grid-kv-capacity.toml"


def test_a_point_not_compared_says_why(tmp_path: Path) -> None:
    grid_file = tmp_path / "g.toml"
    grid_file.write_text(GRID)
    grid = load_grid(grid_file)
    (cell,) = grid.cells
    run_cell(cell, str(tmp_path / "cells"))
    res = gather(grid, tmp_path / "cells")
    reason = "evictor: evict ran 0 times: the evictors were not compared (the KV pool never filled)"
    assert list(res["not_compared"]) == [reason, reason]  # every variant row of the point


def test_the_sweep_prints_why(tmp_path: Path, capsys, monkeypatch) -> None:
    """The CLI lists each point not compared with the reason, after the table."""
    grid_file = tmp_path / "g.toml"
    grid_file.write_text(GRID)
    why = "evictor: evict ran 0 times"
    res = pd.DataFrame(
        {"sim.kv_capacity_tokens": [4000000, 4000000], "variant": ["a", "b"], "seed": [0, 0],
         "cell": ["k", "k"], "overloaded": [False, False], "not_compared": [why, why]}
    )  # fmt: skip
    outcome = SweepOutcome(tmp_path, res, 0, 1, [], [])
    monkeypatch.setattr(cli_sweep, "run_sweep", lambda *a, **k: outcome)
    assert main(["sweep", str(grid_file), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert f"not compared:\n  sim.kv_capacity_tokens=4000000, seed 0: {why}\n" in out


@pytest.mark.slow  # one cell of the bundled grid: 2 variants + the A/A replica
def test_the_bundled_grid_compares_its_evictors(tmp_path: Path) -> None:
    grid = load_grid(EXAMPLE)
    cell = min(grid.cells, key=lambda c: c.params["sim.kv_capacity_tokens"])
    run_cell(cell, str(tmp_path / "cells"))
    res = gather(grid, tmp_path / "cells")
    cand = res[res["evictor"] == "persistent-heap"].iloc[0]
    assert cand["evict_verdict"] != "not compared", cand["not_compared"]
    assert cand["evict_verdict"] == "faster"  # heapify re-heapifies every leaf, every call
