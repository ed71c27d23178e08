"""Shared set-up of the notebooks: which run folder to load and where figures go.

``RADIXBENCH_RUN``: the run folder to load (default: the newest ``runs/*`` holding a
``requests.parquet``, searched from the current folder and its parent). ``RADIXBENCH_NB_OUT``:
when set, every figure passed to :func:`show` is also saved there as ``<name>.png``.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure


def run_dir() -> Path:
    """The run folder to load (see module docstring); ``FileNotFoundError`` when none."""
    env = os.environ.get("RADIXBENCH_RUN")
    if env:
        return Path(env)
    for base in (Path("runs"), Path("..") / "runs"):
        found = sorted(p.parent for p in base.glob("*/requests.parquet"))
        if found:
            return found[-1]
    raise FileNotFoundError("no run folder: set RADIXBENCH_RUN or run `radixbench compare`")


def show(fig: Figure, name: str) -> None:
    """Display ``fig`` (inline in Jupyter) and save it to ``$RADIXBENCH_NB_OUT/<name>.png``."""
    out = os.environ.get("RADIXBENCH_NB_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(out) / f"{name}.png", dpi=80)
    plt.show()
    plt.close(fig)
