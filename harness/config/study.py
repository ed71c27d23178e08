"""Study files: the TOML that defines a ``radixbench study``, validated into a :class:`StudySpec`.

A study file (TOML; ``eviction`` and ``matching`` are bundled,
``harness/config/studies/study-<name>.toml``)
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
    sections = ["pr6907"]                # optional: extra study.md sections (:data:`SECTIONS`)

Every point's scenario is loaded when the file is, so a bad key fails before any work starts.
:mod:`radixbench.harness.experiments.study` runs the points. An extra section is study-specific
prose computed from the points (e.g. the check of SGLang PR #6907's claim): a module beside the
bundled study that uses it, in :mod:`radixbench.harness.config.studies`, named by the study file
(``sections``; a file that names none gets :data:`DEFAULT_SECTIONS` of its family).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.cache.registry import ImplSpec
from radixbench.harness.config.scenario import Scenario, load_scenario
from radixbench.harness.config.studies.pr6907 import pr6907_section
from radixbench.harness.config.studies.served import served_section
from radixbench.harness.config.study_file import StudyError, bundled_studies, read_study_file
from radixbench.reports.study import FAMILIES

__all__ = [
    "DEFAULT_SECTIONS",
    "SECTIONS",
    "StudyError",
    "StudySpec",
    "bundled_studies",
    "load_study",
]

_TOP = {"description", "family", "scenario", "seed", "base", "variants", "points", "sections"}

#: Extra ``study.md`` sections a study file may name: name -> function of the points table
#: (one row per point and candidate) returning Markdown lines, appended after the method.
SECTIONS: dict[str, Callable[[pd.DataFrame], list[str]]] = {
    "pr6907": pr6907_section,
    "served": served_section,
}
#: The sections of a study file that names none, by family: an eviction study checks PR
#: #6907's claim (as every eviction study did before study files named their sections).
DEFAULT_SECTIONS: dict[str, tuple[str, ...]] = {"eviction": ("pr6907",)}


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
    sections: tuple[str, ...] = ()
    #: implementation specs compared instead of the family's algorithms (``--impl``): the
    #: baseline is the first one's label, the candidates the others'; radixbench's variants
    #: then run the family's baseline algorithm (``axis_value``)
    impls: tuple[str, ...] = ()
    axis_value: str = ""
    #: ``[variants] reference``: an implementation spec run beside the algorithms at every
    #: point (``sglang``: the cache sglang 0.5.23 serves with), drawn as one more candidate;
    #: "" = none. Not run with ``impls`` (the implementations are then the comparison).
    reference: str = ""
    #: further implementation specs run beside them, each one more candidate curve (a list
    #: ``reference``'s specs after the first: sglang's Python tree core, a patch of it...)
    served: tuple[str, ...] = ()

    @property
    def axis_key(self) -> str:
        """The scenario key listing the family's variants (``variants.evictors`` / ...)."""
        return {"evictor": "variants.evictors", "matcher": "variants.matchers"}[
            FAMILIES[self.family][0]
        ]

    def with_impls(self, specs: list[str]) -> StudySpec:
        """This study comparing the implementations ``specs`` (``--impl``: an SGLang patch
        against upstream, say) at every point, instead of the family's algorithms. Raises
        :class:`~radixbench.harness.config.impl.ImplError` (one line) for a bad spec or fewer
        than two."""
        from radixbench.harness.config.impl import ImplError, resolve_impls

        impls = resolve_impls(specs)
        if len(impls) < 2:
            raise ImplError("--impl: a study compares two or more implementations")
        labels = [i.label for i in impls]
        return dataclasses.replace(
            self,
            impls=tuple(specs),
            axis_value=self.baseline,
            baseline=labels[0],
            candidates=tuple(labels[1:]),
            reference="",
            served=(),
        )

    def overrides(self, i: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Scenario overrides of point ``i``: base, the point, ``extra``, the variants, seed."""
        algorithms = [self.axis_value] if self.impls else [self.baseline, *self.candidates]
        return {
            **self.base,
            **self.points[i],
            **(extra or {}),
            self.axis_key: algorithms,
            "variants.impls": list(self.impls) or ["radixbench", *self.served],
            "variants.reference": self.reference or "none",
            "seed": self.seed,
        }

    def check_overrides(self, extra: dict[str, Any]) -> None:
        """Load every point's scenario with ``extra`` overrides (``--set``) too, so that a bad
        one fails before any work starts; raises what ``load_scenario`` raises. Reads only."""
        for i in range(len(self.points)):
            load_scenario(self.scenario, self.overrides(i, extra))

    def section_functions(self) -> tuple[Callable[[pd.DataFrame], list[str]], ...]:
        """The functions of this study's extra ``study.md`` sections (:data:`SECTIONS`)."""
        return tuple(SECTIONS[name] for name in self.sections)

    def variant_names(self, scenario: Scenario) -> tuple[str, list[str]]:
        """(baseline variant name, candidate variant names) of a point's scenario: by the
        family's axis value, or (``impls``) by implementation label; the scenario's reference
        variant (when it runs) comes last among the candidates."""
        ref = [v for v in scenario.variants if scenario.reference and v.impl != "radixbench"]
        if self.impls:
            names = {v.impl_label: v.name for v in scenario.variants}
        else:
            axis = FAMILIES[self.family][0]
            names = {getattr(v, axis): v.name for v in scenario.variants if v not in ref}
        return names[self.baseline], [names[c] for c in self.candidates] + [
            v.name for v in ref if not self.impls
        ]

    def labels(self, scenario: Scenario) -> list[str]:
        """Display names of :meth:`variant_names`' candidates, in that order: the family's
        axis values, then per implementation run beside them ``"<label> (<kind>)"``
        (:func:`_kind`: served and its tree core, or patch)."""
        if not scenario.reference or self.impls:
            return list(self.candidates)
        others = [v for v in scenario.variants if v.impl != "radixbench"]
        return [*self.candidates, *(f"{v.impl_label} ({_kind(v.impl)})" for v in others)]


def load_study(ref: str | Path, quick: bool = False) -> StudySpec:
    """Read and validate a study (bundled name or TOML path) in the ``quick`` or full mode.

    Every point's scenario is loaded too, so a bad key fails here, before any work starts.
    Raises :class:`StudyError` (or ``ScenarioError``), one line naming file and key.
    """
    study = read_study_file(ref, _TOP)
    file, doc = study.file, study.doc
    family = doc.get("family")
    if not isinstance(family, str) or family not in FAMILIES:
        raise StudyError(file, "family", f"must be one of {', '.join(FAMILIES)}, got {family!r}")
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
    reference = variants.get("reference", "none")
    refs = reference if isinstance(reference, list) else [reference]
    if (
        not refs
        or not all(isinstance(r, str) and r.strip() for r in refs)
        or (len(refs) > 1 and "none" in refs)
    ):
        raise StudyError(file, "variants.reference", "an implementation spec, a list, or 'none'")
    refs = [_spec_path(r, Path(file).parent) for r in refs]
    for key in variants:
        if key not in ("baseline", "candidates", "reference"):
            raise StudyError(
                file, f"variants.{key}", "unknown key; known: baseline, candidates, reference"
            )
    mode = "quick" if quick else "full"
    table = doc.get("points", {}).get(mode)
    if not isinstance(table, dict) or not table:
        raise StudyError(file, f"points.{mode}", "a table of override lists is required")
    lengths = {k: len(v) if isinstance(v, list) else -1 for k, v in table.items()}
    if min(lengths.values()) < 1 or len(set(lengths.values())) != 1:
        raise StudyError(file, f"points.{mode}", f"lists of one equal, non-zero length: {lengths}")
    n = next(iter(lengths.values()))
    points = tuple({k: v[i] for k, v in table.items()} for i in range(n))
    sections = doc.get("sections", list(DEFAULT_SECTIONS.get(family, ())))
    if not isinstance(sections, list) or not all(isinstance(x, str) for x in sections):
        raise StudyError(file, "sections", "a list of section names is required")
    for name in sections:
        if name not in SECTIONS:
            raise StudyError(
                file, "sections", f"unknown section {name!r}; known: {', '.join(SECTIONS)}"
            )
    spec = StudySpec(
        study.name,
        file,
        study.description,
        family,
        study.scenario,
        study.seed,
        dict(base),
        baseline,
        tuple(cands),
        points,
        mode,
        tuple(sections),
        reference="" if refs[0] == "none" else refs[0],
        served=tuple(refs[1:]),
    )
    for i in range(n):
        try:
            scenario = load_scenario(spec.scenario, spec.overrides(i))
        except ValueError as e:
            raise StudyError(file, f"points.{mode}[{i}]", str(e).splitlines()[0]) from None
        if len(scenario.variants) != 1 + len(cands) + bool(scenario.reference) + len(refs[1:]):
            raise StudyError(
                file,
                "base",
                f"{len(scenario.variants)} variants per point; set the other variant axes "
                'to one value each (e.g. "variants.flatten" = ["numpy"])',
            )
    return spec


def _kind(impl: str) -> str:
    """What an implementation run beside a study's algorithms is, for its label."""
    if ImplSpec.parse(impl).user_class is not None:
        return "patch"
    return {"sglang": "served, Rust core", "sglang-python": "served, Python core"}.get(
        impl, "served"
    )


def _spec_path(spec: str, base: Path) -> str:
    """An implementation spec ``NAME:FILE.py[:CLASS]`` with a relative ``FILE.py`` made
    absolute against ``base`` (the study file's folder); other specs unchanged."""
    parsed = ImplSpec.parse(spec)
    user = parsed.user_class
    if user is None or not user[0].endswith(".py") or Path(user[0]).is_absolute():
        return spec
    file, cls = user
    return f"{parsed.name}:{(base / file).resolve()}" + (f":{cls}" if cls else "")
