"""``radixbench bench alloc``: sglang's allocator classes load from the installed package without
touching ``sys.modules``, the benchmark covers every case for both sides, its ratios are those of
its own figures, it checks that the token allocators agree, and it still runs (ours only, saying
why) when sglang cannot be loaded. Behaviour only, never timings."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from radixbench.bench import alloc as bench_alloc
from radixbench.bench.alloc import (
    AllocBenchSpec,
    SGLangAllocatorsUnavailable,
    alloc_report,
    load_sglang_allocators,
    run_alloc_bench,
)
from radixbench.harness.cli import main

TINY = AllocBenchSpec(calls=5, rounds=2, pool=512, page_size=4, sizes=(1, 2))


def sglang_or_skip() -> bench_alloc.SGLangAllocators:
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang is not installed (make install)")
    return load_sglang_allocators()


def test_load_leaves_sys_modules_alone_and_gives_sglangs_classes() -> None:
    before = {k for k in sys.modules if k.split(".")[0] == "sglang"}
    sgl = sglang_or_skip()
    assert {k for k in sys.modules if k.split(".")[0] == "sglang"} == before
    assert sgl.token.__name__ == "TokenToKVPoolAllocator"
    assert sgl.paged.__name__ == "PagedTokenToKVPoolAllocator"
    assert sgl.token.__module__ == "sglang.srt.mem_cache.allocator.token"
    # Their real behaviour: sglang 0.5.23 appends freed slots, and prepends freed pages.
    tok = sgl.token(8, torch.float16, "cpu", None, False)
    a = tok.alloc(3)
    tok.free(a[1:2])
    assert tok.available_size() == 6 and tok.alloc(6).tolist() == [4, 5, 6, 7, 8, 2]
    paged = sgl.paged(16, 4, torch.float16, "cpu", None, False)
    p = paged.alloc(8)
    assert p.tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    paged.free(p[5:6])
    assert paged.alloc(4).tolist() == [8, 9, 10, 11]


def test_bench_covers_every_case_for_both_sides() -> None:
    sgl = sglang_or_skip()
    rows, note = run_alloc_bench(TINY, sgl)
    assert note.startswith(f"sglang {sgl.version} from ")
    df = pd.DataFrame(rows)
    cases = {
        (a, o, n, s)
        for a in ("token", "paged")
        for o in ("alloc", "free")
        for n in (1, 2)
        for s in ("short", "long")
    }
    per = {"token": 1, "paged": 4}
    got = {
        (r["allocator"], r["op"], r["tokens"] // per[r["allocator"]], r["free_list"]) for r in rows
    }
    assert got == cases and len(rows) == len(cases)
    assert (df.radixbench_us > 0).all() and (df.sglang_us > 0).all()
    ratio = df.sglang_us / df.radixbench_us
    assert ((ratio - df.sglang_over_radixbench).abs() < 1e-9 * ratio).all()
    assert set(df[df.allocator == "paged"].per_call) == {"1 page of 4", "2 pages of 4"}
    text = alloc_report(rows, note, TINY)
    assert text.count("\n| token |") == 8 and text.count("\n| paged |") == 8
    assert "n/a" not in text and f"SGLang: {note}." in text


def test_bench_refuses_token_allocators_that_disagree(monkeypatch: pytest.MonkeyPatch) -> None:
    sgl = sglang_or_skip()

    class Reversed(sgl.token):  # type: ignore[name-defined]
        def alloc(self, need: int) -> torch.Tensor | None:
            out = super().alloc(need)
            return None if out is None else out.flip(0)

    wrong = bench_alloc.SGLangAllocators(sgl.version, sgl.origin, Reversed, sgl.paged)
    spec = AllocBenchSpec(calls=3, rounds=1, pool=64, page_size=4, sizes=(2,))
    with pytest.raises(RuntimeError, match="other slots"):
        run_alloc_bench(spec, wrong)


def test_without_sglang_the_bench_times_ours_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real(name, *a)
    )
    with pytest.raises(SGLangAllocatorsUnavailable, match="not installed"):
        load_sglang_allocators()
    rows, note = run_alloc_bench(TINY)
    assert note.startswith("sglang not timed: sglang is not installed")
    assert all(r["sglang_us"] is None and r["radixbench_us"] > 0 for r in rows)
    text = alloc_report(rows, note, TINY)
    assert "| n/a | n/a |" in text and "sglang not timed" in text


def test_bench_alloc_cli_writes_markdown_and_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    md = tmp_path / "A.md"
    argv = ["bench", "alloc", "--quick", "--reps", "1", "--out", str(tmp_path)]
    assert main([*argv, "--markdown", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("# KV allocator benchmark") and "## Machine" in text
    assert "| allocator | op | per call | free list |" in text
    assert "= 1 cal; numpy kernel" in text and "| radixbench cal | sglang cal |" in text
    assert capsys.readouterr().out.startswith("# KV allocator benchmark")
    df = pd.read_csv(tmp_path / "bench_alloc.csv")
    assert len(df) == 16 and set(df.free_list) == {"short", "long"}


def test_spec_rejects_nonpositive_sizes() -> None:
    with pytest.raises(ValueError, match="bench alloc"):
        AllocBenchSpec(calls=0)
