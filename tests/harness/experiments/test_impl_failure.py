"""Issue 31, item 3: an implementation under test that raises in the middle of a run (a
patch's method, its constructor, a registered plug-in's) ends the command in one line naming
the spec, the class and the method, with exit status 3 (not 1, "variants diverged"); a bug of
radixbench's own outside any implementation prints its traceback and exits 4."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from radixbench.cache.interface import ImplInfo
from radixbench.cache.radix_cache import RadixCache
from radixbench.cache.registry import ImplEntry, register_impl, unregister_impl
from radixbench.harness.cli import main
from radixbench.harness.experiments.impl_failure import IMPL_FAILED_STATUS, ImplFailed

HERE = Path(__file__).name


class RaisingToy(RadixCache):
    """radixbench's cache, but every match raises."""

    def match_prefix(self, key: Any) -> Any:
        raise RuntimeError("boom")


class CtorToy(RadixCache):
    """radixbench's cache whose constructor raises."""

    def __init__(self, *args: Any) -> None:
        raise ValueError("constructor boom")


def _entry(name: str, cls: type) -> ImplEntry:
    info = ImplInfo(
        name, name, "0", str(Path(__file__).parent), f"{cls.__module__}.{cls.__qualname__}"
    )
    return ImplEntry(
        name=name,
        load=lambda spec, arg: (name, None, info),
        factory=lambda handle, pool, alloc, config: cls(pool, alloc, config),
        help="raises (tests)",
    )


@pytest.fixture
def plugins() -> Iterator[None]:
    register_impl(_entry("raising", RaisingToy))
    register_impl(_entry("ctor", CtorToy))
    yield
    unregister_impl("raising")
    unregister_impl("ctor")


def _run(impl: str, out: Path, capsys: pytest.CaptureFixture[str], *more: str) -> tuple[int, str]:
    argv = ["compare", "prefix-repetition", "--requests", "40", "--impl", impl,
            "--evictors", "heapify", "--matchers", "galloping", "--flatten", "chain",
            "--reference", "none", "--out", str(out), "--no-progress", *more]  # fmt: skip
    code = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    return code, err[0]


def test_a_plugin_method_that_raises_is_one_line_naming_spec_class_and_method(
    plugins: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    code, line = _run("radixbench,raising", out, capsys)
    assert code == IMPL_FAILED_STATUS == 3
    assert line.startswith(
        "radixbench: error: impl raising: RaisingToy.match_prefix raised RuntimeError: boom ("
    ), line
    assert f"{HERE}:" in line  # where it was raised
    assert not out.exists() or not any(out.iterdir())  # no run folder left behind


def test_a_plugin_constructor_that_raises_names_spec_and_class(
    plugins: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ValueError raised by the implementation is its failure, not bad input (exit 2)."""
    code, line = _run("radixbench,ctor", tmp_path / "runs", capsys)
    assert code == 3
    assert line.startswith(
        "radixbench: error: impl ctor: the constructor of CtorToy raised ValueError: "
        "constructor boom ("
    ), line


def test_the_traceback_on_request(
    plugins: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.setenv("RADIXBENCH_TRACEBACK", "1")
    argv = ["compare", "prefix-repetition", "--requests", "40", "--impl", "raising", "--flatten",
            "chain", "--reference", "none", "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().splitlines()[-1].startswith("radixbench: error: impl raising: ")


def test_a_bug_outside_any_implementation_is_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    import radixbench.harness.cli.compare as cli_compare

    def broken(args: Any) -> Any:
        raise KeyError("oops")

    monkeypatch.setattr(cli_compare, "spec_from_args", broken)
    assert main(["compare", "--out", str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith(
        "radixbench: internal error: KeyError"
    )


def test_impl_failed_survives_pickling() -> None:
    """Sweep and study points run on Dask workers: the failure crosses processes whole."""
    e = ImplFailed("s", "C", "m", "RuntimeError: x", "f.py:1")
    back = pickle.loads(pickle.dumps(e))
    assert str(back) == str(e) == "impl s: C.m raised RuntimeError: x (f.py:1)"


UNIFIED_PATCH = """
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache


class Raising(UnifiedRadixCache):
    def match_prefix(self, params):
        raise RuntimeError("boom")


class Ctor(UnifiedRadixCache):
    def __init__(self, params):
        raise RuntimeError("constructor boom")
"""

LEGACY_PATCH = """
from sglang.srt.mem_cache.radix_cache import RadixCache


class LegacyEvict(RadixCache):
    def evict(self, params):
        raise RuntimeError("evict boom")
"""


@pytest.mark.sglang
@pytest.mark.parametrize(
    ("impl", "expect"),
    [
        ("sglang-python:{p}:Raising", "Raising.match_prefix raised RuntimeError: boom"),
        ("sglang-python:{p}:Ctor", "the constructor of Ctor raised RuntimeError: constructor boom"),
        ("sglang-legacy:{p}:LegacyEvict", "LegacyEvict.evict raised RuntimeError: evict boom"),
    ],
)
def test_an_sglang_patch_that_raises_names_the_impl_value(
    impl: str, expect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "raising.py"
    spec = impl.format(p=patch)
    base = spec.partition(":")[0]
    patch.write_text(LEGACY_PATCH if base == "sglang-legacy" else UNIFIED_PATCH)
    more = ["--kv-capacity", "3000"]  # small enough that evict runs
    code, line = _run(f"{base},{spec}", tmp_path / "runs", capsys, *more)
    assert code == 3
    assert line.startswith(f"radixbench: error: impl {spec}: {expect} ("), line
    assert "raising.py:" in line


def test_a_sweep_cell_whose_implementation_raises_fails_in_one_named_line(
    plugins: None, tmp_path: Path
) -> None:
    """A sweep cell runs on a Dask worker: the failure comes back as the cell's one line (it
    was re-raised there, retried, and reported as a bare 'boom')."""
    from radixbench.harness.config.grid import load_grid
    from radixbench.harness.experiments.sweep import CellFailed, run_cell

    grid_file = tmp_path / "g.toml"
    grid_file.write_text(
        'scenario = "prefix-repetition"\n[base]\narrivals.max_requests = 12\n'
        '[grid]\n"sim.kv_capacity_tokens" = [50000]\n'
        '[variants]\nevictors = ["heapify"]\nmatchers = ["linear"]\n'
        'impls = ["radixbench", "raising"]\n'
    )
    (cell,) = load_grid(grid_file).cells
    result = run_cell(cell, str(tmp_path / "cells"))
    assert isinstance(result, CellFailed)
    assert result.reason.startswith("impl raising: RaisingToy.match_prefix raised RuntimeError")


def test_a_study_point_whose_implementation_raises_comes_back_named(plugins: None) -> None:
    """A study point runs on a Dask worker: the failure is named there (the traceback it is
    read from does not cross processes) and crosses back whole."""
    import torch

    from radixbench.cache.allocator import TokenToKVPoolAllocator
    from radixbench.cache.config import CacheConfig
    from radixbench.cache.key import RadixKey
    from radixbench.cache.registry import make_cache
    from radixbench.harness.experiments.dask_runner import _point

    def point(i: int) -> list[dict[str, Any]]:
        alloc = TokenToKVPoolAllocator(64, torch.device("cpu"))
        make_cache("raising", None, alloc, CacheConfig()).match_prefix(RadixKey([1, 2, 3]))
        return []

    with pytest.raises(ImplFailed) as info:
        _point(point, 3)
    back = pickle.loads(pickle.dumps(info.value.within("study point 3: ")))
    assert str(back).startswith(
        "study point 3: impl raising: RaisingToy.match_prefix raised RuntimeError: boom ("
    )
