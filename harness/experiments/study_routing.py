"""Running ``radixbench study routing``: every point (instances, load) of a routing study on
Dask, one cluster compare per point, reduced by :mod:`radixbench.reports.study_routing`.

As the other studies (:mod:`radixbench.harness.experiments.study`): points run on the Dask
runner sweeps use (``LocalCluster`` or ``--scheduler``), largest first, each point's tables
under ``<run>/points/p<i>/``, the whole folder written atomically.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.config.study_routing import RoutingStudySpec
from radixbench.harness.experiments.compare import CompareSpec, run_compare
from radixbench.harness.experiments.dask_runner import run_points
from radixbench.harness.experiments.rundir import AtomicRunDir, environment
from radixbench.harness.experiments.study import StudyOutcome
from radixbench.reports.tables import read_table

__all__ = ["run_routing_point", "run_routing_study"]


def run_routing_point(
    spec: RoutingStudySpec, i: int, points_dir: str, extra: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Run point ``i`` (every router, one cluster compare into ``points_dir/p<i>``) and reduce
    it to rows; runs on a Dask worker."""
    from radixbench.reports.study_routing import point_rows

    scenario = load_scenario(spec.scenario, spec.overrides(i, extra))
    n, load = spec.points[i]
    t0 = time.perf_counter()
    out = run_compare(
        CompareSpec(scenario=scenario, device="cpu", out=Path(points_dir)),
        progress=False,
        run_name=f"p{i}",
        extra_meta={"study": spec.name, "point": i, "instances": n, "load": load},
        full_report=False,
    )
    requests = read_table(out.run_dir, "requests")
    metrics = read_table(out.run_dir, "metrics")
    instances = read_table(out.run_dir, "instances")
    rows = point_rows(requests, metrics, seed=spec.seed)
    over = instances.groupby("variant")["overloaded"].sum().to_dict()
    wall = round(time.perf_counter() - t0, 1)
    return [
        {
            "point": i,
            "instances": n,
            "load": load,
            "requests": int(out.meta.requests or 0),
            "overloaded_instances": int(over.get(r["variant"], 0)),
            "point_wall_s": wall,
            **r,
        }
        for r in rows
    ]


def run_routing_study(
    spec: RoutingStudySpec,
    out: Path,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    extra: dict[str, Any] | None = None,
) -> StudyOutcome:
    """Run every point of ``spec`` on Dask into ``out/study-<name>-<mode>-<time>`` (whole or
    not at all). A failing point stops the study with its one-line error (``RuntimeError``)."""
    from radixbench.reports.study_routing import write_routing_study

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    name = f"study-{spec.name}-{spec.mode}-{time.strftime('%Y%m%d-%H%M%S')}"
    with AtomicRunDir(out, name) as run:
        points_dir = run.tmp / "points"
        points_dir.mkdir()
        order = sorted(
            range(len(spec.points)), key=lambda i: -spec.points[i][0] * spec.points[i][1]
        )

        rows = run_points(
            run_routing_point, (spec, str(points_dir), extra), order,
            scheduler=scheduler, workers=workers, progress=progress, desc=f"study {spec.name}",
        )  # fmt: skip
        df = pd.DataFrame(rows).sort_values(
            ["load", "instances", "gateways", "router"], ignore_index=True
        )
        meta = {
            "name": spec.name,
            "mode": spec.mode,
            "description": spec.description,
            "wall_s": round(time.perf_counter() - started, 1),
            "load_avg_1min": (round(load_start, 1), round(os.getloadavg()[0], 1)),
            "environment": environment(),
        }
        summary = write_routing_study(run.tmp, df, meta)
    assert run.final is not None
    for key in ("study_md", "plot"):
        summary[key] = run.final / Path(summary[key]).relative_to(run.tmp)
    return StudyOutcome(run.final, df, summary, time.perf_counter() - started)
