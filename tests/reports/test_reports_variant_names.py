"""Variant names of other cache implementations (``"<impl>/<flatten>"``) in the reports."""

from __future__ import annotations

import pandas as pd
import pytest

from radixbench.reports.plots import _axis_part
from radixbench.reports.summary import FLATTEN_AXIS, axis_speedup, speedups
from radixbench.reports.variant_names import axis_value, parse_variant, partner
from radixbench.reports.verdicts import _pairs

BASE = {"evictor": "heapify", "matcher": "linear", "flatten": "sum"}


def test_parse_and_axis_values() -> None:
    assert parse_variant("heapify/linear/chain") == ("radixbench", "heapify", "linear", "chain")
    assert parse_variant("sglang/chain") == ("sglang", None, None, "chain")
    assert parse_variant("odd") == ("odd", None, None, None)
    assert [axis_value("sglang@pr/sum", i) for i in range(3)] == ["sglang@pr"] * 2 + ["sum"]
    assert [axis_value("a/b/c", i) for i in range(3)] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="has no axis 3"):
        axis_value("a/b/c", 3)
    names = pd.Series(["heapify/galloping/chain", "sglang/chain"])
    assert _axis_part(names, 1).tolist() == ["galloping", "sglang"]


def test_partners() -> None:
    assert partner("persistent-heap/linear/chain", "evictor", BASE) == "heapify/linear/chain"
    assert partner("heapify/linear/chain", "evictor", BASE) is None
    assert partner("sglang/chain", "evictor", BASE) is None  # SGLang's evictor is its own
    assert partner("sglang/chain", "matcher", BASE) is None
    assert partner("sglang/chain", "flatten", BASE) == "sglang/sum"
    assert partner("sglang/chain", "impl", BASE) == "heapify/linear/chain"
    assert partner("heapify/linear/chain", "impl", BASE) is None
    assert partner("sglang/chain", "flatten", {"evictor": "heapify"}) is None


def test_speedups_and_verdict_pairs_with_sglang() -> None:
    rows = [
        (op, v, p50, p50, p50 / 1000)
        for op in ("evict", "match_prefix", "insert")
        for v, p50 in (
            ("heapify/linear/chain", 100.0),
            ("persistent-heap/linear/chain", 50.0),
            ("sglang/chain", 200.0),
        )
    ]
    summary = pd.DataFrame(rows, columns=["op", "variant", "p50_ns", "p99_ns", "total_ms"])
    out = speedups(summary, BASE)
    impl = out[out["variant"] == "sglang/chain"].set_index("op")
    assert sorted(impl.index) == ["evict", "insert", "match_prefix"]
    assert set(impl["baseline_variant"]) == {"heapify/linear/chain"}
    assert (impl["p50_ratio"] == 0.5).all()  # SGLang twice as slow as the baseline here
    assert axis_speedup(summary, "evict", FLATTEN_AXIS, "sum").empty
    pairs = _pairs(
        ["heapify/linear/chain", "persistent-heap/linear/chain", "sglang/chain", "sglang/sum"],
        BASE,
    )
    assert pairs == [
        ("evictor", "persistent-heap/linear/chain", "heapify/linear/chain"),
        ("flatten", "sglang/chain", "sglang/sum"),
        ("impl", "sglang/chain", "heapify/linear/chain"),
    ]
