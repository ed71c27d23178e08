from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.harness.grid import GridError, load_grid

GOOD = """
description = "d"
[base]
max_requests = 30
[base.sim]
max_running = 8
[grid]
"sim.kv_capacity_tokens" = [100000, 200000]
time_scale = [1, 2.5]
[variants]
evictors = ["heapify", "persistent-heap"]
matchers = ["galloping"]
seeds = [0, 1]
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "grid.toml"
    p.write_text(text)
    return p


def test_cartesian_product_and_stable_keys(tmp_path) -> None:
    grid = load_grid(_write(tmp_path, GOOD))
    assert grid.params == ("sim.kv_capacity_tokens", "time_scale")
    assert len(grid.cells) == 2 * 2 * 2 * 2
    keys = [c.key for c in grid.cells]
    assert len(set(keys)) == len(keys)
    assert keys == [c.key for c in load_grid(_write(tmp_path, GOOD)).cells]
    assert all(isinstance(c.params["time_scale"], float) for c in grid.cells)
    # Changing any value changes the affected keys only.
    other = load_grid(_write(tmp_path, GOOD.replace("200000", "300000")))
    assert len(set(keys) & {c.key for c in other.cells}) == len(keys) // 2


BAD = [
    ("bogus = 1\n" + GOOD, "unknown key 'bogus'"),
    (GOOD.replace("max_requests = 30", "max_request = 30"), "unknown key 'max_request'"),
    (GOOD.replace("max_running = 8", "max_runing = 8"), "unknown key 'sim.max_runing'"),
    (GOOD.replace("max_running = 8", 'max_running = "8"'), "base.sim.max_running: expected int"),
    (GOOD.replace("[100000, 200000]", "100000"), "expected a non-empty list"),
    (GOOD.replace("[100000, 200000]", "[100000, true]"), "expected int, got bool"),
    (GOOD.replace("[100000, 200000]", "[100000, -1]"), "kv_capacity_tokens must be positive"),
    (GOOD.replace('"heapify", ', '"heapfy", '), "unknown evictor 'heapfy'"),
    (GOOD.replace("seeds = [0, 1]", "seeds = [0.5]"), "seeds"),
    ("seeds = [1]\n" + GOOD, "both at top level and in [variants]"),
    (GOOD.replace("[variants]", "[variants]\nfoo = 1"), "variants: unknown key 'foo'"),
    ("[base]\nmax_requests = 3\n", "grid: needs at least one parameter"),
    ("[grid\n", "invalid TOML"),
]


@pytest.mark.parametrize(("text", "needle"), BAD)
def test_bad_grid_gives_one_line_error_with_file_and_key(tmp_path, text, needle) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(GridError) as err:
        load_grid(path)
    msg = str(err.value)
    assert str(path) in msg and needle in msg
    assert "\n" not in msg


def test_missing_file(tmp_path) -> None:
    with pytest.raises(GridError, match="no such file"):
        load_grid(tmp_path / "none.toml")
