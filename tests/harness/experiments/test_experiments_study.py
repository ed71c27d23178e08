"""``radixbench study``: study files, one tiny study end to end on Dask, CLI errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.harness.config.study import StudyError, bundled_studies, load_study
from radixbench.harness.experiments.study import run_study

TINY = """
description = "tiny eviction study"
family = "eviction"
scenario = "eviction-pressure"
[base]
"sim.clock" = "coupled"
"variants.matchers" = ["galloping"]
"variants.flatten" = ["numpy"]
"arrivals.rate" = 200.0
[variants]
baseline = "heapify"
candidates = ["persistent-heap"]
[points.quick]
"sim.kv_capacity_tokens" = [1500, 3000]
"workload.sessions" = [60, 80]
[points.full]
"sim.kv_capacity_tokens" = [1500]
"workload.sessions" = [60]
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def test_bundled_studies_load_in_both_modes() -> None:
    assert {"eviction", "matching"} <= set(bundled_studies())
    for name, family, base in (
        ("eviction", "eviction", "heapify"),
        ("matching", "matching", "linear"),
    ):
        quick, full = load_study(name, quick=True), load_study(name)
        assert quick.family == family and quick.baseline == base and quick.mode == "quick"
        assert len(full.points) >= len(quick.points) >= 3
        key = next(iter(full.points[0]))  # the varied quantity: the full range goes further
        assert max(p[key] for p in full.points) > max(p[key] for p in quick.points)
        assert full.base["sim.clock"] == "coupled"
    ev = load_study("eviction")
    # sglang 0.5.23 as served is one more curve of both bundled studies (issue 21, item 4)
    assert ev.reference == load_study("matching").reference == "sglang"
    # issue 29: sglang's Python core and the persistent-heap patch of it are curves too
    assert ev.served[0] == "sglang-python" and ev.served[1].endswith(
        "sglang_unified_persistent_heap.py:PersistentHeapUnifiedRadixCache"
    )
    assert Path(ev.served[1].split(":")[1]).is_file()  # made absolute from the study file
    # thin leaves (question + the cached answer token) under 16 shared prompts: the largest
    # full pool holds >= 50,000 evictable leaves, and enough requests to fill it and evict
    from radixbench.harness.config.scenario import load_scenario

    big = max(range(len(ev.points)), key=lambda i: ev.points[i]["sim.kv_capacity_tokens"])
    sc = load_scenario(ev.scenario, ev.overrides(big))
    w = sc.workload
    leaf = w.question_tokens + w.output_tokens - 1
    leaves = (sc.sim.kv_capacity_tokens - w.groups * w.system_prompt_tokens) / leaf
    assert leaves >= 50_000 and w.groups * w.prompts_per_group >= leaves + 2_000


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (("family = \"eviction\"", "family = \"nope\""), "family: must be one of"),
        (("seed", "seed"), None),
        (("[points.full]", "bogus = 1\n[points.full]"), "points.quick: lists of one equal"),
        (("\"workload.sessions\" = [60, 80]", "\"workload.sessions\" = [60]"), "equal"),
        (("\"arrivals.rate\" = 200.0", "\"arrivals.rat\" = 200.0"), "points.quick[0]"),
        (("\"variants.flatten\" = [\"numpy\"]", "\"variants.flatten\" = [\"numpy\", \"sum\"]"),
         "set the other variant axes"),
        (("candidates = [\"persistent-heap\"]", "candidates = [\"heapify\"]"), "variants repeat"),
        (("[variants]", "[variants]\nreferense = \"sglang\""), "variants.referense: unknown key"),
        (("[variants]", "[variants]\nreference = 3"), "variants.reference: an implementation"),
    ],
)  # fmt: skip
def test_bad_study_file_is_one_line_naming_file_and_key(tmp_path, edit, needle) -> None:
    path = _write(tmp_path, TINY.replace(*edit))
    if needle is None:
        assert load_study(path, quick=True).candidates == ("persistent-heap",)
        return
    with pytest.raises(StudyError) as exc:
        load_study(path, quick=True)
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg and needle in msg


def test_unknown_top_level_key_and_missing_file(tmp_path) -> None:
    with pytest.raises(StudyError, match="extra: unknown key"):
        load_study(_write(tmp_path, "extra = 1\n" + TINY))
    with pytest.raises(StudyError, match="no such study file"):
        load_study(tmp_path / "missing.toml")


@pytest.fixture(scope="module")
def cluster():
    """An in-process cluster (one worker thread): the study's Dask path without process
    start-up cost."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as c:
        yield c


@pytest.mark.e2e  # a Dask cluster
def test_tiny_study_runs_on_dask_and_writes_its_folder(tmp_path, cluster) -> None:
    spec = load_study(_write(tmp_path, TINY), quick=True)
    out = run_study(spec, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False)
    run = out.run_dir
    assert run.parent == tmp_path / "runs" and run.name.startswith("study-s-quick-")
    assert not list(run.parent.glob(".tmp-*"))
    for f in (
        "study.md",
        "points.parquet",
        "points.csv",
        "crossover.csv",
        "plots/study-eviction.png",
    ):
        assert (run / f).is_file(), f
    assert sorted(p.name for p in (run / "points").iterdir()) == ["p0", "p1"]
    pts = pd.read_parquet(run / "points.parquet")
    assert list(pts["point"]) == [0, 1] and set(pts["candidate"]) == {"persistent-heap"}
    assert pts["candidate_variant"].iloc[0] == "persistent-heap/galloping/numpy"
    # the bigger pool holds more evictable leaves, and evict ran at both points
    assert (pts["evict_calls"] > 0).all()
    assert pts["evictable_leaves"].iloc[1] > pts["evictable_leaves"].iloc[0]
    # each point's load: "" when every variant was served, else the overloaded ones by name
    assert all(isinstance(v, str) for v in pts["overloaded"])
    assert set(pts["overloaded"]) <= {"", "heapify", "persistent-heap", "heapify, persistent-heap"}
    assert out.summary["study_md"] == run / "study.md"
    text = (run / "study.md").read_text()
    assert "persistent-heap vs heapify" in text and "Check of SGLang PR #6907" in text


@pytest.mark.e2e  # a Dask cluster
def test_a_study_draws_the_served_cache_as_one_more_curve(tmp_path, cluster) -> None:
    """``[variants] reference = "sglang"``: sglang 0.5.23's served cache runs at every point
    beside the algorithms and is reduced like a candidate, named ``sglang (served, Rust core)``."""
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang is not installed (make install)")
    text = TINY.replace("[variants]", '[variants]\nreference = "sglang"')
    spec = load_study(_write(tmp_path, text), quick=True)
    out = run_study(spec, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False)
    pts = pd.read_parquet(out.run_dir / "points.parquet")
    assert set(pts["candidate"]) == {"persistent-heap", "sglang (served, Rust core)"}
    served = pts[pts["candidate"] == "sglang (served, Rust core)"]
    assert list(served["point"]) == [0, 1] and (served["candidate_variant"] == "sglang/numpy").all()
    # its ops are timed like the algorithms' (under the coupled clock they move the schedule)
    assert served["op_cand_ns"].notna().all() and served["op_ratio"].notna().all()
    assert "sglang (served, Rust core) vs heapify" in (out.run_dir / "study.md").read_text()


def test_cli_errors_are_one_line(tmp_path, capsys) -> None:
    assert main(["study", "nope"]) == 2
    assert "no such study file" in capsys.readouterr().err
    path = _write(tmp_path, TINY)
    assert main(["study", str(path), "--quick", "--set", "workload.nope=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "workload.nope" in err
    assert main(["study", str(path), "--scheduler", "localhost:1"]) == 2
    assert "--scheduler" in capsys.readouterr().err


@pytest.mark.e2e  # a Dask cluster
def test_a_study_compares_implementations_with_impl(tmp_path, cluster) -> None:
    """Issue 22, defect 7: ``--impl`` makes a study evaluate a patch (here the persistent-heap
    subclass of sglang's legacy RadixCache against it), point by point."""
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang is not installed (make install)")
    patch = Path(__file__).parents[3] / "examples" / "sglang_persistent_heap.py"
    spec = load_study(_write(tmp_path, TINY), quick=False)
    spec = spec.with_impls(["sglang-legacy", f"sglang-legacy:{patch}:PersistentHeapRadixCache"])
    assert (spec.baseline, spec.candidates) == (
        "sglang-legacy",
        ("sglang-legacy:PersistentHeapRadixCache",),
    )
    out = run_study(spec, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False)
    pts = pd.read_parquet(out.run_dir / "points.parquet")
    assert set(pts["candidate"]) == {"sglang-legacy:PersistentHeapRadixCache"}
    assert set(pts["baseline_variant"]) == {"sglang-legacy/numpy"}
    assert (pts["evict_calls"] > 0).all()


@pytest.mark.sglang
def test_impl_errors_are_one_line(tmp_path, capsys) -> None:
    path = _write(tmp_path, TINY)
    assert main(["study", str(path), "--impl", "sglang"]) == 2
    assert "two or more implementations" in capsys.readouterr().err
    assert main(["study", str(path), "--set", "variants.impls=['sglang']"]) == 2
    assert "compare implementations with --impl" in capsys.readouterr().err


@pytest.mark.e2e  # a Dask cluster
def test_a_study_draws_served_cores_and_a_patch_against_the_best(tmp_path, cluster) -> None:
    """Issue 29, item 4: ``reference`` as a list — sglang's Rust and Python tree cores and the
    persistent-heap patch of its Python core (a path from the study file) — each one more
    curve; every curve is also set against the point's best evictor, in study.md's table."""
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang is not installed (make install)")
    patch = Path(__file__).parents[3] / "examples" / "sglang_unified_persistent_heap.py"
    (tmp_path / "patch.py").write_text(patch.read_text())
    refs = '["sglang", "sglang-python", "sglang-python:patch.py:PersistentHeapUnifiedRadixCache"]'
    text = 'sections = ["served"]\n' + TINY.replace("[variants]", f"[variants]\nreference = {refs}")
    spec = load_study(_write(tmp_path, text), quick=True)
    assert (
        spec.served[1] == f"sglang-python:{tmp_path / 'patch.py'}:PersistentHeapUnifiedRadixCache"
    )
    out = run_study(spec, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False)
    pts = pd.read_parquet(out.run_dir / "points.parquet")
    assert set(pts["candidate"]) == {
        "persistent-heap", "sglang (served, Rust core)", "sglang-python (served, Python core)",
        "sglang-python:PersistentHeapUnifiedRadixCache (patch)",
    }  # fmt: skip
    # the best evictor is radixbench's own, chosen per point by its median evict
    assert set(pts["best"]) <= {"heapify", "persistent-heap"}
    for _, p in pts.groupby("point"):
        ns = {p["baseline"].iloc[0]: p["op_base_ns"].iloc[0],
              **dict(zip(p["candidate"], p["op_cand_ns"]))}  # fmt: skip
        assert p["best"].iloc[0] == min(("heapify", "persistent-heap"), key=ns.__getitem__)
    assert pts["cand_throughput_vs_best_lo"].notna().all()
    md = (out.run_dir / "study.md").read_text()
    assert "## Against the best evictor" in md and "sglang (served, Rust core)" in md
