from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.harness.config.grid import GridError, load_grid

GOOD = """
description = "d"
scenario = "mooncake-conversation"
[base]
arrivals.max_requests = 30
scheduler.max_running = 8
[grid]
"sim.kv_capacity_tokens" = [100000, 200000]
"arrivals.time_scale" = [1, 2.5]
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
    assert grid.params == ("sim.kv_capacity_tokens", "arrivals.time_scale")
    assert len(grid.cells) == 2 * 2 * 2  # points x seeds; the 2 variants of a point together
    assert all(len(c.variants) == 2 for c in grid.cells)
    keys = [c.key for c in grid.cells]
    assert len(set(keys)) == len(keys)
    assert keys == [c.key for c in load_grid(_write(tmp_path, GOOD)).cells]
    # Changing any value changes the affected keys only.
    other = load_grid(_write(tmp_path, GOOD.replace("200000", "300000")))
    assert len(set(keys) & {c.key for c in other.cells}) == len(keys) // 2
    # Each cell's scenario carries the base, the parameters, its variants and its seed.
    cell = grid.cells[-1]
    sc = cell.load()
    assert sc.arrivals.max_requests == 30 and sc.sim.max_running == 8
    assert sc.sim.kv_capacity_tokens == cell.params["sim.kv_capacity_tokens"]
    assert sc.arrivals.time_scale == cell.params["arrivals.time_scale"]
    assert sc.variants == cell.variants and sc.seed == cell.seed == 1


def test_scenario_file_relative_to_grid_and_content_in_key(tmp_path) -> None:
    from radixbench.harness.config.scenario import bundled_scenarios

    text = bundled_scenarios()["prefix-repetition"].read_text()
    (tmp_path / "my.toml").write_text(text)
    grid_text = GOOD.replace('"mooncake-conversation"', '"my.toml"').replace(
        '"arrivals.time_scale" = [1, 2.5]', '"arrivals.rate" = [1.0, 2.0]'
    )
    keys = [c.key for c in load_grid(_write(tmp_path, grid_text)).cells]
    (tmp_path / "my.toml").write_text(text + "\n# edited\n")
    assert not set(keys) & {c.key for c in load_grid(_write(tmp_path, grid_text)).cells}


BAD = [
    ("bogus = 1\n" + GOOD, "unknown key 'bogus'"),
    (GOOD.replace("arrivals.max_requests", "arrivals.max_request"), "max_request"),
    (GOOD.replace("scheduler.max_running = 8", "scheduler.max_runing = 8"), "max_runing"),
    (GOOD.replace("max_running = 8", 'max_running = "8"'), "scheduler.max_running"),
    (GOOD.replace("[100000, 200000]", "100000"), "expected a non-empty list"),
    (GOOD.replace("[100000, 200000]", "[100000, -1]"), "kv_capacity_tokens"),
    (GOOD.replace('"heapify", ', '"heapfy", '), "unknown evictor 'heapfy'"),
    (GOOD.replace("seeds = [0, 1]", "seeds = [0.5]"), "seeds"),
    ("seeds = [1]\n" + GOOD, "both at top level and in [variants]"),
    (GOOD.replace("[variants]", "[variants]\nfoo = 1"), "variants: unknown key 'foo'"),
    (GOOD.replace('"mooncake-conversation"', '"no-such-scenario"'), "scenario"),
    ('scenario = "mooncake-conversation"\n[base]\n', "grid: needs at least one key"),
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


def test_flatten_defaults_to_the_scenarios_own(tmp_path) -> None:
    # mooncake-conversation runs the numpy flatten; a grid that does not compare flattens too
    grid = load_grid(_write(tmp_path, GOOD))
    assert {v.flatten for c in grid.cells for v in c.variants} == {"numpy"}
    chosen = load_grid(_write(tmp_path, GOOD + 'flatten = ["sum", "chain"]\n'))
    assert {v.flatten for c in chosen.cells for v in c.variants} == {"sum", "chain"}
    bare = tmp_path / "bare.toml"
    bare.write_text(
        'description = "d"\n[workload]\nkind = "prefix-repetition"\nrequests = 10\n'
        '[arrivals]\nprocess = "constant"\nrate = 1.0\n'
    )
    g = load_grid(_write(tmp_path, GOOD.replace('"mooncake-conversation"', f'"{bare}"')))
    assert {v.flatten for c in g.cells for v in c.variants} == {"chain"}
