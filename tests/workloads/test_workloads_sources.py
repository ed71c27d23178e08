"""Tests for load_workload: kinds, selection, re-timing, block sizes and determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from radixbench.workloads import load_mooncake
from radixbench.workloads.arrivals import Arrivals
from radixbench.workloads.generators import PrefixRepetition
from radixbench.workloads.sources import (
    AzureTrace,
    GenericTrace,
    MooncakeTrace,
    detect_trace_kind,
    load_workload,
)
from radixbench.workloads.tokens import block_tokens
from radixbench.workloads.trace import TraceError


def load(kind, params, arrivals, seed=0, **kw):
    return load_workload(kind, params, arrivals, np.random.default_rng(seed), **kw)


def test_mooncake_default_equals_loader_and_poisson_retimes() -> None:
    got = load("mooncake", MooncakeTrace(), Arrivals(max_requests=20))
    assert got == load_mooncake(max_requests=20)
    re = load("mooncake", MooncakeTrace(), Arrivals(process="poisson", rate=100.0, max_requests=20))
    assert [r.hash_ids for r in re] == [r.hash_ids for r in got]
    assert re[0].arrival_s == 0.0 and re[-1].arrival_s < 2.0  # ~0.19 s at 100 req/s


def test_mooncake_block_size_is_configurable(tmp_path: Path) -> None:
    recs = [
        {"timestamp": i, "input_length": 100, "output_length": 1, "hash_ids": [0, i]}
        for i in range(3)
    ]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = load("mooncake", MooncakeTrace(str(path), block_size=64), Arrivals())
    toks = [block_tokens(r.hash_ids, r.input_length) for r in got]
    assert toks[0][:64] == toks[1][:64] and toks[0][64] != toks[1][64]
    with pytest.raises(ValueError, match="block_size"):
        MooncakeTrace(block_size=0)


def test_generator_selection_and_scaling() -> None:
    p = PrefixRepetition(requests=100)
    a = Arrivals(process="constant", rate=10.0, start_s=2.0, window_s=1.0, time_scale=4.0)
    got = load("prefix-repetition", p, a)
    assert [r.rid for r in got] == list(range(20, 30))
    assert [r.arrival_s for r in got] == pytest.approx([0.4 * i for i in range(10)])
    with pytest.raises(ValueError, match="no timestamps"):
        load("prefix-repetition", p, Arrivals())
    with pytest.raises(ValueError, match="no request"):
        load("prefix-repetition", p, Arrivals(process="poisson", rate=1.0, start_s=1e6))


def test_azure_and_generic_are_seeded(tmp_path: Path) -> None:
    a = Arrivals(max_requests=50)
    x, y = (
        load("azure", AzureTrace(trace="conv"), a, 1),
        load("azure", AzureTrace(trace="conv"), a, 1),
    )
    z = load("azure", AzureTrace(trace="conv"), a, 2)
    assert x == y and x != z
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,input_length,output_length,hash_ids\n0,20,2,5 6\n1,20,2,5 7\n")
    got = load("trace", GenericTrace(path="t.csv", block_size=16), Arrivals(), base_dir=tmp_path)
    assert [tuple(r.hash_ids) for r in got] == [(5, 6), (5, 7)]


def test_generic_csv_bad_values(tmp_path: Path) -> None:
    from radixbench.workloads.trace import TraceError

    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,input_length,output_length,hash_ids\n0,20,2,5 x\n")
    with pytest.raises(TraceError, match=r"t\.csv:2: 'hash_ids' must be space-separated ints"):
        load("trace", GenericTrace(path=str(csv)), Arrivals())
    csv.write_text("")
    with pytest.raises(TraceError, match="empty file"):
        load("trace", GenericTrace(path=str(csv)), Arrivals())
    with pytest.raises(ValueError, match="unknown workload kind"):
        load("nope", None, Arrivals())


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("m.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}\n',
         "mooncake"),
        ("g.jsonl", '\n{"arrival_s": 0, "input_length": 1, "output_length": 1}\n', "trace"),
        ("g.csv", "arrival_s,input_length,output_length\n0,1,1\n", "trace"),
        ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "azure"),
        ("junk.jsonl", "{not json\n", "mooncake"),  # the Mooncake loader reports file:line
        ("empty.jsonl", "", "mooncake"),
    ],
)  # fmt: skip
def test_detect_trace_kind(tmp_path: Path, name: str, text: str, kind: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert detect_trace_kind(path) == kind


def test_empty_trace_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(TraceError, match=r"empty\.jsonl: no request selected"):
        load("mooncake", MooncakeTrace(path=str(path)), Arrivals())
