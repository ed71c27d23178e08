"""The routing study file (``family = "routing"``), validated into a :class:`RoutingStudySpec`.

::

    description = "..."                  # one line
    family = "routing"
    scenario = "routing-tenants.toml"    # a scenario with a [cluster] table (path or bundled)
    seed = 0
    tenants_per_instance = 18.75         # tenants = round(this x instances), >= 1
    duration_s = 60.0                    # requests = ceil(load x instances x duration_s)
    gateways = [1, 8]                    # router replicas, one variant each (default [1])
    [base]                               # scenario overrides of every point (dotted keys)
    [variants]
    baseline = "round-robin"             # routers
    candidates = ["cache-aware", "precise"]
    [points.quick]                       # zipped lists: one point per position
    instances = [1, 2, 4, 8]
    load = [2.0, 2.0, 2.0, 2.0]          # requests/s per instance (Poisson)

A point's scenario: ``cluster.instances`` = N, ``cluster.routers`` = baseline + candidates,
``workload.tenants``, ``workload.requests`` and ``arrivals.rate`` = load x N as above,
``cluster.gateways`` = the study's gateway counts (each router runs behind each). Every
point's scenario is loaded with the file, so a bad key fails before any work starts
(:class:`~radixbench.harness.config.study.StudyError`, one line naming file and key).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.config.study_file import StudyError, read_study_file

__all__ = ["RoutingStudySpec", "load_routing_study"]

_TOP = {
    "description", "family", "scenario", "seed", "tenants_per_instance", "duration_s", "base",
    "variants", "points", "gateways",
}  # fmt: skip


@dataclass(frozen=True)
class RoutingStudySpec:
    """A validated routing study in one ``mode``; ``points``: ``(instances, load)`` pairs;
    ``gateways``: gateway counts every point runs each router behind."""

    name: str
    file: str
    description: str
    scenario: str
    seed: int
    tenants_per_instance: float
    duration_s: float
    base: dict[str, Any]
    baseline: str
    candidates: tuple[str, ...]
    points: tuple[tuple[int, float], ...]
    mode: str
    gateways: tuple[int, ...] = (1,)

    @property
    def family(self) -> str:
        return "routing"

    @property
    def routers(self) -> list[str]:
        return [self.baseline, *self.candidates]

    def overrides(self, i: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Scenario overrides of point ``i``: base, the point's derived keys, ``extra``."""
        n, load = self.points[i]
        return {
            **self.base,
            "cluster.instances": n,
            "cluster.routers": self.routers,
            "workload.tenants": max(1, round(self.tenants_per_instance * n)),
            "workload.requests": max(1, math.ceil(load * n * self.duration_s)),
            "arrivals.rate": load * n,
            **({"cluster.gateways": list(self.gateways)} if self.gateways != (1,) else {}),
            **(extra or {}),
            "seed": self.seed,
        }

    def check_overrides(self, extra: dict[str, Any]) -> None:
        """Load every point's scenario with ``extra`` too (raises what ``load_scenario``
        raises)."""
        for i in range(len(self.points)):
            load_scenario(self.scenario, self.overrides(i, extra))


def load_routing_study(ref: str | Path, quick: bool = False) -> RoutingStudySpec:
    """Read and validate a routing study (bundled name or path) in the quick or full mode;
    raises :class:`StudyError` (or ``ScenarioError``) naming file and key."""
    study = read_study_file(ref, _TOP)
    file, doc = study.file, study.doc
    nums = {}
    for key, default in (("tenants_per_instance", 1.0), ("duration_s", 60.0)):
        v = doc.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
            raise StudyError(file, key, f"must be a number > 0, got {v!r}")
        nums[key] = v
    base, variants = doc.get("base", {}), doc.get("variants", {})
    if not isinstance(base, dict) or not isinstance(variants, dict):
        raise StudyError(file, "base" if not isinstance(base, dict) else "variants", "a table")
    baseline, cands = variants.get("baseline"), variants.get("candidates")
    if not isinstance(baseline, str):
        raise StudyError(file, "variants.baseline", "a router name is required")
    if not isinstance(cands, list) or not cands or not all(isinstance(c, str) for c in cands):
        raise StudyError(file, "variants.candidates", "a non-empty list of router names")
    gws = doc.get("gateways", [1])
    if (
        not isinstance(gws, list)
        or not gws
        or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in gws)
        or len(set(gws)) != len(gws)
    ):
        raise StudyError(file, "gateways", f"a list of distinct ints >= 1, got {gws!r}")
    mode = "quick" if quick else "full"
    table = doc.get("points", {}).get(mode)
    if not isinstance(table, dict) or set(table) != {"instances", "load"}:
        raise StudyError(file, f"points.{mode}", "lists `instances` and `load` are required")
    ns, loads = table["instances"], table["load"]
    if not isinstance(ns, list) or not isinstance(loads, list) or len(ns) != len(loads) or not ns:
        raise StudyError(file, f"points.{mode}", "two non-empty lists of one length")
    if not all(isinstance(n, int) and n >= 1 for n in ns):
        raise StudyError(file, f"points.{mode}.instances", "ints >= 1")
    if not all(isinstance(x, int | float) and x > 0 for x in loads):
        raise StudyError(file, f"points.{mode}.load", "numbers > 0 (requests/s per instance)")
    spec = RoutingStudySpec(
        study.name,
        file,
        study.description,
        study.scenario,
        study.seed,
        float(nums["tenants_per_instance"]),
        float(nums["duration_s"]),
        dict(base),
        baseline,
        tuple(cands),
        tuple((int(n), float(x)) for n, x in zip(ns, loads)),
        mode,
        tuple(gws),
    )
    for i in range(len(spec.points)):
        try:
            load_scenario(spec.scenario, spec.overrides(i))
        except ValueError as e:
            raise StudyError(file, f"points.{mode}[{i}]", str(e).splitlines()[0]) from None
    return spec
