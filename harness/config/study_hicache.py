"""The HiCache study file (``radixbench study hicache``), validated into a :class:`HiCacheStudy`.

A study of family ``hicache`` varies HiCache's settings rather than an algorithm, so its file
has *sweeps* instead of the zipped points of the algorithm studies
(:mod:`radixbench.harness.config.study`)::

    description = "..."          # one line
    family = "hicache"
    scenario = "long-multi-turn" # bundled name, or a path relative to this file
    seed = 0
    [base]                       # scenario overrides of every point (dotted keys)
    [modes.quick]                # overrides of every point in that mode
    "workload.sessions" = 32
    [sweeps.ratio]               # one panel of the plot
    label = "host pool / device pool"
    key = "sim.hicache.ratio"    # the key the sweep varies (its x axis)
    log = true                   # a numeric x whose crossover is interpolated in log x
    quick = [1.0, 2.0, 4.0, 8.0] # its values per mode
    full = [1.0, 2.0, 4.0, 8.0]
    set = { "variants.hicache" = ["off", "write_through"] }   # the rest of every point

Each point runs every ``variants.hicache`` value of its ``set`` as one compare; the first value
is the baseline (``off``: the device-only cache). Every point's scenario is loaded when the file
is, so a bad key fails before any work starts (:class:`StudyError`, one line naming file and key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radixbench.harness.config.scenario import Scenario, load_scenario
from radixbench.harness.config.study_file import StudyError, read_study_file

__all__ = ["HiCacheStudy", "Point", "load_hicache_study"]

_TOP = {"description", "family", "scenario", "seed", "base", "modes", "sweeps"}
_SWEEP = {"label", "key", "log", "quick", "full", "set"}
_MODES = ("quick", "full")
_AXIS = "variants.hicache"


@dataclass(frozen=True)
class Point:
    """One point: ``sweep`` (its name), ``x`` (the swept key's value), ``overrides`` (all of
    the point's scenario overrides, base and mode included), ``policies`` (its
    ``variants.hicache`` values, the first the baseline)."""

    sweep: str
    x: Any
    overrides: dict[str, Any]
    policies: tuple[str, ...]


@dataclass(frozen=True)
class HiCacheStudy:
    """A validated HiCache study in one mode. ``sweeps``: name -> ``(label, key, log x)``;
    ``scenario``: a bundled name or an absolute path."""

    name: str
    file: str
    description: str
    scenario: str
    seed: int
    mode: str
    sweeps: dict[str, tuple[str, str, bool]]
    points: tuple[Point, ...]

    @property
    def family(self) -> str:
        return "hicache"

    def overrides(self, i: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Scenario overrides of point ``i`` with ``extra`` (``--set``) on top; seed last."""
        return {**self.points[i].overrides, **(extra or {}), "seed": self.seed}

    def load(self, i: int, extra: dict[str, Any] | None = None) -> Scenario:
        """Point ``i``'s scenario. Raises ``ScenarioError`` (one line)."""
        return load_scenario(self.scenario, self.overrides(i, extra))

    def check_overrides(self, extra: dict[str, Any]) -> None:
        """Load every point with ``extra`` so that a bad ``--set`` fails before any work."""
        for i in range(len(self.points)):
            self.load(i, extra)


def _sweep(file: str, name: str, sw: Any, mode: str) -> tuple[str, bool, list[Any], dict]:
    where = f"sweeps.{name}"
    if not isinstance(sw, dict):
        raise StudyError(file, where, f"must be a table of {', '.join(sorted(_SWEEP))}")
    for k in sw:
        if k not in _SWEEP:
            raise StudyError(
                file, f"{where}.{k}", f"unknown key; known: {', '.join(sorted(_SWEEP))}"
            )
    key, values, rest = sw.get("key"), sw.get(mode), sw.get("set", {})
    if not isinstance(key, str) or not key:
        raise StudyError(file, f"{where}.key", "the dotted scenario key the sweep varies")
    if not isinstance(values, list) or not values:
        raise StudyError(file, f"{where}.{mode}", "a non-empty list of values is required")
    if len(set(map(repr, values))) != len(values):
        raise StudyError(file, f"{where}.{mode}", f"values repeat: {values}")
    if not isinstance(rest, dict):
        raise StudyError(file, f"{where}.set", "must be a table of scenario overrides")
    log = sw.get("log", False)
    if not isinstance(log, bool) or (log and not all(isinstance(v, int | float) for v in values)):
        raise StudyError(file, f"{where}.log", "true or false; true needs numeric values")
    pol = rest.get(_AXIS)
    if not isinstance(pol, list) or len(pol) < 2 or not all(isinstance(p, str) for p in pol):
        raise StudyError(
            file, f"{where}.set.{_AXIS}", "a baseline and at least one candidate policy"
        )
    return key, log, values, rest


def load_hicache_study(ref: str | Path, quick: bool = False) -> HiCacheStudy:
    """Read and validate a HiCache study (module docstring) in the ``quick`` or full mode;
    loads every point's scenario. Raises :class:`StudyError`, one line naming file and key."""
    study = read_study_file(ref, _TOP)
    file, doc = study.file, study.doc
    if doc.get("family") != "hicache":
        raise StudyError(file, "family", f"must be hicache, got {doc.get('family')!r}")
    mode = "quick" if quick else "full"
    modes = study.table("modes")
    for m in modes:
        if m not in _MODES or not isinstance(modes[m], dict):
            raise StudyError(file, f"modes.{m}", f"a table named one of {', '.join(_MODES)}")
    base = {**study.table("base"), **modes.get(mode, {})}
    sweeps: dict[str, tuple[str, str, bool]] = {}
    points: list[Point] = []
    for name, sw in study.table("sweeps").items():
        key, log, values, rest = _sweep(file, name, sw, mode)
        sweeps[name] = (str(sw.get("label", key)), key, log)
        for v in values:
            over = {**base, **rest, key: v}
            points.append(Point(name, v, over, tuple(over[_AXIS])))
    if not points:
        raise StudyError(file, "sweeps", "at least one sweep with values is required")
    spec = HiCacheStudy(
        study.name, file, study.description, study.scenario, study.seed, mode, sweeps,
        tuple(points),
    )  # fmt: skip
    for i, p in enumerate(points):  # a bad key fails here, before any work starts
        where = f"sweeps.{p.sweep}.{mode}[{_index(points, i)}]"
        try:
            sc = spec.load(i)
        except ValueError as e:
            raise StudyError(file, where, str(e).splitlines()[0]) from None
        if sc.sim.hicache is None:
            raise StudyError(file, where, "HiCache is off at this point (sim.hicache.enabled)")
    return spec


def _index(points: list[Point], i: int) -> int:
    """Position of point ``i`` within its sweep's list of values."""
    return sum(1 for p in points[:i] if p.sweep == points[i].sweep)
