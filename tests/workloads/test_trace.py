"""Tests for radixbench.workloads.trace (Mooncake FAST'25 loader)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from radixbench.workloads import (
    TraceError,
    TraceRequest,
    bundled_mooncake_path,
    load_mooncake,
)

BUNDLED_LINES = 12031


def rec(ts: Any = 0, inp: Any = 600, out: Any = 10, hashes: Any = (0, 1)) -> dict[str, Any]:
    return {
        "timestamp": ts,
        "input_length": inp,
        "output_length": out,
        "hash_ids": list(hashes) if isinstance(hashes, tuple) else hashes,
    }


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    return write_lines(path, [json.dumps(r) for r in records])


@pytest.fixture(scope="module")
def bundled() -> list[TraceRequest]:
    return load_mooncake()


# --- bundled trace -----------------------------------------------------------------------


def test_bundled_path_is_packaged_file() -> None:
    path = bundled_mooncake_path()
    assert path.name == "conversation_trace.jsonl"
    assert path.is_file()
    for name in ("LICENSE-APACHE", "LICENSE-CC-BY-4.0", "NOTICE"):
        assert (path.parent / name).is_file(), name
    notice = (path.parent / "NOTICE").read_text(encoding="utf-8")
    assert "kvcache-ai/Mooncake" in notice
    assert "AzureLLMInferenceDataset2023" in notice
    with path.open("rb") as fh:
        assert sum(1 for _ in fh) == BUNDLED_LINES


def test_bundled_loads_whole_trace(bundled: list[TraceRequest]) -> None:
    assert len(bundled) == BUNDLED_LINES
    assert [r.rid for r in bundled] == list(range(BUNDLED_LINES))
    assert bundled[0].arrival_s == 0.0
    assert all(r.hash_ids[0] == 0 for r in bundled[:100])
    assert bundled[0] == TraceRequest(0, 0.0, 6758, 500, tuple(range(14)))
    assert bundled[-1].arrival_s == pytest.approx(3536.999)
    arrivals = [r.arrival_s for r in bundled]
    assert arrivals == sorted(arrivals)
    for r in bundled:
        assert (len(r.hash_ids) - 1) * 512 < r.input_length <= len(r.hash_ids) * 512
        assert r.output_length >= 1
        assert isinstance(r.hash_ids, tuple)


def test_trace_request_is_frozen_with_slots(bundled: list[TraceRequest]) -> None:
    r = bundled[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.rid = 5  # type: ignore[misc]
    assert not hasattr(r, "__dict__")


# --- selection -------------------------------------------------------------------------


def test_max_requests_takes_first_n(bundled: list[TraceRequest]) -> None:
    got = load_mooncake(max_requests=37)
    assert got == bundled[:37]


def test_max_requests_stops_reading_early(tmp_path: Path) -> None:
    good = [json.dumps(rec(ts=i)) for i in range(3)]
    path = write_lines(tmp_path / "t.jsonl", [*good, "{broken"])
    assert [r.rid for r in load_mooncake(path, max_requests=3)] == [0, 1, 2]
    with pytest.raises(TraceError):
        load_mooncake(path)


def test_window_selects_half_open_interval(tmp_path: Path) -> None:
    stamps = [1000, 1500, 2000, 2500, 3500]  # arrivals 0, 0.5, 1.0, 1.5, 2.5 s
    path = write_records(tmp_path / "w.jsonl", [rec(ts=t) for t in stamps])
    got = load_mooncake(path, start_s=0.5, window_s=1.0)
    assert [r.rid for r in got] == [1, 2]
    assert [r.arrival_s for r in got] == [0.5, 1.0]
    assert [r.rid for r in load_mooncake(path, start_s=1.0)] == [2, 3, 4]
    assert [r.rid for r in load_mooncake(path, window_s=1.5)] == [0, 1, 2]
    assert [r.rid for r in load_mooncake(path, start_s=0.5, window_s=5, max_requests=2)] == [1, 2]
    assert load_mooncake(path, start_s=10.0) == []


def test_window_stops_reading_after_window(tmp_path: Path) -> None:
    good = [json.dumps(rec(ts=t)) for t in (0, 100, 5000)]
    path = write_lines(tmp_path / "w.jsonl", [*good, "not json"])
    assert [r.rid for r in load_mooncake(path, window_s=1.0)] == [0, 1]


def test_window_on_bundled_matches_filter(bundled: list[TraceRequest]) -> None:
    got = load_mooncake(start_s=100.0, window_s=60.0)
    expected = [r for r in bundled if 100.0 <= r.arrival_s < 160.0]
    assert got == expected
    assert 0 < len(got) < len(bundled)


def test_blank_lines_skipped_but_counted(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "b.jsonl", [json.dumps(rec()), "", json.dumps(rec(ts=5)), "[]"])
    with pytest.raises(TraceError) as info:
        load_mooncake(path)
    assert info.value.line == 4
    got = load_mooncake(path, max_requests=2)
    assert [(r.rid, r.arrival_s) for r in got] == [(0, 0.0), (1, 0.005)]


def test_length_boundaries_accepted(tmp_path: Path) -> None:
    records = [rec(inp=1024, hashes=(0, 1)), rec(inp=513, hashes=(0, 2)), rec(inp=1, hashes=(5,))]
    got = load_mooncake(write_records(tmp_path / "ok.jsonl", records))
    assert [r.input_length for r in got] == [1024, 513, 1]
    assert got[1].hash_ids == (0, 2)


def test_block_size_parameter_used_for_checks(tmp_path: Path) -> None:
    path = write_records(tmp_path / "bs.jsonl", [rec(inp=100, hashes=(0,))])
    assert load_mooncake(path)[0].input_length == 100
    assert load_mooncake(path, block_size=100)[0].input_length == 100
    with pytest.raises(TraceError, match=re.escape("bs.jsonl:1:")):
        load_mooncake(path, block_size=64)


# --- validation ------------------------------------------------------------------------

BAD_LINES: list[tuple[str, str, str]] = [
    ("bad_json", '{"timestamp": 3, "input_length": ', "invalid JSON"),
    ("not_object", "[1, 2, 3]", "JSON object"),
    ("bad_utf8", '{"timestamp": "\xff"}', "not UTF-8 text"),
    *[
        (f"missing_{k}", json.dumps({kk: v for kk, v in rec(ts=5).items() if kk != k}), k)
        for k in ("timestamp", "input_length", "output_length", "hash_ids")
    ],
    ("ts_string", json.dumps(rec(ts="5")), "timestamp"),
    ("ts_bool", json.dumps(rec(ts=True)), "timestamp"),
    (
        "ts_nan",
        '{"timestamp": NaN, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}',
        "timestamp",
    ),
    ("in_float", json.dumps(rec(ts=5, inp=600.0)), "input_length"),
    ("in_bool", json.dumps(rec(ts=5, inp=True, hashes=(0,))), "input_length"),
    ("out_string", json.dumps(rec(ts=5, out="10")), "output_length"),
    ("out_bool", json.dumps(rec(ts=5, out=True)), "output_length"),
    ("hashes_not_list", json.dumps(rec(ts=5, hashes=7)), "hash_ids"),
    ("hashes_bool", json.dumps(rec(ts=5, hashes=[0, True])), "hash_ids"),
    ("hashes_str", json.dumps(rec(ts=5, hashes=[0, "1"])), "hash_ids"),
    ("hashes_negative", json.dumps(rec(ts=5, hashes=[0, -1])), "hash_ids"),
    ("in_negative", json.dumps(rec(ts=5, inp=-1)), "non-negative"),
    ("out_negative", json.dumps(rec(ts=5, out=-3)), "non-negative"),
    ("out_zero", json.dumps(rec(ts=5, out=0)), "output_length"),
    ("hashes_empty", json.dumps(rec(ts=5, inp=0, hashes=[])), "empty"),
    ("in_too_long", json.dumps(rec(ts=5, inp=1025, hashes=(0, 1))), "input_length 1025"),
    ("in_too_short", json.dumps(rec(ts=5, inp=512, hashes=(0, 1))), "input_length 512"),
    ("in_zero", json.dumps(rec(ts=5, inp=0, hashes=(0,))), "input_length 0"),
    ("ts_backwards", json.dumps(rec(ts=3)), "timestamp"),
]


@pytest.mark.parametrize(("case", "line", "reason"), BAD_LINES, ids=[c[0] for c in BAD_LINES])
def test_bad_line_reports_file_and_line(tmp_path: Path, case: str, line: str, reason: str) -> None:
    good = [json.dumps(rec(ts=0)), json.dumps(rec(ts=4))]
    path = tmp_path / f"{case}.jsonl"
    path.write_bytes(("\n".join([*good, line, json.dumps(rec(ts=9))]) + "\n").encode("latin-1"))
    with pytest.raises(TraceError) as info:
        load_mooncake(path)
    err = info.value
    msg = str(err)
    assert isinstance(err, ValueError)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:3: ")
    assert f"{case}.jsonl:3:" in msg
    assert reason in msg
    assert (err.file, err.line) == (str(path), 3)


def test_missing_file_names_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(TraceError) as info:
        load_mooncake(path)
    msg = str(info.value)
    assert "nope.jsonl" in msg
    assert "\n" not in msg
    assert info.value.line is None


def test_directory_is_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=re.escape(str(tmp_path))):
        load_mooncake(tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_requests": 0}, "max_requests"),
        ({"max_requests": -2}, "max_requests"),
        ({"window_s": 0.0}, "window_s"),
        ({"window_s": -1.0}, "window_s"),
        ({"window_s": math.nan}, "window_s"),
        ({"block_size": 0}, "block_size"),
        ({"start_s": math.nan}, "start_s"),
    ],
)
def test_bad_parameters_raise_value_error(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name) as info:
        load_mooncake(**kwargs)
    assert not isinstance(info.value, TraceError)


def test_trace_error_format() -> None:
    err = TraceError("a/b.jsonl", 7, "bad\nthing")
    assert str(err) == "a/b.jsonl:7: bad thing"
    assert str(TraceError("x.jsonl", None, "gone")) == "x.jsonl: gone"
