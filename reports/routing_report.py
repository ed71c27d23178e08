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
from radixbench.reports.markdown import pipe_table, table_links
from radixbench.reports.parted import TableParts
from radixbench.reports.pipeline import write_report
from radixbench.reports.record import RunMeta
from radixbench.reports.routing import (
    gateway_table,
    instance_table,
    router_labels,
    router_table,
    router_verdicts,
)
from radixbench.reports.tables import write_table

__all__ = ["answer_lines", "router_view", "write_routing_report"]


def _x(r: float) -> str:
    return "n/a" if pd.isna(r) else f"{r:.3g}"


def _group_labels(routers: pd.DataFrame) -> dict[str, str]:
    """Variant -> its router's label without the cache variant ("cache-aware, 8 gateways"):
    :func:`router_labels` over the router axes only."""
    axes = [c for c in ("router", "gateways", "instances") if c in routers.columns]
    key = routers[axes].astype(str).agg("/".join, axis=1)
    by_key = router_labels(routers.assign(variant=key))
    return dict(zip(routers["variant"], key.map(by_key), strict=True))


def _line(row: Any, name: str, verdicts: pd.DataFrame, base_name: Mapping[str, str]) -> str:
    """One router's answer text after its rank: ``name``, its figures and its verdicts against
    the baseline router (named through ``base_name``)."""
    text = (
        f"{name}: TTFT p90 {row.ttft_p90_s:.3g} s, output {row.output_throughput:,.0f} tok/s, "
        f"prefix hit rate {row.prefix_hit_rate:.3f}, load imbalance {row.load_imbalance:.2f}"
    )
    if getattr(row, "gateways", 1) > 1:
        text += (
            f", per-gateway hit rate {row.gateway_hit_rate_mean:.3f} "
            f"[{row.gateway_hit_rate_min:.3f}–{row.gateway_hit_rate_max:.3f}] over "
            f"{row.gateways} gateways"
        )
    mine = verdicts[verdicts["candidate"] == row.variant]
    parts = []
    for metric, what in (("ttft_p90_s", "TTFT p90"), ("output_throughput", "throughput")):
        v = mine[mine["metric"] == metric]
        if len(v):
            r = v.iloc[0]
            parts.append(
                f"{what} {_x(r['ratio'])}x [{_x(r['ci_low'])}–{_x(r['ci_high'])}] ({r['verdict']})"
            )
    if parts:
        base = mine.iloc[0]
        text += f" — vs {base_name.get(base['baseline'], base['baseline_router'])}: "
        text += ", ".join(parts)
    elif len(verdicts):
        text += " — the baseline"
    return text


def answer_lines(routers: pd.DataFrame, verdicts: pd.DataFrame) -> list[str]:
    """One numbered line per router, best TTFT p90 first (see the module docstring). The cache
    variants behind one router whose lines read the same once named by the router alone
    (identical figures and verdicts: the isolated clock gives every cache variant the same
    schedule) share one line that says how many they are; any that differ keep their own line,
    named in full."""
    label = dict(zip(routers["variant"], routers["label"], strict=True))
    group = _group_labels(routers)
    ranked = routers.sort_values(["ttft_p90_s", "output_throughput"], ascending=[True, False])
    rows = list(ranked.itertuples(index=False))
    short = [_line(r, group[str(r.variant)], verdicts, group) for r in rows]
    alike: dict[str, int] = {}
    for text in short:
        alike[text] = alike.get(text, 0) + 1
    lines: list[str] = []
    done: set[str] = set()
    for row, text in zip(rows, short, strict=True):
        n = alike[text]
        if n > 1 and text in done:
            continue
        if n > 1:
            done.add(text)
            name = group[str(row.variant)]
            text = text.replace(f"{name}: ", f"{name} ({n} cache variants, alike): ", 1)
        else:
            text = _line(row, label[str(row.variant)], verdicts, label)
        lines.append(f"{len(lines) + 1}. {text}")
    return lines


def write_routing_report(
    run_dir: Path | str,
    requests: pd.DataFrame,
    ops: pd.DataFrame | TableParts,
    timeseries: pd.DataFrame | TableParts,
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
    ``router_verdicts`` frames and ``answer`` replaced by the routing answer. ``ops`` and
    ``timeseries``: frames, or tables in parts (``reports.parted.TableParts``: a whole trace
    behind N instances), read in parts and written chunk by chunk."""
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
        ("gateways", gateway_table(requests)),
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
    frames = shown_tables(result)
    result["report_md"] = _write_md(run_dir, result, frames, plots, meta, equivalence)
    result["report_html"] = write_report_html(
        run_dir, meta=meta, equivalence=equivalence, frames=frames, plots=plots,
        answer=result["answer"], heading="radixbench cluster report",
    )  # fmt: skip


def shown_tables(result: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The routers, router verdicts and instances tables as report.md and report.html show
    them: no repeated variant names to scroll past, each router named by its ``label``
    (:func:`~radixbench.reports.routing.router_labels`: "cache-aware, 8 gateways" beside
    "cache-aware, 1 gateway"). Mutates nothing."""
    routers = result["routers"]
    label = dict(zip(routers["variant"], routers["label"], strict=True))
    verdicts, instances = result["router_verdicts"], result["instances"]
    return {
        "Routers": router_view(routers),
        "Router verdicts": verdicts.assign(
            candidate_router=verdicts["candidate"].map(label).fillna(verdicts["candidate_router"]),
            baseline_router=verdicts["baseline"].map(label).fillna(verdicts["baseline_router"]),
        ).drop(columns=["candidate", "baseline"]),
        "Instances": instances.assign(
            router=instances["variant"].map(label).fillna(instances["router"])
        ).drop(columns=["variant"]),
    }


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
    frames: Mapping[str, pd.DataFrame],
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
        pipe_table(frames["Routers"]),
        "",
        "## Router verdicts",
        "",
        "TTFT p90: ratio baseline / candidate; throughput: candidate / baseline (> 1: the "
        "candidate is better); 95 % percentile bootstrap over requests paired by rid.",
        "",
        pipe_table(frames["Router verdicts"]),
        "",
        "## Instances",
        "",
        pipe_table(frames["Instances"]),
        "",
        "## Plots",
        "",
    ]
    for name, path in plots.items():
        lines += [f"### {name}", "", f"![{name}]({path.relative_to(run_dir)})", ""]
    lines += ["## Tables", ""]
    lines += table_links(result["tables"], run_dir)
    path = run_dir / "report.md"
    with atomic_paths(path) as (tmp,):
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
