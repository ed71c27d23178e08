"""Tests for radixbench.harness.experiments.study_family: study families by name (issue 32
item 4) — the built-ins registered, a study file's ``family`` selecting one, a new family
registered from code, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.harness.config.study_file import StudyError
from radixbench.harness.experiments.study_family import (
    StudyFamily,
    family_of,
    register_family,
    study_families,
)


def test_builtin_families() -> None:
    families = study_families()
    assert set(families) >= {"eviction", "matching", "hicache", "routing"}
    assert families["eviction"] is families["matching"]  # one module, two axes
    assert families["hicache"].with_impls is None and families["eviction"].with_impls


def test_a_new_family_is_one_registration(tmp_path: Path) -> None:
    toy = StudyFamily(
        names=("toy-family",), load=lambda ref, quick: None,  # type: ignore[arg-type,return-value]
        run_point=lambda *a: [], order=lambda spec: [], sort_by=("point",),
        meta=lambda spec, extra: {}, render=lambda *a: {},
    )  # fmt: skip
    register_family(toy)
    f = tmp_path / "study-toy.toml"
    f.write_text('family = "toy-family"\n')
    assert family_of(f) is toy
    register_family(toy)  # the same family again: no error
    with pytest.raises(ValueError, match="already registered"):
        register_family(StudyFamily(**{**toy.__dict__}))


def test_unknown_family_and_missing_file_are_one_line(tmp_path: Path) -> None:
    f = tmp_path / "study-x.toml"
    f.write_text('family = "nope"\n')
    with pytest.raises(StudyError, match=r"study-x.toml: family: must be one of .*eviction.*nope"):
        family_of(f)
    with pytest.raises(StudyError, match="no such study file or bundled study; bundled: "):
        family_of(tmp_path / "missing.toml")
