"""The routing study's statistics and report: routers vs instances and load.

Each point (``instances``, ``load`` requests/s per instance) is one cluster compare of every
router. :func:`point_rows` reduces a point to one row per router — TTFT p50 / p90, output
throughput (tokens per simulated s), prefix hit rate, overloaded instances — and, for each
candidate, its ratios against the baseline router with 95 % paired-bootstrap intervals
(:func:`radixbench.reports.routing.router_verdicts`: TTFT p90 baseline / candidate, throughput
candidate / baseline; > 1 = candidate better). Per load and candidate the **crossover** over
instances is :func:`radixbench.reports.study.crossover` (the smallest instance count from which
on the whole CI lies above 1.01). :func:`write_routing_study` writes ``points.{parquet,csv}``,
``crossover.{parquet,csv}``, ``plots/study-routing.png`` (TTFT p90 per router and the
throughput ratio against the baseline, vs instances on a log axis, one column per load) and
``study.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from radixbench.reports.routing import router_verdicts
from radixbench.reports.study import crossover
from radixbench.reports.tables import write_table
from radixbench.reports.verdicts import MIN_EFFECT

__all__ = ["crossovers", "point_rows", "write_routing_study"]


def point_rows(
    requests: pd.DataFrame, metrics: pd.DataFrame, *, seed: int = 0, n_resamples: int = 1000
) -> list[dict[str, Any]]:
    """One row per router of one point (module docstring); the baseline router's ratio
    columns are 1 with no interval."""
    verdicts = router_verdicts(requests, n_resamples=n_resamples, seed=seed)
    m = {str(r["variant"]): r for r in metrics.to_dict("records")}
    rows = []
    for variant, reqs in requests.groupby("variant", sort=False):
        done = reqs[reqs["status"] == "finished"]
        ttft = done["ttft_s"].to_numpy(np.float64)
        row: dict[str, Any] = {
            "router": str(reqs["router"].iloc[0]),
            "ttft_p50_s": float(np.percentile(ttft, 50)) if ttft.size else math.nan,
            "ttft_p90_s": float(np.percentile(ttft, 90)) if ttft.size else math.nan,
            "output_throughput": float(m[str(variant)]["output_throughput"]),
            "prefix_hit_rate": float(
                done["prefix_hit_tokens"].sum() / max(done["input_len"].sum(), 1)
            ),
            "load_imbalance": float(m[str(variant)]["load_imbalance"]),
        }
        for metric, name in (("ttft_p90_s", "ttft_p90"), ("output_throughput", "throughput")):
            v = verdicts[(verdicts["candidate"] == variant) & (verdicts["metric"] == metric)]
            if len(v):
                r = v.iloc[0]
                row[f"{name}_ratio"], row[f"{name}_lo"], row[f"{name}_hi"] = (
                    float(r["ratio"]), float(r["ci_low"]), float(r["ci_high"])
                )  # fmt: skip
                row["baseline"] = str(r["baseline_router"])
            else:
                row[f"{name}_ratio"], row[f"{name}_lo"], row[f"{name}_hi"] = 1.0, math.nan, math.nan
        rows.append(row)
    base = next((r.get("baseline") for r in rows if r.get("baseline")), rows[0]["router"])
    for done_row in rows:
        done_row["baseline"] = base
    return rows


def crossovers(points: pd.DataFrame) -> pd.DataFrame:
    """Per load and candidate router, the crossover over instances of TTFT p90 and throughput
    (columns ``load``, ``router``, ``metric``, ``x_first``, ``x_interp``, ``x_max``)."""
    rows = []
    cands = points[points["router"] != points["baseline"]]
    for (load, router), part in cands.groupby(["load", "router"], sort=True):
        for metric in ("ttft_p90", "throughput"):
            c = crossover(part, metric, "instances")
            rows.append({"load": load, "router": router, "metric": metric, **c})
    return pd.DataFrame(rows, columns=["load", "router", "metric", "x_first", "x_interp", "x_max"])


def _plot(points: pd.DataFrame, path: Path) -> Path:
    from matplotlib.figure import Figure

    from radixbench.reports.plotaxes import fixed_layout
    from radixbench.reports.plots import save_figure

    loads = sorted(points["load"].unique())
    fig = Figure(figsize=(4.6 * len(loads), 7.0))
    axes = fig.subplots(2, len(loads), squeeze=False)
    fixed_layout(fig, 2, len(loads), right_in=1.6)
    for j, load in enumerate(loads):
        part = points[points["load"] == load]
        top, bottom = axes[0][j], axes[1][j]
        for router, rows in part.groupby("router", sort=False):
            rows = rows.sort_values("instances")
            top.plot(rows["instances"], rows["ttft_p90_s"], marker="o", label=router)
            if router != rows["baseline"].iloc[0]:
                bottom.plot(rows["instances"], rows["throughput_ratio"], marker="o", label=router)
                bottom.fill_between(
                    rows["instances"], rows["throughput_lo"], rows["throughput_hi"], alpha=0.15
                )
        top.set_title(f"load {load:g} req/s per instance")
        top.set_yscale("log")
        top.set_ylabel("TTFT p90 (s)")
        bottom.axhline(1.0, color="grey", lw=0.8)
        bottom.set_ylabel(f"throughput / {part['baseline'].iloc[0]}")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("instances")
            ax.grid(alpha=0.3, which="both")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return save_figure(fig, path)


def write_routing_study(
    run_dir: Path, points: pd.DataFrame, meta: Mapping[str, Any]
) -> dict[str, Any]:
    """Write the study's tables, plot and ``study.md`` into ``run_dir``; returns ``{"lines":
    the verdict lines, "study_md", "plot", "crossover": frame}``."""
    from radixbench.reports._atomic import atomic_paths
    from radixbench.reports.markdown import pipe_table

    cross = crossovers(points)
    write_table(points, run_dir, "points")
    write_table(cross, run_dir, "crossover")
    plot = _plot(points, run_dir / "plots" / "study-routing.png")
    lines = []
    base = str(points["baseline"].iloc[0])
    for rec in cross.to_dict("records"):
        what = "TTFT p90" if rec["metric"] == "ttft_p90" else "throughput"
        if rec["x_first"] is None or pd.isna(rec["x_first"]):
            where = f"no crossover up to {float(rec['x_max']):g} instances"
        else:
            where = (
                f"better by > {MIN_EFFECT:.0%} (95 % CI) from {float(rec['x_first']):g} "
                "instances on"
            )
        lines.append(f"load {float(rec['load']):g}: {rec['router']} vs {base}, {what}: {where}")
    md = [
        f"# radixbench study: {meta.get('name', 'routing')} ({meta.get('mode', '')})",
        "",
        str(meta.get("description", "")),
        "",
        "## Verdict",
        "",
        *[f"- {ln}" for ln in lines],
        "",
        "## Points",
        "",
        pipe_table(points),
        "",
        f"![study-routing]({plot.relative_to(run_dir)})",
        "",
        "## Method",
        "",
        "Each point runs every router on the same requests (one cluster compare, routers "
        "interleaved in one process): `instances` servers, ~`tenants_per_instance` tenants "
        "per server and a Poisson rate of `load` requests/s per server, so each server's KV "
        "demand and offered load stay the same as the cluster grows. Ratios against the "
        "baseline router with 95 % paired bootstrap intervals over requests (TTFT p90: "
        "baseline / candidate; throughput: candidate / baseline). Crossover: the smallest "
        "instance count from which on the whole interval lies above 1.01. Simulated times; "
        f"wall time {meta.get('wall_s', '?')} s on this machine.",
        "",
    ]
    path = run_dir / "study.md"
    with atomic_paths(path) as (tmp,):
        tmp.write_text("\n".join(md) + "\n", encoding="utf-8")
    return {"lines": lines, "study_md": path, "plot": plot, "crossover": cross}
