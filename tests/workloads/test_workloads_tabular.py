"""Tests for the Azure 2023 and generic JSONL/CSV trace loaders and bad-line handling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from radixbench.workloads import load_mooncake
from radixbench.workloads.segments import PrefixRule
from radixbench.workloads.tabular import bundled_azure_path, load_azure, load_generic
from radixbench.workloads.trace import TraceError

RULE = PrefixRule(prefixes=4, prefix_tokens=64, block_size=16)


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.mark.parametrize(("name", "rows"), [("code", 8819), ("conv", 19366)])
def test_bundled_azure_traces_load_whole(name: str, rows: int) -> None:
    reqs = load_azure(bundled_azure_path(name), RULE, rng())
    assert len(reqs) == rows
    assert reqs[0].arrival_s == 0.0
    times = [r.arrival_s for r in reqs]
    assert times == sorted(times) and 3000 < times[-1] < 3600  # about one hour
    assert all(r.input_length >= 1 and r.output_length >= 1 for r in reqs)


def test_azure_first_row_and_selection() -> None:
    path = bundled_azure_path("code")
    first = load_azure(path, RULE, rng(), max_requests=2)
    assert [(r.rid, r.input_length, r.output_length) for r in first] == [
        (0, 4808, 10),
        (1, 3180, 8),
    ]
    assert first[1].arrival_s == pytest.approx(0.052)
    win = load_azure(path, RULE, rng(), start_s=180.0, window_s=30.0)
    assert win and all(180.0 <= r.arrival_s < 210.0 for r in win)
    assert win[0].rid > 0


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


AZ_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZ_OK = "2023-11-16 18:17:03.9799600,48,10\n"


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("2023-13-16 18:17:04.0,48,10", "TIMESTAMP"),
        ("2023-11-16 18:17:04.0,abc,10", "ContextTokens"),
        ("2023-11-16 18:17:04.0,48,0", "GeneratedTokens"),
        ("2023-11-16 18:17:04.0,48", "fields"),
        ("2023-11-16 18:17:02.0,48,3", "before the previous"),
    ],
)
def test_azure_bad_rows_error_or_skip(tmp_path: Path, line: str, needle: str) -> None:
    path = write(
        tmp_path / "az.csv", AZ_HEAD + AZ_OK + line + "\n" + AZ_OK.replace("03.97", "05.97")
    )
    with pytest.raises(TraceError, match=needle) as exc:
        load_azure(path, RULE, rng())
    assert str(exc.value).startswith(f"{path}:3: ")
    skipped: list[TraceError] = []
    got = load_azure(path, RULE, rng(), on_bad_line="skip", skipped=skipped)
    assert [r.rid for r in got] == [0, 2] and len(skipped) == 1 and skipped[0].line == 3


def test_azure_missing_header_and_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="header lacks column"):
        load_azure(write(tmp_path / "a.csv", "a,b\n1,2\n"), RULE, rng())
    with pytest.raises(TraceError, match="cannot open"):
        load_azure(tmp_path / "none.csv", RULE, rng())


def test_generic_jsonl_with_hashes_and_csv_without(tmp_path: Path) -> None:
    recs = [
        {"arrival_s": 1.0, "input_length": 30, "output_length": 2, "hash_ids": [1, 2]},
        {"arrival_s": 1.5, "input_length": 20, "output_length": 2, "hash_ids": [1, 3], "x": 1},
    ]
    j = write(tmp_path / "t.jsonl", "".join(json.dumps(r) + "\n" for r in recs))
    got = load_generic(j, RULE, rng(), block_size=16)
    assert [r.arrival_s for r in got] == [0.0, 0.5]
    assert got[1].hash_ids == (1, 3) and got[1].hash_ids.block_size == 16  # type: ignore[attr-defined]
    c = write(
        tmp_path / "t.csv",
        "arrival_s,input_length,output_length,hash_ids\n0,30,2,1 2\n2,20,2,1 3\n",
    )
    assert [(r.input_length, tuple(r.hash_ids)) for r in load_generic(c, RULE, rng())] == [
        (30, (1, 2)),
        (20, (1, 3)),
    ]
    c2 = write(tmp_path / "u.csv", "arrival_s,input_length,output_length\n0,100,2\n1,100,2\n")
    synth = load_generic(c2, RULE, rng())
    assert [r.input_length for r in synth] == [100, 100]


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{bad", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"input_length": 3, "output_length": 1}', "missing key 'arrival_s'"),
        ('{"arrival_s": "x", "input_length": 3, "output_length": 1}', "arrival_s"),
        ('{"arrival_s": 2, "input_length": 0, "output_length": 1}', "input_length"),
        ('{"arrival_s": 2, "input_length": 3, "output_length": true}', "output_length"),
        ('{"arrival_s": 2, "input_length": 3, "output_length": 1, "hash_ids": [-1]}', "hash_ids"),
        (
            '{"arrival_s": 2, "input_length": 40, "output_length": 1, "hash_ids": [1]}',
            "does not fit",
        ),
        ('{"arrival_s": 2, "input_length": 4, "output_length": 1, "hash_ids": [1]}', "every line"),
        ('{"arrival_s": 0.5, "input_length": 3, "output_length": 1}', "before the previous"),
    ],
)
def test_generic_bad_lines(tmp_path: Path, line: str, needle: str) -> None:
    ok = '{"arrival_s": 1, "input_length": 3, "output_length": 1}'
    path = write(tmp_path / "g.jsonl", f"{ok}\n{line}\n{ok.replace('1,', '3,', 1)}\n")
    with pytest.raises(TraceError, match=needle) as exc:
        load_generic(path, RULE, rng())
    assert str(exc.value).startswith(f"{path}:2: ")
    skipped: list[TraceError] = []
    got = load_generic(path, RULE, rng(), on_bad_line="skip", skipped=skipped)
    assert len(got) == 2 and [e.line for e in skipped] == [2]


def test_generic_needs_known_suffix(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"\.jsonl or \.csv"):
        load_generic(write(tmp_path / "t.txt", ""), RULE, rng())


def test_mooncake_skip_counts_bad_lines(tmp_path: Path) -> None:
    good = {"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}
    later = {**good, "timestamp": 5}
    path = write(tmp_path / "m.jsonl", f"{json.dumps(good)}\n{{oops\n{json.dumps(later)}\n")
    with pytest.raises(TraceError, match=":2: invalid JSON"):
        load_mooncake(path)
    skipped: list[TraceError] = []
    got = load_mooncake(path, on_bad_line="skip", skipped=skipped)
    assert [r.rid for r in got] == [0, 2] and [e.line for e in skipped] == [2]
    with pytest.raises(ValueError, match="on_bad_line"):
        load_mooncake(path, on_bad_line="ignore")


_MOONCAKE_OK = b'{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'


@pytest.mark.parametrize(
    ("suffix", "good", "bad"),
    [
        (".jsonl", b'{"arrival_s": 0, "input_length": 40, "output_length": 4}\n',
         b'{"arrival_s": 1, "input_length": 40, "output_length": 4, "x": "\xff"}\n'),
        (".csv", b"arrival_s,input_length,output_length\n0,40,4\n", b"1,4\xff0,4\n"),
        (".mooncake.jsonl", _MOONCAKE_OK,
         b'{"timestamp": 5, "input_length": 10, "output_length": 2, "hash_ids": [1], "\xfe": 0}\n'),
    ],
)  # fmt: skip
def test_non_utf8_line_names_file_and_line_and_can_be_skipped(
    tmp_path: Path, suffix: str, good: bytes, bad: bytes
) -> None:
    path = tmp_path / f"t{suffix}"
    last = good.splitlines(keepends=True)[-1].replace(b"0,", b"2,").replace(b": 0,", b": 9,")
    path.write_bytes(good + bad + last)
    bad_line = len(good.splitlines()) + 1

    def load(**kw):
        if suffix == ".mooncake.jsonl":
            return load_mooncake(path, block_size=16, **kw)
        return load_generic(path, RULE, rng(), **kw)

    with pytest.raises(TraceError, match=rf"t{suffix}:{bad_line}: not UTF-8 text: byte 0x"):
        load()
    skipped: list[TraceError] = []
    reqs = load(on_bad_line="skip", skipped=skipped)
    assert len(reqs) == 2 and [e.line for e in skipped] == [bad_line]


def test_non_utf8_csv_header_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_bytes(b"arrival_s,input_\xfflength,output_length\n0,40,4\n")
    with pytest.raises(TraceError, match=r"h\.csv:1: header line: not UTF-8"):
        load_generic(path, RULE, rng(), on_bad_line="skip")
