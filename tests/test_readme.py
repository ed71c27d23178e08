"""README.md's TOML examples are valid input: every ```toml block loads as what it shows (a
scenario, or a sweep grid when it names a ``scenario``), so the README cannot drift from the
keys the loaders accept."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from radixbench.harness.config.grid import load_grid
from radixbench.harness.config.scenario import load_scenario

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```toml\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)


def test_readme_has_scenario_and_grid_examples() -> None:
    kinds = {"grid" if "scenario" in tomllib.loads(b) else "scenario" for b in BLOCKS}
    assert kinds == {"scenario", "grid"}


@pytest.mark.parametrize("block", BLOCKS, ids=[f"toml-{i}" for i in range(len(BLOCKS))])
def test_readme_toml_example_loads(block: str, tmp_path: Path) -> None:
    path = tmp_path / "example.toml"
    path.write_text(block, encoding="utf-8")
    if "scenario" in tomllib.loads(block):
        grid = load_grid(path)
        assert grid.cells
    else:
        scenario = load_scenario(path)
        assert scenario.variants and scenario.description
