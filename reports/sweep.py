"""Plots of a sweep: each metric against each swept parameter, one line per variant.

Each point is the mean over seeds of a metric (the other swept parameters' values averaged
first, per seed); the error bar spans the minimum to the maximum over seeds (not a confidence
interval: sweeps usually run 1-5 seeds), and the legend gives each line's number of seeds ``n``.
Linear y axes start at 0; a metric spanning more than two decades gets a log y axis (so stated
in its label). The x label names the scenario key and its unit; the x ticks are the grid's values.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from radixbench.reports._atomic import atomic_paths

#: Gathered columns plotted, with their axis label (units) and whether a log scale may fit.
SWEEP_METRICS: dict[str, tuple[str, bool]] = {
    "evict_p50_ns": ("evict p50 (ns)", True),
    "evict_p99_ns": ("evict p99 (ns)", True),
    "match_prefix_p99_ns": ("match_prefix p99 (ns)", True),
    "insert_p99_ns": ("insert p99 (ns)", True),
    "prefix_hit_rate": ("prefix hit rate (fraction of input tokens)", False),
    "ttft_p99_s": ("TTFT p99 (s)", False),
}

#: Unit of a swept scenario key, by its last part (``sim.kv_capacity_tokens`` ->
#: ``kv_capacity_tokens``); keys not listed fall back on their suffix (:func:`param_label`).
PARAM_UNITS: dict[str, str] = {
    "kv_capacity_tokens": "tokens",
    "max_prefill_tokens": "tokens",
    "chunked_prefill_size": "tokens",
    "max_context_len_tokens": "tokens",
    "page_size": "tokens per page",
    "max_running": "requests",
    "max_requests": "requests",
    "groups": "groups",
    "rate_scale": "x the trace's request rate",
    "time_scale": "x the trace's arrival times",
    "rate": "requests/s",
    "cv": "coefficient of variation",
    "window_s": "s",
    "start_s": "s",
    "gpu_mem_gb": "GB per GPU",
}

_SUFFIX_UNITS = {"_tokens": "tokens", "_s": "s", "_ms": "ms", "_ns": "ns", "_gb": "GB"}


def param_label(param: str) -> str:
    """``"<param> (<unit>)"``: the unit from :data:`PARAM_UNITS`, else from the key's suffix
    (``_tokens``, ``_s``, ``_ms``, ``_ns``, ``_gb``), else ``"as in the scenario"``."""
    leaf = param.rsplit(".", 1)[-1]
    unit = PARAM_UNITS.get(leaf) or next(
        (u for suffix, u in _SUFFIX_UNITS.items() if leaf.endswith(suffix)), "as in the scenario"
    )
    return f"{param} ({unit})"


def seed_stats(results: pd.DataFrame, param: str, metric: str) -> pd.DataFrame:
    """Per (variant, ``param`` value): ``mean``, ``min``, ``max`` over seeds and ``n`` seeds of
    ``metric``, each seed's value first averaged over the other swept parameters (NaN left
    out). Columns ``variant``, ``param``, ``mean``, ``min``, ``max``, ``n``."""
    seed = results["seed"] if "seed" in results.columns else pd.Series(0, index=results.index)
    frame = pd.DataFrame(
        {
            "variant": results["variant"],
            "param": results[param],
            "seed": seed,
            "value": results[metric],
        }
    ).dropna(subset=["value"])
    per_seed = frame.groupby(["variant", "param", "seed"], sort=True)["value"].mean()
    stats = per_seed.groupby(level=["variant", "param"]).agg(["mean", "min", "max", "count"])
    return stats.rename(columns={"count": "n"}).reset_index()


def plot_sweep(results: pd.DataFrame, params: Sequence[str], out_dir: Path) -> list[Path]:
    """Write ``<metric>_vs_<param>.png`` for every metric present and every parameter.

    ``results``: the gathered sweep table (one row per cell: parameters, ``variant``, ``seed``,
    metrics). Points, error bars and ``n`` are those of :func:`seed_stats`. Returns the written
    paths (each written atomically into ``out_dir``, created if needed). Mutates nothing
    else.
    """
    # imported here: `radixbench sweep --help` stays fast
    from matplotlib.figure import Figure

    from radixbench.reports.plotaxes import compact_number

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for param in params:
        if param not in results.columns:
            continue
        others = [p for p in params if p != param and p in results.columns]
        for metric, (label, log) in SWEEP_METRICS.items():
            if metric not in results.columns or results[metric].isna().all():
                continue
            stats = seed_stats(results, param, metric)
            fig = Figure(figsize=(6.8, 4.4), layout="constrained")
            ax = fig.add_subplot()
            for variant, g in stats.groupby("variant", sort=True):
                err = np.vstack([g["mean"] - g["min"], g["max"] - g["mean"]])
                n = sorted(set(g["n"].astype(int)))
                n_text = str(n[0]) if len(n) == 1 else f"{n[0]}-{n[-1]}"
                ax.errorbar(
                    g["param"],
                    g["mean"],
                    yerr=err,
                    marker="o",
                    capsize=3,
                    label=f"{variant} (n={n_text} seeds)",
                )
            positive = stats[["min", "max"]].to_numpy(np.float64)
            span = positive.max() / positive.min() if (positive > 0).all() else 0.0
            if log and span > 100:
                ax.set_yscale("log")
                ax.set_ylabel(f"{label}, log scale")
            else:
                ax.set_ylim(bottom=0.0, top=max(float(stats["max"].max()) * 1.08, 1e-12))
                ax.set_ylabel(label)
            ax.set_xlabel(param_label(param))
            values = sorted(stats["param"].unique())
            if len(values) <= 8 and all(pd.api.types.is_number(v) for v in values):
                ax.set_xticks(values, [compact_number(float(v)) for v in values])
            pooled = f"; averaged over {', '.join(others)}" if others else ""
            ax.set_title(
                f"{label.split(' (')[0]} vs {param.rsplit('.', 1)[-1]}\n"
                f"mean over seeds, bars: min-max over seeds{pooled}",
                fontsize="medium",
            )
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
            path = out_dir / f"{metric}_vs_{param.replace('.', '_')}.png"
            with atomic_paths(path) as (tmp,):
                fig.savefig(tmp, format="png", dpi=110)
            paths.append(path)
    return paths
