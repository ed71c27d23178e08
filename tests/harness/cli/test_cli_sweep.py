"""``radixbench sweep``: what an interrupted sweep says it kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.harness.cli import main
from radixbench.harness.config.grid import load_grid

GRID = """
scenario = "mooncake-conversation"
[base]
arrivals.max_requests = 25
[grid]
"sim.kv_capacity_tokens" = [60000, 120000, 240000]
[variants]
evictors = ["heapify", "persistent-heap"]
matchers = ["galloping"]
"""


@pytest.fixture
def grid_file(tmp_path: Path) -> Path:
    p = tmp_path / "g.toml"
    p.write_text(GRID)
    return p


@pytest.mark.parametrize("finished", [2, 0])
def test_interrupted_sweep_says_how_many_cells_it_kept_and_where(
    grid_file, tmp_path, monkeypatch, capsys, finished: int
) -> None:
    """Ctrl-C after some cells finished: the message counts them, names their folder and says
    a rerun resumes, never "no run folder was written"."""
    import radixbench.harness.cli.sweep as cli_sweep

    grid = load_grid(grid_file)
    out = tmp_path / "sw"

    def interrupted(grid_, out_, *args, **kwargs):
        for cell in grid.cells[:finished]:
            (out / "cells" / cell.key).mkdir(parents=True)
            (out / "cells" / cell.key / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_sweep, "run_sweep", interrupted)
    assert main(["sweep", str(grid_file), "--out", str(out), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "no run folder" not in err and str(out / "cells") in err, err
    if finished:
        assert "2 of 3 cells finished and kept in" in err and "again to resume" in err, err
    else:
        assert "no cell of 3 finished" in err, err
