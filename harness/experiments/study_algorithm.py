"""The algorithm study families, ``eviction`` and ``matching`` (``radixbench study eviction``,
``study matching``): the serving effect of the family's algorithms against the quantity their
cost scales with (evictable leaves, matched length), under the coupled clock.

A point is one compare of the baseline and candidate algorithms (and the reference
implementation, when the study names one) into ``<run>/points/p<i>/``;
:func:`radixbench.reports.study.point_rows` reduces it to one row per candidate, and
:func:`radixbench.reports.study_render.write_study` renders the study (the crossover per
metric, the plot, ``study.md`` with the study file's extra sections). Study files:
:mod:`radixbench.harness.config.study`. Registered as a
:class:`~radixbench.harness.experiments.study_family.StudyFamily`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.config.study import StudySpec, load_study
from radixbench.harness.experiments.compare import CompareSpec, run_compare
from radixbench.harness.experiments.study_family import StudyFamily, register_family
from radixbench.reports.diagnostics import load_check
from radixbench.reports.study import FAMILIES, point_rows
from radixbench.reports.tables import read_table
from radixbench.sim.cost import cost_info

__all__ = ["best_variant", "run_point"]


def run_point(
    spec: StudySpec, i: int, points_dir: str, extra: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Run point ``i`` (all variants, one compare into ``points_dir/p<i>``) and reduce it to
    rows; runs on a Dask worker. Raises what ``run_compare`` raises."""
    scenario = load_scenario(spec.scenario, spec.overrides(i, extra))
    base, cands = spec.variant_names(scenario)
    t0 = time.perf_counter()
    out = run_compare(
        # no A/A replica: a study's intervals come from its own paired bootstrap per point
        CompareSpec(scenario=scenario, device="cpu", out=Path(points_dir), aa=False),
        progress=False,
        run_name=f"p{i}",
        extra_meta={"study": spec.name, "point": i, "point_overrides": spec.points[i]},
        full_report=False,
    )
    tables = {t: read_table(out.run_dir, t) for t in ("requests", "ops", "timeseries")}
    own = [base, *cands[: len(spec.candidates)]]  # the family's own algorithms (radixbench's)
    rows = point_rows(
        tables["requests"],
        tables["ops"],
        tables["timeseries"],
        family=spec.family,
        baseline=base,
        candidates=cands,
        seed=spec.seed,
        best=best_variant(tables["ops"], FAMILIES[spec.family][1], own) if cands else None,
    )
    label = {base: spec.baseline, **dict(zip(cands, spec.labels(scenario), strict=True))}
    for r in rows:  # name rows by the family's axis value; keep the full variant names
        r["baseline_variant"], r["candidate_variant"] = r["baseline"], r["candidate"]
        r["baseline"], r["candidate"] = label[r["baseline"]], label[r["candidate"]]
        if "best" in r:
            r["best"] = label[r["best"]]
    loads = load_check(tables["requests"], tables["timeseries"], out.meta)
    meta = {
        "point": i,
        # variants (by the family's axis value) the load rules flag: their latencies measure
        # the queue ("" = every variant served)
        "overloaded": ", ".join(label.get(x.variant, x.variant) for x in loads if x.overloaded),
        "requests": int(out.meta.requests or 0),
        "kv_capacity_tokens": scenario.sim.kv_capacity_tokens,
        "equivalent": bool(out.equivalence["ok"]),
        "point_wall_s": round(time.perf_counter() - t0, 1),
    }
    return [{**meta, **{f"param:{k}": v for k, v in spec.points[i].items()}, **r} for r in rows]


def best_variant(ops: pd.DataFrame, op: str, variants: list[str]) -> str:
    """The one of ``variants`` whose median ``op`` call is fastest in ``ops`` (the study's
    "best evictor" / matcher of a point; chosen on the op's own time, not on the serving
    metrics it is then compared by). A variant without calls counts as slowest."""
    sel = ops[(ops["op"] == op) & ops["variant"].isin(variants)]
    med = sel.groupby("variant")["ns"].median()
    return min(variants, key=lambda v: float(med.get(v, float("inf"))))


def _meta(spec: StudySpec, extra: dict[str, Any] | None) -> dict[str, Any]:
    """The study's settings (its extra sections are rendered, not recorded)."""
    return {
        **{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name != "sections"},
        "cost_model": cost_info(load_scenario(spec.scenario, spec.overrides(0, extra)).sim.cost),
    }


def _render(
    run_dir: Path, points: pd.DataFrame, meta: Mapping[str, Any], spec: StudySpec
) -> dict[str, Any]:
    from radixbench.reports.study_render import write_study

    return write_study(run_dir, points, meta, spec.section_functions())


def _with_impls(spec: StudySpec, specs: list[str]) -> StudySpec:
    return spec.with_impls(specs)


register_family(
    StudyFamily(
        names=tuple(FAMILIES),
        load=load_study,
        run_point=run_point,
        order=lambda spec: list(reversed(range(len(spec.points)))),  # the largest first
        sort_by=("point", "candidate"),
        meta=_meta,
        render=_render,
        with_impls=_with_impls,
    )
)
