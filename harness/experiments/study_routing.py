"""The ``routing`` study family (``radixbench study routing``): routers against round-robin as
the instance count and the load per instance grow.

Each point (instances, load) of a :class:`~radixbench.harness.config.study_routing.
RoutingStudySpec` is one cluster compare of every router into ``<run>/points/p<i>/``, reduced
and rendered by :mod:`radixbench.reports.study_routing`. Run by the one study runner
(:func:`radixbench.harness.experiments.study.run_study`), the largest points first; registered
as a :class:`~radixbench.harness.experiments.study_family.StudyFamily`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.config.study_routing import RoutingStudySpec, load_routing_study
from radixbench.harness.experiments.compare import CompareSpec, run_compare
from radixbench.harness.experiments.study_family import StudyFamily, register_family
from radixbench.reports.tables import read_table

__all__ = ["run_routing_point"]


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


#: The points table's columns ``radixbench study routing`` prints.
_COLUMNS = (
    "load", "instances", "gateways", "router", "ttft_p90_s", "output_throughput",
    "prefix_hit_rate", "ttft_p90_ratio", "throughput_ratio", "overloaded_instances",
)  # fmt: skip


def _meta(spec: RoutingStudySpec, extra: dict[str, Any] | None) -> dict[str, Any]:
    return {"name": spec.name, "mode": spec.mode, "description": spec.description}


def _render(
    run_dir: Path, points: pd.DataFrame, meta: Mapping[str, Any], spec: RoutingStudySpec
) -> dict[str, Any]:
    from radixbench.reports.study_routing import write_routing_study

    return write_routing_study(run_dir, points, meta)


register_family(
    StudyFamily(
        names=("routing",),
        load=load_routing_study,
        run_point=run_routing_point,
        order=lambda spec: sorted(  # the largest first: the cluster ends together
            range(len(spec.points)), key=lambda i: -spec.points[i][0] * spec.points[i][1]
        ),
        sort_by=("load", "instances", "gateways", "router"),
        meta=_meta,
        render=_render,
        no_impls="the routing study runs radixbench's cache",
        columns=_COLUMNS,
    )
)
