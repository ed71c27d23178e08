"""The ``impl`` variant axis: ``--impl`` / ``[variants] impls`` parsing, one-line errors, and
radixbench vs SGLang's real ``RadixCache`` end to end (``radixbench.harness.config.impl``).

The tests that run SGLang skip, with the reason, when ``load_sglang("sglang")`` fails (sglang
0.5.23 not installed: ``make install`` adds it with ``--no-deps``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from radixbench.cache import registry
from radixbench.cache.interface import ImplInfo
from radixbench.cache.registry import check_spec, default_label
from radixbench.harness.cli import build_parser, main
from radixbench.harness.cli.compare import spec_from_args
from radixbench.harness.config.grid import load_grid
from radixbench.harness.config.impl import (
    Impl,
    ImplError,
    files_digest,
    impl_variants,
    resolve_impls,
)
from radixbench.harness.config.scenario import ScenarioError, load_scenario
from radixbench.sim.accounting import kv_account
from radixbench.sim.config import VARIANT_COLUMNS, SimConfig, Variant
from radixbench.sim.cost import LinearCostModel
from radixbench.sim.run import VariantSim
from radixbench.workloads.sources import load_workload


@pytest.fixture(scope="module")
def sglang() -> ImplInfo:
    """What ``sglang-legacy`` loads (``origin``: the installed package's folder)."""
    try:
        return registry.resolve("sglang-legacy").info
    except registry.ImplError as e:
        pytest.skip(f"sglang cannot be loaded, SGLang impl tests skipped: {e}")


def _fake_checkout(root: Path, version: str, modules: dict[str, str] | None = None) -> Path:
    """A folder shaped like an SGLang checkout (``root/python/sglang/...``) holding a version
    file and the given modules (path under ``sglang/`` -> source); returns its python/."""
    pkg = root / "python" / "sglang"
    (pkg / "srt" / "mem_cache").mkdir(parents=True)
    (pkg / "version.py").write_text(f'__version__ = "{version}"\n')
    for rel, text in {"srt/mem_cache/radix_cache.py": "", **(modules or {})}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return root / "python"


# ---------------------------------------------------------------------------- parsing


def test_spec_syntax_and_default_labels(tmp_path) -> None:
    for spec in ("radixbench", "sglang", "sglang:/x/python", "sglang:a.py:Cls"):
        check_spec(spec)
    for bad in ("vllm", "sglang:", "radixbench:x", ""):
        with pytest.raises(ValueError, match="unknown impl"):
            check_spec(bad)
    assert default_label("radixbench") == "radixbench"
    assert default_label("sglang") == "sglang"
    assert default_label(f"sglang:{tmp_path}/pr-123/python") == "sglang@pr-123"
    assert default_label(f"sglang:{tmp_path}/pr-123") == "sglang@pr-123"
    assert default_label("sglang:patch.py:MyCache") == "sglang:MyCache"


def test_variant_names() -> None:
    assert Variant().name == "heapify/linear/chain"
    assert Variant().impl == "radixbench"
    assert Variant("persistent-heap", "galloping", "sum").name == "persistent-heap/galloping/sum"
    assert Variant(flatten="sum", impl="sglang").name == "sglang/sum"
    assert Variant(impl="sglang", impl_label="sglang~2").name == "sglang~2/chain"
    # a label may hold "/": names are derived from the axes, never parsed back
    v = Variant(impl="sglang", impl_label="a/b")
    assert v.name == "a/b/chain" and v.axes()["impl"] == "a/b"
    with pytest.raises(ValueError, match="non-empty"):
        Variant(impl="sglang", impl_label=" ")
    with pytest.raises(ValueError, match="unknown impl"):
        Variant(impl="vllm")
    with pytest.raises(ValueError, match="relabelled"):
        Variant(impl_label="mine")


def test_impl_variants_one_per_flatten_for_sglang() -> None:
    impls = (
        Impl("radixbench", "radixbench", frozenset({"evictor", "matcher"})),
        Impl("sglang", "sglang"),
    )
    names = [
        v.name
        for v in impl_variants(impls, ["heapify", "persistent-heap"], ["linear"], ["chain", "sum"])
    ]
    assert names == [
        "heapify/linear/chain",
        "heapify/linear/sum",
        "persistent-heap/linear/chain",
        "persistent-heap/linear/sum",
        "sglang/chain",
        "sglang/sum",
    ]
    evictors, matchers = ["heapify", "persistent-heap"], ["linear", "galloping"]
    only = impl_variants(impls[1:], evictors, matchers, ["sum"])
    assert [(v.name, v.impl) for v in only] == [("sglang/sum", "sglang")]
    with pytest.raises(ValueError, match="unknown evictor"):  # checked though SGLang ignores it
        impl_variants(impls[1:], ["bogus"], ["linear"], ["chain"])


def test_resolve_radixbench_and_errors() -> None:
    ours = frozenset({"evictor", "matcher"})
    assert resolve_impls(["radixbench"]) == (Impl("radixbench", "radixbench", ours),)
    for specs, needle in (
        ([], "no implementation"),
        (["radixbench", "radixbench"], "given twice"),
        (["vllm"], "unknown impl 'vllm'"),
    ):
        with pytest.raises(ImplError, match=needle):
            resolve_impls(specs)


def test_scenario_impls_key_and_default() -> None:
    sc = load_scenario("prefix-repetition")
    assert {v.impl for v in sc.variants} == {"radixbench"}
    with pytest.raises(ScenarioError, match=r"variants\.impls: unknown impl 'vllm'"):
        load_scenario("prefix-repetition", {"variants.impls": ["vllm"]})
    with pytest.raises(ScenarioError, match=r"variants\.impls: must not be empty"):
        load_scenario("prefix-repetition", {"variants.impls": []})


def test_a_cells_key_names_its_point_and_its_variants(tmp_path) -> None:
    """A cell (one grid point, every variant) is keyed by its canonical JSON: the same grid
    gives the same keys (a re-run resumes); another variant list, other keys."""
    grid_file = tmp_path / "g.toml"
    text = (
        'scenario = "prefix-repetition"\n[grid]\n"arrivals.max_requests" = [5, 6]\n'
        '[variants]\nevictors = ["heapify"]\nmatchers = ["linear"]\nflatten = ["chain"]\n'
    )
    grid_file.write_text(text)
    cells = load_grid(grid_file).cells
    assert len(cells) == 2 and len({c.key for c in cells}) == 2
    (cell, _) = cells
    blob = json.dumps(cell.canonical(), sort_keys=True, separators=(",", ":"))
    assert cell.key == hashlib.sha256(blob.encode()).hexdigest()[:16]
    assert [v["spec"] for v in cell.canonical()["variants"]] == ["radixbench"]
    assert [c.key for c in load_grid(grid_file).cells] == [c.key for c in cells]
    grid_file.write_text(text.replace('["heapify"]', '["heapify", "lru-list"]'))
    assert not {c.key for c in load_grid(grid_file).cells} & {c.key for c in cells}


def test_profile_takes_impl() -> None:
    args = build_parser().parse_args(["profile", "prefix-repetition", "--impl", "radixbench"])
    assert {v.impl for v in spec_from_args(args).variants} == {"radixbench"}


# ---------------------------------------------------------------------------- one-line errors


def _one_line_error(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    out = tmp_path / "runs"
    code = main([*argv, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("radixbench: error:") and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())  # no run folder, not even a temporary one
    return lines[0]


def test_unknown_impl(tmp_path, capsys) -> None:
    line = _one_line_error(["compare", "--impl", "radixbench,vllm"], tmp_path, capsys)
    assert "--impl" in line and "'vllm'" in line


def test_broken_checkout_path(tmp_path, capsys) -> None:
    spec = f"sglang:{tmp_path / 'nowhere'}"
    line = _one_line_error(["compare", "--impl", spec], tmp_path, capsys)
    assert f"error: --impl: {spec}:" in line and "holds no sglang/srt/mem_cache" in line


def test_unsupported_version(tmp_path, capsys) -> None:
    spec = f"sglang:{_fake_checkout(tmp_path / 'old', '0.4.6.post1')}"
    line = _one_line_error(["compare", "--impl", f"radixbench,{spec}"], tmp_path, capsys)
    assert f"--impl: {spec}:" in line and "sglang 0.4.6.post1" in line
    assert "not supported (supported: 0.5.23)" in line


def test_checkout_that_does_not_import(tmp_path, capsys) -> None:
    folder = _fake_checkout(tmp_path / "broken", "0.5.23")  # modules missing
    spec = f"sglang:{folder}"  # the served cache: its module is not there
    line = _one_line_error(["compare", "--impl", spec], tmp_path, capsys)
    assert f"--impl: {spec}:" in line and "has no srt/mem_cache/unified_radix_cache.py" in line
    legacy = f"sglang-legacy:{folder}"  # the legacy class: its imports fail
    line = _one_line_error(["compare", "--impl", legacy], tmp_path, capsys)
    assert f"--impl: {legacy}: cannot import sglang.srt.mem_cache" in line


def test_missing_package(tmp_path, capsys, monkeypatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args, **kwargs):
        return None if name == "sglang" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    # no cached load in the implementation registry (any earlier test that ran --impl sglang
    # left one there); the loaders look the package up before their own caches
    monkeypatch.setattr(registry, "_RESOLVED", {})
    line = _one_line_error(["compare", "--impl", "sglang"], tmp_path, capsys)
    assert "--impl: sglang: sglang is not installed" in line
    user = tmp_path / "patch.py"
    user.write_text("class Mine: pass\n")
    line = _one_line_error(["compare", "--impl", f"sglang:{user}:Mine"], tmp_path, capsys)
    assert f"sglang:{user}:Mine: sglang is not installed" in line


@pytest.mark.sglang  # without it the spec fails on "sglang is not installed" first
def test_bad_user_class_specs(tmp_path, capsys) -> None:
    line = _one_line_error(
        ["compare", "--impl", f"sglang:{tmp_path / 'none.py'}:Cls"], tmp_path, capsys
    )
    assert "no such file" in line
    line = _one_line_error(["compare", "--impl", "sglang:patch.py"], tmp_path, capsys)
    assert "give the class as sglang:FILE.py:CLASS" in line


def test_bad_impl_in_scenario_file(tmp_path, capsys) -> None:
    from radixbench.harness.config.scenario import bundled_scenarios

    text = bundled_scenarios()["prefix-repetition"].read_text()
    scenario = tmp_path / "s.toml"
    assert "\n[variants]\n" in text  # add the key to the bundled file's [variants] table
    impls = 'impls = ["radixbench", "sglang:/no/such"]\n'
    scenario.write_text(text.replace("\n[variants]\n", "\n[variants]\n" + impls, 1))
    line = _one_line_error(["compare", str(scenario)], tmp_path, capsys)
    assert "s.toml: variants.impls: sglang:/no/such:" in line


def test_policy_the_legacy_class_lacks(sglang, tmp_path, capsys) -> None:
    """The served cache runs T-LRU; the legacy RadixCache does not (one line naming it)."""
    argv = ["compare", "prefix-repetition", "--impl", "sglang-legacy", "--policy", "tlru"]
    line = _one_line_error(argv, tmp_path, capsys)
    assert "variants.impls: sglang-legacy: eviction policy 'tlru' is not supported" in line
    ok = ["compare", "prefix-repetition", "--requests", "20", "--impl", "radixbench,sglang",
          "--policy", "tlru", "--out", str(tmp_path / "ok"), "--no-progress"]  # fmt: skip
    assert main(ok) == 0


# ---------------------------------------------------------------------------- with SGLang


def test_labels_of_sglang_specs(sglang, tmp_path) -> None:
    site = Path(sglang.origin).parent
    (tmp_path / site.name).symlink_to(site)  # another path to a folder of the same name
    impls = resolve_impls(["sglang", f"sglang:{site}", f"sglang:{tmp_path / site.name}"])
    assert [i.label for i in impls] == [
        "sglang",
        f"sglang@{site.name}",
        f"sglang@{site.name}~2",
    ]


def test_simulator_drives_sglang_like_radixbench(sglang) -> None:
    """Under a pool small enough to evict, SGLang's cache sees the very same operations as
    radixbench's (op, key length, result, tree size, evictable leaves, node count per row) and
    the KV accounting walks its tree before every step."""
    from radixbench.workloads.arrivals import Arrivals
    from radixbench.workloads.sources import SOURCES

    params = SOURCES["multi-turn"](sessions=6, turns=4, reply_tokens=40, block_size=5)
    trace = load_workload(
        "multi-turn", params, Arrivals(process="poisson", rate=20.0), np.random.default_rng(0)
    )
    cfg = SimConfig(
        kv_capacity_tokens=3_000, max_running=8, chunked_prefill_size=512, cost=LinearCostModel()
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results = []
        # the legacy class: its checkpoint re-matches as radixbench's does (the unified cache
        # reuses its insert's node: one match row fewer per checkpoint; tests/sim/test_served.py)
        for variant in (Variant(), Variant(impl="sglang-legacy")):
            sim = VariantSim(trace, cfg, variant, torch.device("cpu"))
            checked: list[object] = []

            def check(sched, checked: list[object] = checked) -> None:
                checked.append(kv_account(sched.cache, sched.live_requests()))

            sim.sched.before_step = check
            while sim.step(1 << 30):
                pass
            assert checked and sim.cache.protected_size() == 0
            results.append(sim.result())
    finally:
        torch.set_num_threads(threads)
    ours, theirs = (r.ops.drop(columns=[*VARIANT_COLUMNS, "ns", "sim_time_s"]) for r in results)
    ours = ours[ours["op"] != "evict_kv_free"].reset_index(drop=True)  # radixbench's cache only
    assert (ours["op"] == "evict").any()  # the pool was under pressure
    pd.testing.assert_frame_equal(ours, theirs)
    hits = [r.requests["prefix_hit_tokens"].tolist() for r in results]
    assert hits[0] == hits[1] and sum(hits[0]) > 0


def test_compare_radixbench_and_sglang_end_to_end(sglang, tmp_path, capsys) -> None:
    out = tmp_path / "runs"
    code = main(
        [
            "compare",
            "prefix-repetition",
            "--requests",
            "40",
            "--impl",
            "radixbench,sglang",
            "--evictors",
            "heapify",
            "--matchers",
            "linear",
            "--flatten",
            "chain,sum",
            "--baseline",
            "flatten=sum",  # named: the first listed (chain) otherwise
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    assert "equivalence: OK — all 5 variants" in stdout
    (run,) = out.iterdir()
    requests = pd.read_parquet(run / "requests.parquet")
    assert set(requests["variant"]) == {
        "heapify/linear/chain",
        "heapify/linear/sum",
        "sglang/chain",
        "sglang/sum",
        "heapify/linear/sum/replica=2",  # the baseline's A/A replica
    }
    hits = requests.pivot(index="rid", columns="variant", values="prefix_hit_tokens")
    assert hits.nunique(axis=1).eq(1).all() and hits.to_numpy().sum() > 0
    # config.json names each implementation with the sha256 of every file it loaded
    meta = json.loads((run / "config.json").read_text())
    by_impl = {e["impl"]: e for e in meta["implementations"]}
    assert set(by_impl) == {"radixbench", "sglang"}
    sgl = by_impl["sglang"]
    assert sgl["version"] == "0.5.23" and sgl["origin"] == sglang.origin
    assert sgl["variants"] == ["sglang/chain", "sglang/sum"]
    radix = "sglang/srt/mem_cache/radix_cache.py"
    source = Path(sglang.origin, "srt/mem_cache/radix_cache.py").read_bytes()
    assert sgl["files"][radix] == hashlib.sha256(source).hexdigest()
    assert sgl["files_sha256"] == files_digest(sgl["files"])
    ours = by_impl["radixbench"]["files"]["radixbench/cache/radix_cache.py"]
    assert ours == hashlib.sha256(Path("cache/radix_cache.py").read_bytes()).hexdigest()
    # ... and so do report.md and report.html
    for report in ("report.md", "report.html"):
        text = (run / report).read_text()
        assert "Implementations" in text and sgl["files"][radix] in text and "0.5.23" in text
        assert sgl["files_sha256"] in text and sglang.origin in text
    # the impl axis is compared like the others: SGLang vs radixbench's heapify/linear
    verdicts = pd.read_parquet(run / "verdicts.parquet")
    impl_rows = verdicts[verdicts["candidate"] == "sglang/chain"]
    assert set(impl_rows["baseline"]) == {"heapify/linear/chain", "sglang/sum"}
    assert {"insert ns", "match_prefix ns", "build_extend ns"} <= set(impl_rows["metric"])
    speedups = pd.read_parquet(run / "speedups.parquet")
    assert ("sglang/chain", "heapify/linear/chain") in set(
        zip(speedups["variant"], speedups["baseline_variant"], strict=True)
    )


def test_user_class_compared_with_installed(sglang, tmp_path, capsys) -> None:
    patch = tmp_path / "patch.py"
    patch.write_text(
        "from sglang.srt.mem_cache.radix_cache import RadixCache\n\n"
        "class Patched(RadixCache):\n    pass\n"
    )
    out = tmp_path / "runs"
    argv = ["compare", "few-shot", "--requests", "30", "--out", str(out), "--no-progress"]
    code = main([*argv, "--impl", f"sglang,sglang:{patch}:Patched"])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    assert "equivalence: OK — all 3 variants" in stdout
    (run,) = out.iterdir()
    meta = json.loads((run / "config.json").read_text())
    user = {e["impl"]: e for e in meta["implementations"]}["sglang:Patched"]
    assert user["spec"] == f"sglang:{patch}:Patched" and user["class"].endswith(".Patched")
    assert user["files"][str(patch)] == hashlib.sha256(patch.read_bytes()).hexdigest()


def test_grid_with_impls_runs_sglang_cells(sglang, tmp_path) -> None:
    from radixbench.harness.experiments.sweep import gather, run_cell

    grid_file = tmp_path / "g.toml"
    grid_file.write_text(
        'scenario = "prefix-repetition"\n[base]\narrivals.max_requests = 12\n'
        '[grid]\n"sim.kv_capacity_tokens" = [50000]\n'
        '[variants]\nevictors = ["heapify", "persistent-heap"]\nmatchers = ["linear"]\n'
        'impls = ["radixbench", "sglang"]\n'
    )
    grid = load_grid(grid_file)
    (cell,) = grid.cells  # one grid point: every variant in it, interleaved
    assert [v.name for v in cell.variants] == [  # the scenario's own flatten
        "heapify/linear/numpy",
        "persistent-heap/linear/numpy",
        "sglang/numpy",
    ]
    assert cell.load().variants == cell.variants
    assert cell.canonical()["variants"][-1]["spec"] == "sglang"
    cells = tmp_path / "cells"
    run_cell(cell, str(cells))
    res = gather(grid, cells)
    assert res["impl"].tolist() == ["radixbench", "radixbench", "sglang"]
    assert res["evictor"].tolist()[:2] == ["heapify", "persistent-heap"]
    assert pd.isna(res["evictor"].iloc[2])  # SGLang's evictor is its own
    assert res["prefix_hit_rate"].nunique() == 1
    assert not res["overloaded"].any()
