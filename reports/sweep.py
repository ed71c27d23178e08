"""Plots of a sweep: each metric against each swept parameter, one line per variant."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

#: Gathered columns plotted, with their axis label (units) and whether a log scale fits.
SWEEP_METRICS: dict[str, tuple[str, bool]] = {
    "evict_p50_ns": ("evict p50 (ns)", True),
    "evict_p99_ns": ("evict p99 (ns)", True),
    "match_prefix_p99_ns": ("match_prefix p99 (ns)", True),
    "insert_p99_ns": ("insert p99 (ns)", True),
    "prefix_hit_rate": ("prefix hit rate (fraction of input tokens)", False),
    "ttft_p99_s": ("TTFT p99 (s)", False),
}


def plot_sweep(results: pd.DataFrame, params: Sequence[str], out_dir: Path) -> list[Path]:
    """Write ``<metric>_vs_<param>.png`` for every metric present and every parameter.

    ``results``: the gathered sweep table (one row per cell). Each point is the mean over seeds
    and over the other parameters' values. Returns the written paths. Mutates nothing else.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for param in params:
        if param not in results.columns:
            continue
        for metric, (label, log) in SWEEP_METRICS.items():
            if metric not in results.columns or results[metric].isna().all():
                continue
            table = results.groupby(["variant", param])[metric].mean().unstack("variant")
            fig = Figure(figsize=(6.4, 4.2), layout="constrained")
            ax = fig.add_subplot()
            for variant in table.columns:
                ax.plot(table.index, table[variant], marker="o", label=variant)
            ax.set_xlabel(param)
            ax.set_ylabel(label)
            if log and (table > 0).all().all():
                ax.set_yscale("log")
            ax.set_title(f"{label.split(' (')[0]} vs {param}")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
            path = out_dir / f"{metric}_vs_{param.replace('.', '_')}.png"
            fig.savefig(path, dpi=110)
            paths.append(path)
    return paths
