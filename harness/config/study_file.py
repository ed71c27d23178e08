"""What every study file shares, whatever its family: where a study is found (a bundled name or
a TOML path), its ``family``, and the header every family's file starts with (``description``,
``scenario``, ``seed``), read and checked once here for the loaders of each family
(:mod:`~radixbench.harness.config.study`, :mod:`~radixbench.harness.config.study_hicache`,
:mod:`~radixbench.harness.config.study_routing`). Imports only the standard library.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "StudyError",
    "StudyFile",
    "bundled_studies",
    "read_study_doc",
    "read_study_file",
    "study_family",
    "study_path",
]


class StudyError(ValueError):
    """A study file is malformed; one line naming the file and the key."""

    def __init__(self, file: str, key: str | None, reason: str) -> None:
        super().__init__(f"{file}: {key}: {reason}" if key else f"{file}: {reason}")


def bundled_studies() -> dict[str, Path]:
    """Bundled study name -> path (``radixbench.harness.config.studies/study-<name>.toml``)."""
    from radixbench.harness.config import studies

    root = resources.files(studies)
    return {
        p.name[len("study-") : -len(".toml")]: Path(str(p))
        for p in sorted(root.iterdir(), key=lambda p: p.name)
        if p.name.startswith("study-") and p.name.endswith(".toml")
    }


def study_path(ref: str | Path) -> Path:
    """The file of ``ref``: a bundled study's, else ``ref`` as a path (``~`` expanded)."""
    return bundled_studies().get(str(ref)) or Path(ref).expanduser()


def read_study_doc(ref: str | Path) -> tuple[Path, dict[str, Any]]:
    """The path and TOML document of the study ``ref`` (bundled name or path). Raises
    :class:`StudyError` (one line; a missing file lists the bundled studies)."""
    bundled = bundled_studies()
    path = study_path(ref)
    if str(ref) not in bundled and not path.is_file():
        raise StudyError(
            str(path), None, f"no such study file or bundled study; bundled: {', '.join(bundled)}"
        )
    try:
        return path, tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise StudyError(str(path), None, f"invalid TOML: {e}") from None


def study_family(ref: str | Path) -> str | None:
    """The ``family`` a study file (bundled name or path) names; None when the file cannot be
    read or names none (its loader then says why, in one line)."""
    try:
        family = read_study_doc(ref)[1].get("family")
    except StudyError:
        return None
    return family if isinstance(family, str) else None


@dataclass(frozen=True)
class StudyFile:
    """A study file read and its header checked: ``name`` (the file's stem without
    ``study-``), ``file`` (its path, for error messages), ``doc`` (the TOML document),
    ``description`` (one line), ``scenario`` (a bundled name or an absolute path: a relative
    ``.toml`` path is read from the study file's folder) and ``seed`` (int >= 0)."""

    name: str
    file: str
    doc: dict[str, Any]
    description: str
    scenario: str
    seed: int

    def table(self, key: str) -> dict[str, Any]:
        """The table ``key`` of the document ({} when absent). Raises :class:`StudyError` when
        it is not a table."""
        value = self.doc.get(key, {})
        if not isinstance(value, dict):
            raise StudyError(self.file, key, "must be a table")
        return value


def read_study_file(ref: str | Path, top: Collection[str]) -> StudyFile:
    """Read the study ``ref`` (bundled name or TOML path) and check what every family's file
    has: only the top-level keys ``top``, a one-line ``description``, a ``scenario`` and a
    ``seed`` (int >= 0, default 0). Raises :class:`StudyError` (one line naming the file and
    the key; a missing file lists the bundled studies)."""
    path, doc = read_study_doc(ref)
    file = str(path)
    for key in doc:
        if key not in top:
            raise StudyError(file, key, f"unknown key; known: {', '.join(sorted(top))}")
    desc = doc.get("description")
    if not isinstance(desc, str) or not desc.strip() or "\n" in desc.strip():
        raise StudyError(file, "description", "a one-line string is required")
    scen = doc.get("scenario")
    if not isinstance(scen, str) or not scen:
        raise StudyError(file, "scenario", "a bundled scenario name or a path is required")
    if scen.endswith(".toml") and not Path(scen).is_absolute():
        scen = str((path.parent / scen).resolve())
    seed = doc.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise StudyError(file, "seed", f"must be an int >= 0, got {seed!r}")
    name = path.name.removeprefix("study-").removesuffix(".toml")
    return StudyFile(name, file, doc, desc.strip(), scen, seed)
