"""``radixbench study``: where an algorithm change matters, point by point on Dask.

A study file (TOML; ``eviction`` and ``matching`` are bundled, ``harness/study-<name>.toml``)
names a family, a base scenario, its overrides, the baseline and candidate variants of the
family's axis and, per mode (``quick`` / ``full``), the points: lists of scenario overrides
zipped position by position (all lists of one mode have the same length)::

    description = "..."                  # one line
    family = "eviction"                  # eviction (evictor axis) | matching (matcher axis)
    scenario = "eviction-pressure"       # bundled name, or a path relative to this file
    seed = 0
    [base]                               # scenario overrides of every point (dotted keys)
    "sim.clock" = "coupled"
    [variants]
    baseline = "heapify"
    candidates = ["persistent-heap", "lru-list"]
    [points.quick]
    "sim.kv_capacity_tokens" = [16000, 64000]
    "workload.sessions" = [600, 1000]

Each point is one :func:`radixbench.harness.compare.run_compare` of every variant, interleaved
in one process (so background load hits them alike), run on a Dask worker with the sweep's
client (:func:`radixbench.harness.sweep._client`: a ``LocalCluster`` or ``--scheduler``). Its
tables go to ``<run>/points/p<i>/``; :func:`radixbench.reports.study.point_rows` reduces them to
one row per candidate, and :func:`radixbench.reports.study_render.write_study` writes the
points table, the plot and ``study.md``. The whole run folder is written atomically
(:class:`radixbench.harness.runinfo.AtomicRunDir`).
"""

from __future__ import annotations

import dataclasses
import os
import time
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from radixbench.harness.compare import CompareSpec, run_compare
from radixbench.harness.runinfo import AtomicRunDir, environment
from radixbench.harness.scenario import Scenario, load_scenario
from radixbench.reports.diagnostics import load_check
from radixbench.reports.study import FAMILIES, point_rows
from radixbench.reports.tables import read_table

__all__ = ["StudyError", "StudyOutcome", "StudySpec", "bundled_studies", "load_study", "run_study"]

_TOP = {"description", "family", "scenario", "seed", "base", "variants", "points"}
_MODES = ("quick", "full")


class StudyError(ValueError):
    """A study file is malformed; one line naming the file and the key."""

    def __init__(self, file: str, key: str | None, reason: str) -> None:
        super().__init__(f"{file}: {key}: {reason}" if key else f"{file}: {reason}")


@dataclass(frozen=True)
class StudySpec:
    """A validated study in one mode. ``points``: one override dict per point (dotted scenario
    keys, applied after ``base``); ``scenario``: a bundled name or an absolute path."""

    name: str
    file: str
    description: str
    family: str
    scenario: str
    seed: int
    base: dict[str, Any]
    baseline: str
    candidates: tuple[str, ...]
    points: tuple[dict[str, Any], ...]
    mode: str

    @property
    def axis_key(self) -> str:
        """The scenario key listing the family's variants (``variants.evictors`` / ...)."""
        return {"evictor": "variants.evictors", "matcher": "variants.matchers"}[
            FAMILIES[self.family][0]
        ]

    def overrides(self, i: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Scenario overrides of point ``i``: base, the point, ``extra``, the variants, seed."""
        return {
            **self.base,
            **self.points[i],
            **(extra or {}),
            self.axis_key: [self.baseline, *self.candidates],
            "variants.impls": ["radixbench"],
            "seed": self.seed,
        }

    def variant_names(self, scenario: Scenario) -> tuple[str, list[str]]:
        """(baseline variant name, candidate variant names) of a point's scenario."""
        axis = FAMILIES[self.family][0]
        names = {getattr(v, axis): v.name for v in scenario.variants}
        return names[self.baseline], [names[c] for c in self.candidates]


def bundled_studies() -> dict[str, Path]:
    """Bundled study name -> path (``radixbench.harness/study-<name>.toml``)."""
    from radixbench import harness

    root = resources.files(harness)
    return {
        p.name[len("study-") : -len(".toml")]: Path(str(p))
        for p in sorted(root.iterdir(), key=lambda p: p.name)
        if p.name.startswith("study-") and p.name.endswith(".toml")
    }


def load_study(ref: str | Path, quick: bool = False) -> StudySpec:
    """Read and validate a study (bundled name or TOML path) in the ``quick`` or full mode.

    Every point's scenario is loaded too, so a bad key fails here, before any work starts.
    Raises :class:`StudyError` (or ``ScenarioError``), one line naming file and key.
    """
    bundled = bundled_studies()
    path = bundled.get(str(ref)) or Path(ref).expanduser()
    file = str(path)
    if str(ref) not in bundled and not path.is_file():
        raise StudyError(
            file, None, f"no such study file or bundled study; bundled: {', '.join(bundled)}"
        )
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise StudyError(file, None, f"invalid TOML: {e}") from None
    for key in doc:
        if key not in _TOP:
            raise StudyError(file, key, f"unknown key; known: {', '.join(sorted(_TOP))}")
    desc = doc.get("description")
    if not isinstance(desc, str) or not desc.strip() or "\n" in desc.strip():
        raise StudyError(file, "description", "a one-line string is required")
    family = doc.get("family")
    if not isinstance(family, str) or family not in FAMILIES:
        raise StudyError(file, "family", f"must be one of {', '.join(FAMILIES)}, got {family!r}")
    scen = doc.get("scenario")
    if not isinstance(scen, str):
        raise StudyError(file, "scenario", "a bundled scenario name or a path is required")
    if scen.endswith(".toml") and not Path(scen).is_absolute():
        scen = str((path.parent / scen).resolve())
    seed = doc.get("seed", 0)
    if not isinstance(seed, int) or seed < 0:
        raise StudyError(file, "seed", f"must be an int >= 0, got {seed!r}")
    base = doc.get("base", {})
    variants = doc.get("variants", {})
    if not isinstance(base, dict) or not isinstance(variants, dict):
        raise StudyError(
            file, "base" if not isinstance(base, dict) else "variants", "must be a table"
        )
    baseline, cands = variants.get("baseline"), variants.get("candidates")
    if not isinstance(baseline, str):
        raise StudyError(file, "variants.baseline", "a variant name is required")
    if not isinstance(cands, list) or not cands or not all(isinstance(c, str) for c in cands):
        raise StudyError(file, "variants.candidates", "a non-empty list of variant names")
    if baseline in cands or len(set(cands)) != len(cands):
        raise StudyError(file, "variants.candidates", "variants repeat")
    mode = "quick" if quick else "full"
    table = doc.get("points", {}).get(mode)
    if not isinstance(table, dict) or not table:
        raise StudyError(file, f"points.{mode}", "a table of override lists is required")
    lengths = {k: len(v) if isinstance(v, list) else -1 for k, v in table.items()}
    if min(lengths.values()) < 1 or len(set(lengths.values())) != 1:
        raise StudyError(file, f"points.{mode}", f"lists of one equal, non-zero length: {lengths}")
    n = next(iter(lengths.values()))
    points = tuple({k: v[i] for k, v in table.items()} for i in range(n))
    spec = StudySpec(
        path.name.removeprefix("study-").removesuffix(".toml"),
        file,
        desc.strip(),
        family,
        scen,
        seed,
        dict(base),
        baseline,
        tuple(cands),
        points,
        mode,
    )
    for i in range(n):
        try:
            scenario = load_scenario(spec.scenario, spec.overrides(i))
        except ValueError as e:
            raise StudyError(file, f"points.{mode}[{i}]", str(e).splitlines()[0]) from None
        if len(scenario.variants) != 1 + len(cands):
            raise StudyError(
                file,
                "base",
                f"{len(scenario.variants)} variants per point; set the other variant axes "
                'to one value each (e.g. "variants.flatten" = ["numpy"])',
            )
    return spec


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
        CompareSpec(scenario=scenario, device="cpu", out=Path(points_dir)),
        progress=False,
        run_name=f"p{i}",
        extra_meta={"study": spec.name, "point": i, "point_overrides": spec.points[i]},
        full_report=False,
    )
    tables = {t: read_table(out.run_dir, t) for t in ("requests", "ops", "timeseries")}
    rows = point_rows(
        tables["requests"],
        tables["ops"],
        tables["timeseries"],
        family=spec.family,
        baseline=base,
        candidates=cands,
        seed=spec.seed,
    )
    label = {base: spec.baseline, **dict(zip(cands, spec.candidates, strict=True))}
    for r in rows:  # name rows by the family's axis value; keep the full variant names
        r["baseline_variant"], r["candidate_variant"] = r["baseline"], r["candidate"]
        r["baseline"], r["candidate"] = label[r["baseline"]], label[r["candidate"]]
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
    from distributed import as_completed

    from radixbench.harness.sweep import _client
    from radixbench.reports.study_render import write_study

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    name = f"study-{spec.name}-{spec.mode}-{time.strftime('%Y%m%d-%H%M%S')}"
    rows: list[dict[str, Any]] = []
    with AtomicRunDir(out, name) as run:
        points_dir = run.tmp / "points"
        points_dir.mkdir()
        client = _client(scheduler, workers)
        try:
            # the largest points first: they are the longest, so the cluster ends together
            futures = {
                client.submit(run_point, spec, i, str(points_dir), extra, pure=False): i
                for i in reversed(range(len(spec.points)))
            }
            with tqdm(
                total=len(futures),
                unit="point",
                desc=f"study {spec.name}",
                disable=None if progress is None else not progress,
            ) as bar:
                for fut in as_completed(futures):
                    exc = fut.exception()
                    if exc is not None:
                        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                        raise RuntimeError(f"study point {futures[fut]} failed: {msg}")
                    rows.extend(fut.result())
                    bar.update(1)
        finally:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
        df = pd.DataFrame(rows).sort_values(["point", "candidate"], ignore_index=True)
        meta = {
            **{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)},
            "wall_s": round(time.perf_counter() - started, 1),
            "load_avg_1min": (round(load_start, 1), round(os.getloadavg()[0], 1)),
            "environment": environment(),
        }
        summary = write_study(run.tmp, df, meta)
    assert run.final is not None
    for key in ("study_md", "plot"):  # written under the temporary folder, now renamed
        summary[key] = run.final / Path(summary[key]).relative_to(run.tmp)
    return StudyOutcome(run.final, df, summary, time.perf_counter() - started)
