"""Running a ``radixbench study`` of any family: every point on Dask, reduced to rows and
written as one study folder.

The family (:mod:`radixbench.harness.experiments.study_family`, by the spec's ``family``) runs
each point — one :func:`radixbench.harness.experiments.compare.run_compare` of its variants,
interleaved in one process so background load hits them alike, into ``<run>/points/p<i>/`` —
and reduces it to rows; the runner sweeps use too
(:mod:`radixbench.harness.experiments.dask_runner`: a ``LocalCluster`` or ``--scheduler``)
spreads the points over workers. The family's renderer then writes the points table, the plot
and ``study.md``. The whole run folder is written atomically
(:class:`radixbench.harness.experiments.rundir.AtomicRunDir`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.harness.experiments.dask_runner import run_points
from radixbench.harness.experiments.rundir import AtomicRunDir, environment
from radixbench.harness.experiments.study_family import StudySpecLike, study_families

__all__ = ["StudyOutcome", "run_study"]


@dataclass(frozen=True)
class StudyOutcome:
    """``run_dir``: the study's folder; ``points``: one row per point and candidate (the
    family's point rows); ``summary``: what the family's renderer returned (``lines``,
    ``study_md``, ``plot``, ...)."""

    run_dir: Path
    points: pd.DataFrame
    summary: dict[str, Any]
    wall_s: float


def run_study(
    spec: StudySpecLike,
    out: Path,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    extra: dict[str, Any] | None = None,
) -> StudyOutcome:
    """Run every point of ``spec`` (a validated study of any registered family) on Dask and
    write the study into a new folder under ``out``.

    ``scheduler``: address of an existing cluster, else a ``LocalCluster`` of ``workers``
    processes (default: one per core); ``extra``: overrides applied to every point (``--set``).
    The folder ``out/study-<name>-<mode>-<timestamp>`` appears whole or not at all. A point
    that fails stops the study with its one-line error (``RuntimeError``).
    """
    family = study_families()[spec.family]
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    name = f"study-{spec.name}-{spec.mode}-{time.strftime('%Y%m%d-%H%M%S')}"
    with AtomicRunDir(out, name) as run:
        points_dir = run.tmp / "points"
        points_dir.mkdir()
        rows = run_points(
            family.run_point, (spec, str(points_dir), extra), family.order(spec),
            scheduler=scheduler, workers=workers, progress=progress, desc=f"study {spec.name}",
        )  # fmt: skip
        df = pd.DataFrame(rows).sort_values(list(family.sort_by), ignore_index=True)
        meta = {
            **family.meta(spec, extra),
            "wall_s": round(time.perf_counter() - started, 1),
            "load_avg_1min": (round(load_start, 1), round(os.getloadavg()[0], 1)),
            "environment": environment(),
        }
        summary = family.render(run.tmp, df, meta, spec)
    assert run.final is not None
    for key in ("study_md", "plot"):  # written under the temporary folder, now renamed
        summary[key] = run.final / Path(summary[key]).relative_to(run.tmp)
    return StudyOutcome(run.final, df, summary, time.perf_counter() - started)
