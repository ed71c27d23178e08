"""Running a ``radixbench study``: every point of a study
(:class:`~radixbench.harness.config.study.StudySpec`) on Dask, reduced to rows and written as one
study folder.

Each point is one :func:`radixbench.harness.experiments.compare.run_compare` of every variant,
interleaved in one process (so background load hits them alike), run on a Dask worker by the
runner sweeps use too (:mod:`radixbench.harness.experiments.dask_runner`: a ``LocalCluster`` or
``--scheduler``). Its tables go to ``<run>/points/p<i>/``;
:func:`radixbench.reports.study.point_rows` reduces them to one row per candidate, and
:func:`radixbench.reports.study_render.write_study` writes the points table, the plot and
``study.md``. The whole run folder is written atomically
(:class:`radixbench.harness.experiments.rundir.AtomicRunDir`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.config.study import StudySpec
from radixbench.harness.experiments.compare import CompareSpec, run_compare
from radixbench.harness.experiments.dask_runner import run_points
from radixbench.harness.experiments.rundir import AtomicRunDir, environment
from radixbench.reports.diagnostics import load_check
from radixbench.reports.study import FAMILIES, point_rows
from radixbench.reports.tables import read_table
from radixbench.sim.cost import cost_info

__all__ = ["StudyOutcome", "best_variant", "run_point", "run_study"]


@dataclass(frozen=True)
class StudyOutcome:
    """``run_dir``: the study's folder; ``points``: one row per point and candidate
    (:func:`radixbench.reports.study.point_rows` columns plus ``point`` and its overrides);
    ``summary``: what :func:`radixbench.reports.study_render.write_study` returned."""

    run_dir: Path
    points: pd.DataFrame
    summary: dict[str, Any]
    wall_s: float


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


def run_study(
    spec: StudySpec,
    out: Path,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    extra: dict[str, Any] | None = None,
) -> StudyOutcome:
    """Run every point of ``spec`` on Dask and write the study into a new folder under ``out``.

    ``scheduler``: address of an existing cluster, else a ``LocalCluster`` of ``workers``
    processes (default: one per core); ``extra``: overrides applied to every point (``--set``).
    The folder ``out/study-<name>-<mode>-<timestamp>`` appears whole or not at all. A point
    that fails stops the study with its one-line error (``RuntimeError``).
    """
    from radixbench.reports.study_render import write_study

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    name = f"study-{spec.name}-{spec.mode}-{time.strftime('%Y%m%d-%H%M%S')}"
    with AtomicRunDir(out, name) as run:
        points_dir = run.tmp / "points"
        points_dir.mkdir()

        rows = run_points(  # the largest points first: they are the longest
            run_point, (spec, str(points_dir), extra), list(reversed(range(len(spec.points)))),
            scheduler=scheduler, workers=workers, progress=progress, desc=f"study {spec.name}",
        )  # fmt: skip
        df = pd.DataFrame(rows).sort_values(["point", "candidate"], ignore_index=True)
        meta = {  # the study's settings (its extra sections are rendered, not recorded)
            **{
                f.name: getattr(spec, f.name)
                for f in dataclasses.fields(spec)
                if f.name != "sections"
            },
            "cost_model": cost_info(
                load_scenario(spec.scenario, spec.overrides(0, extra)).sim.cost
            ),
            "wall_s": round(time.perf_counter() - started, 1),
            "load_avg_1min": (round(load_start, 1), round(os.getloadavg()[0], 1)),
            "environment": environment(),
        }
        summary = write_study(run.tmp, df, meta, spec.section_functions())
    assert run.final is not None
    for key in ("study_md", "plot"):  # written under the temporary folder, now renamed
        summary[key] = run.final / Path(summary[key]).relative_to(run.tmp)
    return StudyOutcome(run.final, df, summary, time.perf_counter() - started)
