"""The cluster plots' layout decisions (issue 31 item 11): the instance legend covers no panel,
whatever the number of routers and instances, and an instance keeps its colour in every panel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from radixbench.reports import routing_plots


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the routing plots save (saved as usual)."""
    seen: list[Figure] = []
    real = routing_plots.save_figure

    def spy(fig: Figure, path: Path | str, *, svg: bool = False) -> Path:
        seen.append(fig)
        return real(fig, path, svg=svg)

    monkeypatch.setattr(routing_plots, "save_figure", spy)
    return seen


def _tables(routers: int, instances: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    load, reqs = [], []
    for r in range(routers):
        variant = f"heapify/router=r{r}/instances={instances}"
        # the first router never uses instance 0: its colours must not shift
        used = list(range(1 if r == 0 else 0, instances))
        n = 40 * instances
        inst = rng.choice(used, n)
        t = np.sort(rng.uniform(0, 20, n))
        load.append(pd.DataFrame({"variant": variant, "sim_time_s": t, "instance": inst,
                                  "outstanding": rng.integers(0, 30, n)}))  # fmt: skip
        reqs.append(pd.DataFrame({
            "variant": variant, "router": f"r{r}", "rid": np.arange(n), "arrival_s": t,
            "status": "finished", "instance": inst, "input_len": 1000,
            "prefix_hit_tokens": rng.integers(0, 1000, n),
        }))  # fmt: skip
    return pd.concat(load, ignore_index=True), pd.concat(reqs, ignore_index=True)


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1


def _check_legends(fig: Figure) -> None:
    """Every legend lies inside the figure and inside its own axes, if it has one; no legend
    overlaps a panel it does not belong to."""
    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    fig.draw(renderer)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    owned = [(ax.get_legend(), ax) for ax in panels if ax.get_legend() is not None]
    legends = [(leg, None) for leg in fig.legends] + owned
    assert legends, "no legend names the instances"
    whole = fig.bbox
    for legend, owner in legends:
        box = legend.get_window_extent(renderer)
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1 + 1 and whole.y0 <= box.y0, box
        assert box.y1 <= whole.y1 + 1, box
        if owner is not None:
            frame = owner.get_window_extent(renderer)
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1, "legend outside its own axes"
        for ax in panels:
            if ax is not owner:
                assert not _overlaps(box, ax.get_window_extent(renderer)), (
                    f"the legend covers the panel {ax.get_title()!r}"
                )


@pytest.mark.parametrize(("routers", "instances"), [(4, 8), (1, 8), (2, 32), (3, 16)])
def test_instance_legend_covers_no_panel(
    tmp_path: Path, figures: list[Figure], routers: int, instances: int
) -> None:
    load, reqs = _tables(routers, instances)
    routing_plots.plot_instance_load(load, reqs, tmp_path / "load.png")
    routing_plots.plot_instance_hit_rate(reqs, tmp_path / "hit.png")
    assert len(figures) == 2
    for fig in figures:
        _check_legends(fig)


def test_an_instance_has_one_colour_in_every_panel(tmp_path: Path, figures) -> None:
    load, reqs = _tables(2, 4)
    routing_plots.plot_instance_load(load, reqs, tmp_path / "load.png")
    (fig,) = figures
    first, second = fig.axes[0], fig.axes[1]
    # panel 0 lacks instance 0; its lines are instances 1-3, panel 1's are 0-3
    assert [ln.get_color() for ln in first.get_lines()] == [
        ln.get_color() for ln in second.get_lines()
    ][1:]
