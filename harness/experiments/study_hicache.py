"""The ``hicache`` study family (``radixbench study hicache``): HiCache's settings (host pool
ratio, write policy, storage bandwidth, prefetch policy) against the device-only cache, and
where an L3 hit becomes slower than recompute.

Each point of a :class:`~radixbench.harness.config.study_hicache.HiCacheStudy` is one
:func:`radixbench.harness.experiments.compare.run_compare` of its ``variants.hicache`` values
(the device-only baseline and the HiCache settings, interleaved in one process) into
``<run>/points/p<i>/``; :func:`radixbench.reports.study_hicache.hicache_point_rows` reduces it
to one row per candidate, and
:func:`radixbench.reports.study_hicache_render.write_hicache_study` renders the study. Run by
the one study runner (:func:`radixbench.harness.experiments.study.run_study`); registered as a
:class:`~radixbench.harness.experiments.study_family.StudyFamily`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.harness.config.study_hicache import HiCacheStudy, load_hicache_study
from radixbench.harness.experiments.compare import CompareSpec, run_compare
from radixbench.harness.experiments.study_family import StudyFamily, register_family
from radixbench.reports.diagnostics import load_check
from radixbench.reports.study_hicache import hicache_point_rows
from radixbench.reports.tables import read_table

__all__ = ["CROSSOVER_TOKENS", "crossover_inputs", "run_hicache_point"]

#: Prompt length (tokens) of the L3-vs-recompute crossover: the 8k-token prompt of the sglang
#: v0.5.10 report quoted in issue 24 (2.45 s from a file L3 against 1.73 s recomputed).
CROSSOVER_TOKENS = 8192


def run_hicache_point(
    study: HiCacheStudy, i: int, points_dir: str, extra: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Run point ``i`` (one compare into ``points_dir/p<i>``) and reduce it to rows; runs on a
    Dask worker. Raises what ``run_compare`` raises."""
    point = study.points[i]
    scenario = study.load(i, extra)
    t0 = time.perf_counter()
    out = run_compare(
        CompareSpec(scenario=scenario, device="cpu", out=Path(points_dir), aa=False),
        progress=False,
        run_name=f"p{i}",
        extra_meta={"study": study.name, "point": i, "point_overrides": point.overrides},
        full_report=False,
    )
    req, ts = read_table(out.run_dir, "requests"), read_table(out.run_dir, "timeseries")
    rows = hicache_point_rows(req, read_table(out.run_dir, "transfers"), point.policies, study.seed)
    hc = scenario.sim.hicache
    assert hc is not None  # the loader checked every point
    storage = hc.storage
    meta = {
        "point": i,
        "sweep": point.sweep,
        "x": point.x if isinstance(point.x, str) else f"{point.x:g}",
        "host_ratio": hc.ratio,
        "storage_gbps": storage.write_gbps if storage else float("nan"),
        "prefetch_policy": storage.prefetch_policy if storage else "",
        "overloaded": ", ".join(x.variant for x in load_check(req, ts, out.meta) if x.overloaded),
        "requests": int(out.meta.requests or 0),
        "kv_capacity_tokens": scenario.sim.kv_capacity_tokens,
        "equivalent": bool(out.equivalence["ok"]),
        "point_wall_s": round(time.perf_counter() - t0, 1),
    }
    return [{**meta, **r} for r in rows]


def crossover_inputs(study: HiCacheStudy, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The constants of the L3-vs-recompute crossover, from the first point with storage (else
    the first point): ``tokens``, ``recompute_s`` (the cost model's prefill of them, s),
    ``bytes_per_token``, ``host_link_bytes_s`` (B/s), ``page`` (tokens), ``op_latency_s``."""
    sims = (study.load(i, extra).sim for i in range(len(study.points)))
    first = study.load(0, extra).sim
    sim = next((s for s in sims if s.hicache and s.hicache.storage), first)
    storage = sim.hicache.storage if sim.hicache else None
    n = CROSSOVER_TOKENS
    return {
        "tokens": n,
        "recompute_s": float(sim.cost.prefill_time([n], [0])),
        "bytes_per_token": sim.hicache_bytes_per_token,
        "host_link_bytes_s": sim.host_link_bytes_s,
        "page": sim.page_size,
        "op_latency_s": storage.op_latency_s if storage else 100e-6,
    }


def _meta(study: HiCacheStudy, extra: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "name": study.name, "file": study.file, "description": study.description,
        "family": study.family, "scenario": study.scenario, "seed": study.seed,
        "mode": study.mode, "sweeps": study.sweeps, "extra": extra or {},
        "crossover": crossover_inputs(study, extra),
    }  # fmt: skip


def _render(
    run_dir: Path, points: pd.DataFrame, meta: Mapping[str, Any], study: HiCacheStudy
) -> dict[str, Any]:
    from radixbench.reports.study_hicache_render import write_hicache_study

    return write_hicache_study(run_dir, points, meta)


register_family(
    StudyFamily(
        names=("hicache",),
        load=load_hicache_study,
        run_point=run_hicache_point,
        # the points with most variants first: the cluster ends together
        order=lambda study: sorted(
            range(len(study.points)), key=lambda j: -len(study.points[j].policies)
        ),
        sort_by=("point", "candidate"),
        meta=_meta,
        render=_render,
        no_impls="a hicache study compares HiCache settings, not implementations",
    )
)
