"""Tests for radixbench.reports.plots: save_figure / write_png (the PNG holds the pixels that
``Figure.savefig`` writes, as RGB when the figure is opaque, at the report's dpi) and
sorted_groups (the op CDF's data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from radixbench.reports.plots import _DPI, save_figure, sorted_groups


def _figure(face: str = "white") -> Figure:
    fig = Figure(figsize=(3.0, 2.0), facecolor=face)
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.step([1, 10, 100, 1000], [0.1, 0.5, 0.9, 1.0], where="post", label="a")
    ax.set_title("a title")
    ax.legend()
    return fig


def _savefig_pixels(fig: Figure, path: Path) -> np.ndarray:
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=_DPI)
    return np.asarray(Image.open(path))


def test_an_opaque_figure_is_written_as_rgb_with_savefigs_pixels(tmp_path: Path) -> None:
    reference = _savefig_pixels(_figure(), tmp_path / "ref.png")
    assert reference.shape[2] == 4 and (reference[..., 3] == 255).all()
    out = save_figure(_figure(), tmp_path / "plots" / "fig.png")
    img = Image.open(out)
    assert img.mode == "RGB"
    assert img.info["dpi"] == pytest.approx((_DPI, _DPI), abs=0.01)
    pixels = np.asarray(img)
    assert pixels.shape == reference[..., :3].shape
    assert (pixels == reference[..., :3]).all()
    assert [p.name for p in out.parent.iterdir()] == ["fig.png"]  # no temp file left


def test_a_transparent_figure_keeps_its_alpha(tmp_path: Path) -> None:
    reference = _savefig_pixels(_figure("none"), tmp_path / "ref.png")
    assert (reference[..., 3] < 255).any()
    img = Image.open(save_figure(_figure("none"), tmp_path / "fig.png"))
    assert img.mode == "RGBA"
    assert (np.asarray(img) == reference).all()


def test_the_figure_keeps_its_dpi_and_its_svg_is_written(tmp_path: Path) -> None:
    fig = _figure()
    dpi = fig.dpi
    out = save_figure(fig, tmp_path / "fig.png", svg=True)
    assert fig.dpi == dpi
    assert "<svg" in out.with_suffix(".svg").read_text(encoding="utf-8")


def test_sorted_groups_match_a_groupby_sort() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    df = pd.DataFrame(
        {
            "op": rng.choice(["insert", "evict", "match_prefix", None], n),
            "variant": rng.choice(["b", "a", "c"], n),
            "ns": rng.integers(0, 50, n),
        }
    )
    got = sorted_groups(df, "op", "variant", "ns")
    want = {
        (str(o), str(v)): np.sort(g["ns"].to_numpy(np.float64))
        for (o, v), g in df.groupby(["op", "variant"])
    }
    assert got.keys() == want.keys()
    for k, arr in want.items():
        assert got[k].dtype == np.float64
        assert np.array_equal(got[k], arr), k
    assert sorted_groups(df.iloc[0:0], "op", "variant", "ns") == {}
