"""Sweep grids over clusters: instances x load cells, each one grid point running every router
interleaved, keyed apart, routers defaulting to the scenario's ``[cluster]``."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.harness.config.grid import GridError, load_grid

GRID = """description = "routers x instances x load"
scenario = "multi-turn"
[base]
"arrivals.max_requests" = 20
[grid]
"cluster.instances" = [1, 2, 4]
"arrivals.rate_scale" = [1.0, 2.0]
[variants]
evictors = ["heapify"]
matchers = ["galloping"]
routers = ["round-robin", "cache-aware"]
"""


def test_cells_per_instances_and_load_with_every_router(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(GRID)
    grid = load_grid(path)
    assert len(grid.cells) == 3 * 2
    assert len({c.key for c in grid.cells}) == len(grid.cells)
    cell = next(c for c in grid.cells if c.params["cluster.instances"] == 4)
    scenario = cell.load()
    assert [dict(v.extra)["router"] for v in scenario.variants] == ["round-robin", "cache-aware"]
    assert {dict(v.extra)["instances"] for v in scenario.variants} == {"4"}
    assert scenario.cluster is not None
    assert scenario.cluster.routers == ("round-robin", "cache-aware")


def test_routers_default_to_the_scenario_cluster(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        GRID.replace('routers = ["round-robin", "cache-aware"]\n', "").replace(
            "[base]\n", '[base]\n"cluster.routers" = ["random", "precise"]\n'
        )
    )
    routers = {dict(v.extra)["router"] for c in load_grid(path).cells for v in c.load().variants}
    assert routers == {"random", "precise"}
    path.write_text(GRID.replace('"cache-aware"]', '"nope"]'))
    with pytest.raises(GridError, match=r"cluster\.routers"):
        load_grid(path)
