"""Study families by name: what a study file's ``family`` selects.

A family is one module of this package that registers a :class:`StudyFamily` when imported:
how its study files load (into a spec, the :class:`StudySpecLike` the runner reads), how one
point runs and reduces to rows (on a Dask worker), in what order points run and rows sort, what
the study's record (``study.json``) holds, and its renderer — one interface for all:
``render(run_dir, points, meta, spec)`` writes the tables, the plot and ``study.md`` and returns
``{"lines": verdict lines, "study_md": path, "plot": path, ...}``. The one runner,
:func:`radixbench.harness.experiments.study.run_study`, does the rest for every family (the
atomic run folder, the points on Dask, the common record keys), and ``radixbench study`` prints
every family's outcome alike.

Built-in families (:data:`BUILTINS`, registered on first lookup): ``eviction`` and ``matching``
(:mod:`~radixbench.harness.experiments.study_algorithm`), ``hicache``
(:mod:`~radixbench.harness.experiments.study_hicache`), ``routing``
(:mod:`~radixbench.harness.experiments.study_routing`). A new family is one such module
registered with :func:`register_family` (and named in :data:`BUILTINS` when bundled).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BUILTINS",
    "StudyFamily",
    "StudySpecLike",
    "family_of",
    "register_family",
    "study_families",
]

#: The modules of this package that register the built-in families.
BUILTINS = ("study_algorithm", "study_hicache", "study_routing")


class StudySpecLike(Protocol):
    """What the runner reads of any family's validated study: its ``name``, ``family``,
    ``mode`` (``quick`` / ``full``), its ``points`` (a sequence, one item a point) and
    ``check_overrides(extra)`` (loads every point with ``--set``'s overrides; raises what
    ``load_scenario`` raises)."""

    @property
    def name(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def points(self) -> Sequence[Any]: ...
    def check_overrides(self, extra: dict[str, Any]) -> None: ...


#: ``render(run_dir, points, meta, spec)``: writes the study's files into ``run_dir``; returns
#: at least ``lines`` (the verdict lines), ``study_md`` and ``plot`` (paths under ``run_dir``).
Renderer = Callable[[Path, "pd.DataFrame", Mapping[str, Any], Any], dict[str, Any]]


@dataclass(frozen=True)
class StudyFamily:
    """One family of studies.

    ``names``: the ``family`` values of the study files it runs. ``load(ref, quick)``: the
    validated spec (raises ``StudyError`` / ``ScenarioError``, one line). ``run_point(spec,
    i, points_dir, extra)``: point ``i`` run into ``points_dir/p<i>`` and reduced to rows (on
    a Dask worker; must be importable by name). ``order(spec)``: the points in the order they
    start (the longest first). ``sort_by``: the columns the points table is sorted by.
    ``meta(spec, extra)``: the study's own record keys (the runner adds ``wall_s``,
    ``load_avg_1min``, ``environment``). ``render``: :data:`Renderer`. ``with_impls(spec,
    specs)``: the study comparing implementations (``--impl``), or None when the family
    cannot (``no_impls`` says why, after ``--impl: ``). ``columns``: the points table's
    columns ``radixbench study`` prints before the verdict lines (none: only the lines)."""

    names: tuple[str, ...]
    load: Callable[[str | Path, bool], StudySpecLike]
    run_point: Callable[..., list[dict[str, Any]]]
    order: Callable[[Any], list[int]]
    sort_by: tuple[str, ...]
    meta: Callable[[Any, dict[str, Any] | None], dict[str, Any]]
    render: Renderer
    with_impls: Callable[[Any, list[str]], StudySpecLike] | None = None
    no_impls: str = ""
    columns: tuple[str, ...] = ()


_FAMILIES: dict[str, StudyFamily] = {}


def register_family(family: StudyFamily, *, replace: bool = False) -> StudyFamily:
    """Add ``family`` under each of its names; ``ValueError`` if a name is taken (unless
    ``replace``). Returns ``family``."""
    taken = [n for n in family.names if n in _FAMILIES and _FAMILIES[n] is not family]
    if taken and not replace:
        raise ValueError(f"study family {taken[0]!r} is already registered")
    for name in family.names:
        _FAMILIES[name] = family
    return family


def study_families() -> dict[str, StudyFamily]:
    """Family name -> family, the built-ins registered."""
    for module in BUILTINS:
        importlib.import_module(f"radixbench.harness.experiments.{module}")
    return dict(_FAMILIES)


def family_of(ref: str | Path) -> StudyFamily:
    """The family that runs the study ``ref`` (bundled name or path), from its ``family`` key.
    Raises ``StudyError`` (one line naming the file) for an unreadable file or an unknown or
    missing family."""
    from radixbench.harness.config.study_file import StudyError, read_study_doc

    path, doc = read_study_doc(ref)
    name, families = doc.get("family"), study_families()
    if not isinstance(name, str) or name not in families:
        raise StudyError(str(path), "family", f"must be one of {', '.join(families)}, got {name!r}")
    return families[name]
