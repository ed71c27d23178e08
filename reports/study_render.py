"""Rendering of a ``radixbench study``: the points table, one plot and ``study.md``.

:func:`write_study` takes the rows of :func:`radixbench.reports.study.point_rows` (one per
point and candidate, plus ``point``, ``requests``, ``kv_capacity_tokens`` and ``param:<key>``
columns from the harness) and writes, each file atomically::

    study.json                the study's settings, wall time, load and environment (meta)
    points.{parquet,csv}      the rows
    crossover.{parquet,csv}   one row per candidate and metric (reports.study.crossover)
    plots/study-<family>.png + .svg
    study.md                  verdict, table, method, and the extra sections the caller gives
                              (study-specific prose, e.g. a PR's claim checked against the points)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.markdown import markdown_table
from radixbench.reports.plotaxes import log_ticks
from radixbench.reports.study import FAMILIES, METRICS, crossover
from radixbench.reports.study_best import draw_best_panels
from radixbench.reports.tables import write_table
from radixbench.reports.verdicts import MIN_EFFECT

__all__ = ["MARGIN", "plot_study", "verdict_lines", "write_study"]

#: The difference that counts: a ratio whose whole 95 % CI lies above 1 + MARGIN (the
#: verdicts' one rule, :func:`radixbench.reports.verdicts.verdict`).
MARGIN = MIN_EFFECT
_PLOT_METRICS = ("ttft_p50", "ttft_p99", "throughput")
_DPI = 110


def _fmt_x(x: float | None, family: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    unit = "evictable leaves" if family == "eviction" else "tokens matched"
    return f"{x:,.0f} {unit}"


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    with atomic_paths(path, path.with_suffix(".svg")) as (png, svg):
        fig.savefig(png, format="png", dpi=_DPI)
        fig.savefig(svg, format="svg")
    return path


def crossover_table(points: pd.DataFrame, family: str) -> pd.DataFrame:
    """One row per candidate and metric: ``x_first``, ``x_interp``, ``x_max`` (NaN = none)."""
    x = FAMILIES[family][2]
    rows = []
    for cand, df in points.groupby("candidate", sort=False):
        for metric in METRICS:
            c = crossover(df, metric, x)
            rows.append({"candidate": cand, "metric": metric, **c})
    out = pd.DataFrame(rows, columns=["candidate", "metric", "x_first", "x_interp", "x_max"])
    return out.astype({"x_first": "float64", "x_interp": "float64", "x_max": "float64"})


def plot_study(
    points: pd.DataFrame, cross: pd.DataFrame, meta: Mapping[str, Any], path: Path
) -> Path:
    """2 x 2 figure: TTFT p50, TTFT p99 and throughput ratio (candidate better > 1) with 95 %
    CI bands vs the quantity (log x; a ratio panel reaching above 3 gets a log y axis with at
    least 3 labelled ticks), the 1 + MARGIN line and each candidate's crossover; and the share
    of step time in cache operations. Rows with a ``best`` column get a third column of panels
    (:func:`radixbench.reports.study_best.draw_best_panels`: the op's p50 / p99 per curve, the
    throughput change against the best). Returns the PNG path (an SVG lies beside it)."""
    family = str(meta["family"])
    x = FAMILIES[family][2]
    best = "best" in points  # every curve also against the best: two more panels
    fig = Figure(figsize=(18 if best else 12, 8.5))
    grid = fig.subplots(2, 3 if best else 2)
    axes = grid[:, :2].ravel()
    df = points.dropna(subset=[x]).sort_values(x)
    colors = {c: f"C{i % 10}" for i, c in enumerate(df["candidate"].unique())}
    if best:
        fam = FAMILIES[family]
        draw_best_panels(grid[0, 2], grid[1, 2], points, x, fam[3], fam[1], colors)
    for ax, metric in zip(axes[:3], _PLOT_METRICS, strict=True):
        top = 1.05
        for cand, d in df.groupby("candidate", sort=False):
            xs, r = d[x].to_numpy(), d[f"{metric}_ratio"].to_numpy()
            lo, hi = d[f"{metric}_lo"].to_numpy(), d[f"{metric}_hi"].to_numpy()
            col = colors[cand]
            c = cross[(cross["candidate"] == cand) & (cross["metric"] == metric)]
            xc = c["x_interp"].iloc[0] if len(c) else float("nan")
            below = len(c) and math.isnan(xc) and not math.isnan(c["x_first"].iloc[0])
            label = f"{cand} vs {d['baseline'].iloc[0]}"
            if not math.isnan(xc) or below:
                # the crossover goes into the legend: labels on the lines overlapped
                at = float(c["x_first"].iloc[0]) if below else xc
                crossed = f" ({MARGIN:.0%} crossed below {at:,.0f})"
                label += crossed if below else f" (crossover ≈ {xc:,.0f})"
                ax.axvline(at, color=col, linestyle=":", linewidth=1.5)
            ax.plot(xs, r, "o-", color=col, label=label)
            ax.fill_between(xs, lo, hi, color=col, alpha=0.2, linewidth=0)
            top = max(top, float(np.nanmax(hi)) if len(hi) else top)
        ax.axhline(1.0, color="0.5", linewidth=0.8)
        line = f"+{MARGIN:.0%} line"
        ax.axhline(1 + MARGIN, color="red", linestyle="--", linewidth=1, label=line)
        ax.set_xscale("log")
        if top > 3:  # plain labels at >= 3 ticks: a 0.9-5 range has only the decade 1
            ax.set_yscale("log")
            log_ticks(ax, "y")
        ax.set_xlabel(FAMILIES[family][3])
        kind = "baseline / candidate" if metric != "throughput" else "candidate / baseline"
        ax.set_ylabel("ratio (> 1: candidate better)")
        ax.set_title(f"{METRICS[metric]}: {kind}, 95 % CI band", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    ax = axes[3]
    if len(df):
        first = df.drop_duplicates("point")
        ax.plot(
            first[x],
            100 * first["cache_share_base"],
            "s-",
            color="k",
            label=f"{first['baseline'].iloc[0]}: all cache ops + builds",
        )
        ax.plot(
            first[x],
            100 * first["op_share_base"],
            "s--",
            color="k",
            label=f"{first['baseline'].iloc[0]}: {FAMILIES[family][1]} alone",
        )
        for cand, d in df.groupby("candidate", sort=False):
            ax.plot(
                d[x], 100 * d["cache_share_cand"], "o-", color=colors[cand], label=f"{cand}: all"
            )
            ax.plot(
                d[x],
                100 * d["op_share_cand"],
                "o--",
                color=colors[cand],
                label=f"{cand}: {FAMILIES[family][1]}",
            )
        ax.set_xscale("log")
        ax.set_ylim(
            0, max(5.0, float(100 * df[["cache_share_base", "cache_share_cand"]].max().max()) * 1.1)
        )
        ax.legend(fontsize=7, loc="upper left")
    ax.set_xlabel(FAMILIES[family][3])
    ax.set_ylabel("share of simulated step time (%)")
    ax.set_title("step time spent in cache operations (coupled clock)")
    ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(
        f"radixbench study {meta['name']} ({meta['mode']}): {', '.join(df['candidate'].unique())} "
        f"vs {meta['baseline']}, coupled clock, scenario {Path(str(meta['scenario'])).stem}",
        fontsize=11,
    )
    return _save(fig, path)


def _ci(row: pd.Series, metric: str) -> str:
    return f"{row[f'{metric}_ratio']:.3f} [{row[f'{metric}_lo']:.3f}, {row[f'{metric}_hi']:.3f}]"


def verdict_lines(points: pd.DataFrame, cross: pd.DataFrame, family: str) -> list[str]:
    """One verdict line per candidate: crossover of TTFT p50 / p99 / throughput, and the effect
    and cache share at the largest point."""
    x = FAMILIES[family][2]
    lines = []
    for cand, d in points.groupby("candidate", sort=False):
        d = d.dropna(subset=[x]).sort_values(x)
        base = points["baseline"].iloc[0]
        if d.empty:
            lines.append(f"{cand} vs {base}: the family's operation never ran; nothing compared.")
            continue
        last = d.iloc[-1]
        parts = []
        for metric in _PLOT_METRICS:
            c = cross[(cross["candidate"] == cand) & (cross["metric"] == metric)].iloc[0]
            if math.isnan(c["x_first"]):
                parts.append(f"{METRICS[metric]}: no crossover up to {_fmt_x(c['x_max'], family)}")
            elif math.isnan(c["x_interp"]):
                parts.append(
                    f"{METRICS[metric]}: > {MARGIN:.0%} better already at the smallest point "
                    f"({_fmt_x(c['x_first'], family)}; the crossover lies below the range)"
                )
            else:
                parts.append(
                    f"{METRICS[metric]}: > {MARGIN:.0%} better from {_fmt_x(c['x_first'], family)} "
                    f"(interpolated ≈ {c['x_interp']:,.0f})"
                )
        lines.append(
            f"**{cand} vs {base}** — " + "; ".join(parts) + f". At the largest point "
            f"({_fmt_x(last[x], family)}, KV pool {int(last['kv_capacity_tokens']):,} tokens): "
            f"TTFT p50 {_ci(last, 'ttft_p50')}, TTFT p99 {_ci(last, 'ttft_p99')}, throughput "
            f"{_ci(last, 'throughput')}; cache operations take "
            f"{100 * last['cache_share_base']:.1f} % of step time under {base}, "
            f"{100 * last['cache_share_cand']:.1f} % under {cand}"
            + (
                f" (overloaded there: {last['overloaded']}; its latency ratios include queueing)."
                if isinstance(last.get("overloaded"), str) and last["overloaded"]
                else "."
            )
        )
    return lines


def _load(row: pd.Series) -> str:
    """``served``, or ``overloaded: <variants>`` (older points tables: ``?``)."""
    value = row.get("overloaded")
    if not isinstance(value, str):
        return "?"
    return f"overloaded: {value}" if value else "served"


def _table(points: pd.DataFrame, family: str) -> str:
    x = FAMILIES[family][2]
    qty = (
        (
            ("evictable_leaves", "leaves"),
            ("tree_nodes", "nodes"),
            ("evicts_per_request", "evicts/req"),
        )
        if family == "eviction"
        else (("matched_tokens", "matched tok"), ("key_tokens", "query tok"))
    )
    head = ["point", "KV pool (tok)", "requests", *(h for _, h in qty), "candidate",
            "op ratio [CI]", "TTFT p50 base→cand (ms)", "TTFT p50 ratio [CI]",
            "TTFT p99 ratio [CI]", "throughput ratio [CI]", "cache share base / cand",
            "load", "wall (s)"]  # fmt: skip
    rows = []
    for _, r in points.sort_values([x, "candidate"], na_position="first").iterrows():
        q = [f"{r[c]:,.2f}" if c == "evicts_per_request" else f"{r[c]:,.0f}" for c, _ in qty]
        cells = [
            str(r["point"]), f"{int(r['kv_capacity_tokens']):,}", f"{int(r['requests']):,}", *q,
            str(r["candidate"]), _ci(r, "op"),
            f"{1e3 * r['ttft_p50_base_s']:.1f} → {1e3 * r['ttft_p50_cand_s']:.1f}",
            _ci(r, "ttft_p50"), _ci(r, "ttft_p99"), _ci(r, "throughput"),
            f"{100 * r['cache_share_base']:.1f} % / {100 * r['cache_share_cand']:.1f} %",
            _load(r), f"{r['point_wall_s']:.0f}",
        ]  # fmt: skip
        rows.append(cells)
    return markdown_table(head, rows)


def _cost_lines(info: Any) -> list[str]:
    """The Method's line naming the step-time model (``meta["cost_model"]``: ``cost_info``)."""
    if not isinstance(info, Mapping):
        return []
    from radixbench.reports.runmeta import cost_source_text

    return [f"Step times: {info.get('name', '?')} — {cost_source_text(info)}.", ""]


def write_study(
    run_dir: Path,
    points: pd.DataFrame,
    meta: Mapping[str, Any],
    sections: Sequence[Callable[[pd.DataFrame], list[str]]] = (),
) -> dict[str, Any]:
    """Write the points and crossover tables, the plot and ``study.md`` into ``run_dir``.

    ``meta``: the study's fields (``name``, ``mode``, ``family``, ``description``,
    ``scenario``, ``baseline``, ``candidates``, ``wall_s``, ``environment``); ``sections``:
    functions of ``points`` returning Markdown lines, each appended to ``study.md`` after the
    method (a blank line before each). Returns
    ``{"study_md", "plot", "lines": [verdict lines], "crossover": frame}``.
    """
    family = str(meta["family"])
    cross = crossover_table(points, family)
    with atomic_paths(run_dir / "study.json") as (tmp,):
        tmp.write_text(json.dumps(dict(meta), indent=2, default=str), encoding="utf-8")
    write_table(points, run_dir, "points")
    write_table(cross, run_dir, "crossover")
    plot = plot_study(points, cross, meta, run_dir / "plots" / f"study-{family}.png")
    verdicts = verdict_lines(points, cross, family)
    env = meta.get("environment", {})
    md = [
        f"# radixbench study {meta['name']} ({meta['mode']})",
        "",
        str(meta["description"]),
        "",
        "## Verdict",
        "",
        *(f"- {v}" for v in verdicts),
        "",
        f"![study plot](plots/{plot.name})",
        "",
        "## Points",
        "",
        _table(points, family),
        "",
        "## Method",
        "",
        f"Scenario `{meta['scenario']}`, one compare per point with every variant interleaved in "
        "one process, **coupled clock**: the measured CPU time of each step's cache operations "
        "and batch builds is added to the step's simulated time, so the figures include this "
        f"machine's CPU speed ({env.get('cpu', '?')}, {env.get('cores', '?')} cores, shared). "
        "Ratios > 1 mean the candidate is better (latency: baseline / candidate; throughput: "
        "candidate / baseline); intervals are 95 % percentile bootstraps (1,000 seeded "
        "resamples; TTFT and E2E paired by request, throughput over 20 consecutive arrival "
        "blocks). Measured window: "
        + (
            "requests arriving at or after the first `evict` call (before it the pool is "
            "filling and both evictors run the same code)."
            if family == "eviction"
            else "all requests."
        ),
        "",
        f"**Crossover**: the smallest point from which on (that point and every larger one) "
        f"the whole 95 % CI of the ratio lies above {1 + MARGIN:.2f} (the candidate better by "
        f"more than {100 * MARGIN:.0f} %, with 95 % confidence); *interpolated*: where the "
        "point estimate, linear in log quantity between that point and the one before it, "
        "crosses the line. Cache share: measured CPU time of cache operations and batch "
        "builds / simulated step time, over the window.",
        "",
        *_cost_lines(meta.get("cost_model")),
        f"Wall time: {meta.get('wall_s', '?')} s; load average (1 min) at start / end: "
        f"{' / '.join(map(str, meta.get('load_avg_1min', ('?', '?'))))} on "
        f"{env.get('cores', '?')} cores (a loaded machine inflates every measured CPU time, "
        f"and with it the coupled-clock effects); git {env.get('git_commit', '?')}.",
    ]
    for section in sections:
        md += ["", *section(points)]
    with atomic_paths(run_dir / "study.md") as (tmp,):
        tmp.write_text("\n".join(md) + "\n", encoding="utf-8")
    return {
        "study_md": run_dir / "study.md",
        "plot": plot,
        "lines": verdicts,
        "crossover": cross,
    }
