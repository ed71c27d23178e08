"""The notebooks (jupytext percent files in notebooks/) execute against a real run folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.harness.cli import main

jupytext = pytest.importorskip("jupytext", reason="jupytext is a dev dependency")
nbclient = pytest.importorskip("nbclient", reason="nbclient is a dev dependency")

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(p for p in NOTEBOOK_DIR.glob("*.py") if not p.name.startswith("_"))

#: Figures each notebook must save (names passed to _nbutil.show).
EXPECTED_FIGURES = {
    "eviction_deep_dive": {"evict_vs_leaves", "evicted_over_time", "evictable_protected"},
    "matching_deep_dive": {"match_cost", "match_speedup_bins", "hit_fraction"},
    "trace_exploration": {"arrivals_lengths", "prefix_hits", "ttft_vs_uncached"},
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real (tiny) compare run on the bundled trace, with evictions (small KV pool)."""
    out = tmp_path_factory.mktemp("runs")
    argv = ["compare", "--requests", "30", "--kv-capacity", "40000", "--out", str(out),
            "--no-progress"]  # fmt: skip
    assert main(argv) in (0, 1)
    (run,) = out.iterdir()
    return run


def test_three_notebooks_exist() -> None:
    assert {p.stem for p in NOTEBOOKS} >= set(EXPECTED_FIGURES)


@pytest.mark.e2e  # a Jupyter kernel
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, run_dir, tmp_path, monkeypatch) -> None:
    figures = tmp_path / "figures"
    monkeypatch.setenv("RADIXBENCH_RUN", str(run_dir))
    monkeypatch.setenv("RADIXBENCH_NB_OUT", str(figures))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = jupytext.read(path)
    assert sum(c.cell_type == "code" for c in nb.cells) >= 3
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK_DIR)}}
    )
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    first_output = "".join(
        o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if "text" in o
    )
    assert str(run_dir) in first_output  # it loaded the run it was given
    saved = {p.stem for p in figures.glob("*.png")}
    assert saved == EXPECTED_FIGURES[path.stem]
    assert all(p.stat().st_size > 2000 for p in figures.glob("*.png"))
