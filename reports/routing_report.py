"""The report of a cluster run: ``report.md`` / ``report.html`` led by the router ranking.

:func:`write_routing_report` writes every table of a single-server report (``write_report``
with ``render=False``: requests, ops, summaries, cache verdicts, metrics), the cluster's own
tables — ``timeseries`` (with ``instance``), ``load`` (outstanding per instance after each
routing decision), ``routers``, ``instances``, ``router_verdicts`` (:mod:`radixbench.reports.
routing`) — and, rendered, the plots ``instance_load``, ``instance_hit_rate``, ``ttft_cdf``
(:mod:`radixbench.reports.routing_plots`) and the two reports. The answer (:func:`answer_lines`)
ranks the routers by TTFT p90, each with its TTFT p90 and output-throughput ratios against the
baseline router and their 95 % intervals, its prefix hit rate and load imbalance; overloaded
instances are flagged first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.reports.headline import Answer
from radixbench.reports.markdown import pipe_table
from radixbench.reports.pipeline import write_report
from radixbench.reports.record import RunMeta
from radixbench.reports.routing import instance_table, router_table, router_verdicts
from radixbench.reports.tables import write_table

__all__ = ["answer_lines", "router_view", "write_routing_report"]


def _x(r: float) -> str:
    return "n/a" if pd.isna(r) else f"{r:.3g}"


def answer_lines(routers: pd.DataFrame, verdicts: pd.DataFrame) -> list[str]:
    """One line per router, best TTFT p90 first (see the module docstring)."""
    lines = []
    ranked = routers.sort_values(["ttft_p90_s", "output_throughput"], ascending=[True, False])
    for k, row in enumerate(ranked.itertuples(index=False), start=1):
        text = (
            f"{k}. {row.label}: TTFT p90 {row.ttft_p90_s:.3g} s, output "
            f"{row.output_throughput:,.0f} tok/s, prefix hit rate {row.prefix_hit_rate:.3f}, "
            f"load imbalance {row.load_imbalance:.2f}"
        )
        mine = verdicts[verdicts["candidate"] == row.variant]
        parts = []
        for metric, what in (("ttft_p90_s", "TTFT p90"), ("output_throughput", "throughput")):
            v = mine[mine["metric"] == metric]
            if len(v):
                r = v.iloc[0]
                parts.append(
                    f"{what} {_x(r['ratio'])}x [{_x(r['ci_low'])}–{_x(r['ci_high'])}] "
                    f"({r['verdict']})"
                )
        if parts:
            text += f" — vs {mine.iloc[0]['baseline_router']}: " + ", ".join(parts)
        elif len(verdicts):
            text += " — the baseline"
        lines.append(text)
    return lines


def write_routing_report(
    run_dir: Path | str,
    requests: pd.DataFrame,
    ops: pd.DataFrame,
    timeseries: pd.DataFrame,
    metrics: pd.DataFrame,
    load: pd.DataFrame,
    meta: RunMeta,
    equivalence: Mapping[str, Any],
    baseline: Mapping[str, str] | None = None,
    *,
    render: bool = True,
    svg: bool = False,
    n_resamples: int = 1000,
) -> dict[str, Any]:
    """Write the cluster run's tables (and, with ``render``, plots and reports) into
    ``run_dir``; returns ``write_report``'s result with ``routers``, ``instances``,
    ``router_verdicts`` frames and ``answer`` replaced by the routing answer."""
    run_dir = Path(run_dir)
    result: dict[str, Any] = dict(
        write_report(
            run_dir,
            requests,
            ops,
            meta,
            equivalence,
            baseline,
            metrics=metrics,
            render=False,
            n_resamples=n_resamples,
            progress=False,
        )
    )
    seed = meta.seed if isinstance(meta.seed, int) else 0
    instances = instance_table(requests, timeseries, meta)
    routers = router_table(requests, metrics, instances)
    verdicts = router_verdicts(requests, baseline, n_resamples=n_resamples, seed=seed)
    tables = result["tables"]
    for stem, df in (
        ("timeseries", timeseries),
        ("load", load),
        ("routers", routers),
        ("instances", instances),
        ("router_verdicts", verdicts),
    ):
        tables[stem] = write_table(df, run_dir, stem)
    flags = [
        f"OVERLOADED ({r.router}, instance {r.instance}): {r.overload_reasons}"
        for r in instances.itertuples(index=False)
        if r.overloaded
    ]
    ans = Answer(load=flags, headline=answer_lines(routers, verdicts), serving=[])
    result.update(routers=routers, instances=instances, router_verdicts=verdicts, answer=ans)
    if render:
        _render(run_dir, result, requests, load, meta, equivalence, svg)
    return result


def _render(
    run_dir: Path,
    result: dict[str, Any],
    requests: pd.DataFrame,
    load: pd.DataFrame,
    meta: RunMeta,
    equivalence: Mapping[str, Any],
    svg: bool,
) -> None:
    from radixbench.reports.html import write_report_html
    from radixbench.reports.routing_plots import (
        plot_instance_hit_rate,
        plot_instance_load,
        plot_ttft_cdf,
    )

    plot_dir = run_dir / "plots"
    plots = {
        "ttft_cdf": plot_ttft_cdf(requests, plot_dir / "ttft_cdf.png", svg=svg),
        "instance_load": plot_instance_load(
            load, requests, plot_dir / "instance_load.png", svg=svg
        ),
        "instance_hit_rate": plot_instance_hit_rate(
            requests, plot_dir / "instance_hit_rate.png", svg=svg
        ),
    }
    result["plots"] = plots
    frames = {  # the columns report.md shows: no repeated variant names to scroll past
        "Routers": router_view(result["routers"]),
        "Router verdicts": result["router_verdicts"].drop(columns=["candidate", "baseline"]),
        "Instances": result["instances"].drop(columns=["variant"]),
    }
    result["report_md"] = _write_md(run_dir, result, plots, meta, equivalence)
    result["report_html"] = write_report_html(
        run_dir, meta=meta, equivalence=equivalence, frames=frames, plots=plots,
        answer=result["answer"], heading="radixbench cluster report",
    )  # fmt: skip


def router_view(routers: pd.DataFrame) -> pd.DataFrame:
    """The router table as the reports show it: one row per measure (``measure``: TTFT p50,
    throughput, prefix hit rate...), one column per router (its ``label``: the router's name,
    or the variant's where a router ran several cache variants), so a run of 4-8 routers and 17
    measures reads down the page instead of off its side. Numbers as floats (counts whole)."""
    measures = routers.drop(columns=["variant", "label", "router"], errors="ignore")
    with contextlib.suppress(TypeError, ValueError):  # a non-numeric measure: shown as is
        measures = measures.astype("float64")
    view = measures.T
    view.columns = [str(x) for x in routers["label"]]
    return view.rename_axis("measure").reset_index()


def _write_md(
    run_dir: Path,
    result: dict[str, Any],
    plots: dict[str, Path],
    meta: RunMeta,
    equivalence: Mapping[str, Any],
) -> Path:
    from radixbench.reports._atomic import atomic_paths
    from radixbench.reports.equivalence import equivalence_status
    from radixbench.reports.markdown import equivalence_block
    from radixbench.reports.runmeta import run_title, scenario_parts

    ans: Answer = result["answer"]
    routers: pd.DataFrame = result["routers"]
    cluster = meta.extra.get("cluster", {}) if isinstance(meta.extra, dict) else {}
    _, description = scenario_parts(meta)
    lines = [f"# radixbench cluster report: {run_title(meta)}", ""]
    lines += [f"_{description}_", ""] if description else []
    if equivalence_status(equivalence) == "FAILED":
        lines += [
            "> **WARNING: EQUIVALENCE FAILED** - cache variants of one router disagree on "
            "prefix hits (see [Equivalence](#equivalence-failed)).",
            "",
        ]
    lines += [f"> **{t}**" for t in ans.load] + ([""] if ans.load else [])
    lines += ["## Answer", "", "Routers ranked by TTFT p90 (simulated time):", ""]
    lines += [*list(ans.headline), ""]
    lines += [
        "## Run",
        "",
        f"- instances: {cluster.get('instances', routers['instances'].max())}; routers: "
        f"{', '.join(dict.fromkeys(routers['router']))}; requests: {meta.requests}; "
        f"seed: {meta.seed}",
        f"- per instance: KV pool {meta.kv_capacity_tokens} tokens, page {meta.page_size}, "
        f"max running {meta.max_running}, cost model {meta.cost_model}, clock {meta.clock}",
        f"- KV events: {cluster.get('kv_events', '-')}, delay "
        f"{cluster.get('event_delay_s', 0)} s, loss {cluster.get('event_loss', 0)}; router time "
        f"coupled into TTFT: {cluster.get('couple_router_time', False)}",
        "",
        *equivalence_block(equivalence),
        "",
        "## Routers",
        "",
        "One column per router; TTFT, TPOT and E2E in s, route times in µs, throughput in "
        "output tokens per simulated second (`routers.csv`: one row per router).",
        "",
        pipe_table(router_view(routers)),
        "",
        "## Router verdicts",
        "",
        "TTFT p90: ratio baseline / candidate; throughput: candidate / baseline (> 1: the "
        "candidate is better); 95 % percentile bootstrap over requests paired by rid.",
        "",
        pipe_table(result["router_verdicts"].drop(columns=["candidate", "baseline"])),
        "",
        "## Instances",
        "",
        pipe_table(result["instances"].drop(columns=["variant"])),
        "",
        "## Plots",
        "",
    ]
    for name, path in plots.items():
        lines += [f"### {name}", "", f"![{name}]({path.relative_to(run_dir)})", ""]
    lines += ["## Tables", ""]
    for stem, (parquet, csv) in result["tables"].items():
        lines.append(
            f"- `{stem}`: [parquet]({parquet.relative_to(run_dir)}) | "
            f"[csv]({csv.relative_to(run_dir)})"
        )
    path = run_dir / "report.md"
    with atomic_paths(path) as (tmp,):
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
