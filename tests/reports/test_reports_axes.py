"""Variants as axis records (radixbench.reports.axes): pairing, baselines, plots' groups."""

from __future__ import annotations

import pandas as pd
import pytest

from radixbench.reports.axes import Pair, VariantSet, references
from radixbench.reports.plots import axis_groups
from radixbench.reports.summary import axis_speedup, speedups


def rb(evictor: str, matcher: str, flatten: str = "chain") -> dict[str, str | None]:
    """The axis record of a variant of radixbench's cache."""
    return {"impl": "radixbench", "evictor": evictor, "matcher": matcher, "flatten": flatten}


def other(impl: str, flatten: str = "chain") -> dict[str, str | None]:
    """The axis record of a variant of another implementation (own evictor and matcher)."""
    return {"impl": impl, "evictor": None, "matcher": None, "flatten": flatten}


SGLANG_REF = {"sglang": {"evictor": "heapify", "matcher": "galloping"}}


def vset(records: dict[str, dict[str, str | None]], reference=None) -> VariantSet:
    axes = ("impl", "evictor", "matcher", "flatten")
    return VariantSet(tuple(records), axes, records, reference or {})


RUN = {
    "heapify/linear/chain": rb("heapify", "linear"),
    "heapify/galloping/chain": rb("heapify", "galloping"),
    "persistent-heap/linear/chain": rb("persistent-heap", "linear"),
    "sglang/chain": other("sglang"),
    "sglang/sum": other("sglang", "sum"),
}


def test_from_frames_reads_the_axis_columns_in_order_listed() -> None:
    df = pd.DataFrame(
        {
            "variant": ["b", "a", "b"],
            "impl": ["radixbench", "sglang", "radixbench"],
            "evictor": ["heapify", None, "heapify"],
            "matcher": ["linear", None, "linear"],
            "flatten": ["chain", "chain", "chain"],
        }
    )
    vs = VariantSet.from_frames(df)
    assert vs.names == ("b", "a")
    assert vs.value("a", "evictor") is None and vs.value("b", "evictor") == "heapify"
    assert vs.group_key("a", "evictor") == "sglang"
    with pytest.raises(ValueError, match="no variant axis columns"):
        VariantSet.from_frames(df[["variant"]])
    bad = df.assign(evictor=["lru-list", None, "lru-list"])
    with pytest.raises(ValueError, match="two axis records"):
        VariantSet.from_frames(df, bad)  # one name, two records across the tables


def test_partners_differ_on_exactly_one_axis() -> None:
    vs = vset(RUN, SGLANG_REF)
    base = vs.resolve_baseline()
    assert base == {"impl": "radixbench", "evictor": "heapify", "matcher": "linear",
                    "flatten": "chain"}  # fmt: skip
    p = vs.partner("persistent-heap/linear/chain", "evictor", base)
    assert p == Pair("evictor", "persistent-heap/linear/chain", "heapify/linear/chain")
    assert vs.partner("heapify/linear/chain", "evictor", base) is None
    assert vs.partner("sglang/chain", "evictor", base) is None  # SGLang's evictor is its own
    assert vs.partner("sglang/sum", "flatten", base) == Pair(
        "flatten", "sglang/sum", "sglang/chain"
    )


def test_impl_pairs_like_for_like_and_says_so() -> None:
    vs = vset(RUN, SGLANG_REF)
    p = vs.partner("sglang/chain", "impl", vs.resolve_baseline())
    assert p is not None and p.baseline == "heapify/galloping/chain"  # what sglang runs
    assert "like-for-like" in p.note and "heapify/galloping/chain" in p.note
    # without the like-for-like variant: the baseline values, said not like-for-like
    run = {k: v for k, v in RUN.items() if k != "heapify/galloping/chain"}
    vs2 = vset(run, SGLANG_REF)
    p2 = vs2.partner("sglang/chain", "impl", vs2.resolve_baseline())
    assert p2 is not None and p2.baseline == "heapify/linear/chain"
    assert "not like-for-like" in p2.note and "galloping" in p2.note
    # the flatten must agree: sglang/sum has no radixbench partner of flatten sum
    assert vs.partner("sglang/sum", "impl", vs.resolve_baseline()) is None


def test_impl_baseline_prefers_radixbench_then_sglang() -> None:
    run = {"sglang:Mine/chain": other("sglang:Mine"), "sglang/chain": other("sglang")}
    vs = vset(run)
    assert vs.resolve_baseline()["impl"] == "sglang"
    assert vs.partner("sglang:Mine/chain", "impl", vs.resolve_baseline()) == Pair(
        "impl", "sglang:Mine/chain", "sglang/chain"
    )
    assert vs.resolve_baseline({"impl": "sglang:Mine"})["impl"] == "sglang:Mine"


def test_a_label_with_slashes_is_never_split() -> None:
    """A name holding '/' in odd places pairs by its columns alone."""
    run = {
        "x/y/z": rb("heapify", "linear"),
        "toy/always-miss/chain": other("toy/always-miss"),
    }
    vs = vset(run, {"toy/always-miss": {"evictor": "heapify", "matcher": "linear"}})
    p = vs.partner("toy/always-miss/chain", "impl", vs.resolve_baseline())
    assert p is not None and p.baseline == "x/y/z"
    rows = pd.DataFrame({"variant": list(run), "ns": [1, 2]})
    rows = vs.attach(rows)
    assert axis_groups(rows, "evictor").tolist() == ["heapify", "toy/always-miss"]


def test_references_come_from_the_implementations_meta() -> None:
    impls = [{"impl": "sglang", "reference": {"evictor": "heapify"}}, {"impl": "radixbench"}]
    assert references(impls) == {"sglang": {"evictor": "heapify"}}
    assert references([]) == {}


def test_speedups_pair_sglang_like_for_like() -> None:
    rows = [
        (op, v, p50, p50, p50 / 1000)
        for op in ("evict", "match_prefix", "insert")
        for v, p50 in (
            ("heapify/linear/chain", 100.0),
            ("heapify/galloping/chain", 80.0),
            ("persistent-heap/linear/chain", 50.0),
            ("sglang/chain", 160.0),
        )
    ]
    summary = pd.DataFrame(rows, columns=["op", "variant", "p50_ns", "p99_ns", "total_ms"])
    vs = vset({k: v for k, v in RUN.items() if k != "sglang/sum"}, SGLANG_REF)
    out = speedups(summary, vs.resolve_baseline(), vs)
    impl = out[out["variant"] == "sglang/chain"].set_index("op")
    assert sorted(impl.index) == ["evict", "insert", "match_prefix"]
    assert set(impl["baseline_variant"]) == {"heapify/galloping/chain"}
    assert (impl["p50_ratio"] == 0.5).all()  # SGLang twice as slow as its partner here
    assert axis_speedup(summary, "evict", "flatten", vs.resolve_baseline(), vs).empty
