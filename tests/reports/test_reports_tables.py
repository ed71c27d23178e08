"""Tests for radixbench.reports.tables: schemas, validation, atomic Parquet/CSV storage."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.tables import (
    OP_COLUMNS,
    REQUEST_COLUMNS,
    read_table,
    validate_frame,
    write_table,
)

CONTRACTS = Path(__file__).resolve().parents[2] / "docs" / "CONTRACTS.md"


def _contract_section(title_start: str) -> dict[str, str]:
    """Parse the ``name:type`` pairs of the CONTRACTS.md section whose heading starts so."""
    text = CONTRACTS.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    (body,) = [s for s in sections if s.startswith(title_start)]
    return dict(re.findall(r"\b(\w+):(str|int64|float64)\b", body))


def test_request_columns_match_contract() -> None:
    expected = _contract_section("sim -> reports: per-request table")
    assert list(REQUEST_COLUMNS.items()) == list(expected.items())


def test_op_columns_match_contract() -> None:
    expected = _contract_section("sim -> reports: per-op table")
    assert list(OP_COLUMNS.items()) == list(expected.items())


def test_valid_frames_pass(requests_df: pd.DataFrame, ops_df: pd.DataFrame) -> None:
    validate_frame(requests_df, REQUEST_COLUMNS, "requests")
    validate_frame(ops_df, OP_COLUMNS, "ops")


def test_extra_columns_and_object_strings_allowed(ops_df: pd.DataFrame) -> None:
    df = ops_df.assign(extra=1.5)
    df["variant"] = df["variant"].astype(object)
    validate_frame(df, OP_COLUMNS, "ops")


def test_missing_column_named(requests_df: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"requests table: missing column 'ttft_s'") as info:
        validate_frame(requests_df.drop(columns=["ttft_s"]), REQUEST_COLUMNS, "requests")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("column", "values", "shown"),
    [
        ("rid", lambda s: s.astype(np.float64), "float64"),
        ("arrival_s", lambda s: s.astype(np.float32), "float32"),
        ("input_len", lambda s: s.astype(np.int32), "int32"),
        ("prefix_hit_tokens", lambda s: s.astype("Int64"), "Int64"),
        ("variant", lambda s: pd.Series(range(len(s)), dtype=object), "object"),
    ],
)
def test_mistyped_column_named(requests_df: pd.DataFrame, column, values, shown) -> None:
    df = requests_df.copy()
    df[column] = values(df[column])
    with pytest.raises(ValueError, match=rf"column '{column}' has dtype {shown}") as info:
        validate_frame(df, REQUEST_COLUMNS, "requests")
    assert "\n" not in str(info.value)


def test_non_dataframe_rejected() -> None:
    with pytest.raises(ValueError, match="expected a pandas DataFrame"):
        validate_frame({"variant": ["a"]}, OP_COLUMNS, "ops")


def test_round_trip(tmp_path: Path, ops_df: pd.DataFrame) -> None:
    parquet, csv = write_table(ops_df, tmp_path, "ops")
    assert (parquet, csv) == (tmp_path / "ops.parquet", tmp_path / "ops.csv")
    back = read_table(tmp_path, "ops")
    pd.testing.assert_frame_equal(back, ops_df)
    validate_frame(back, OP_COLUMNS, "ops")
    from_csv = pd.read_csv(csv)
    assert list(from_csv.columns) == list(ops_df.columns)
    np.testing.assert_array_equal(from_csv["ns"].to_numpy(), ops_df["ns"].to_numpy())


def test_a_table_over_a_spreadsheet_is_parquet_only(
    tmp_path: Path, ops_df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    import radixbench.reports.tables as tables

    write_table(ops_df, tmp_path, "ops")  # an earlier, smaller table of that name
    assert (tmp_path / "ops.csv").exists()
    monkeypatch.setattr(tables, "CSV_MAX_ROWS", len(ops_df) - 1)
    assert write_table(ops_df, tmp_path, "ops") == (tmp_path / "ops.parquet", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.parquet"]  # its old CSV gone
    pd.testing.assert_frame_equal(read_table(tmp_path, "ops"), ops_df)
    monkeypatch.setattr(tables, "CSV_MAX_ROWS", len(ops_df))  # at the limit: both
    assert write_table(ops_df, tmp_path, "ops")[1] == tmp_path / "ops.csv"


def test_creates_directory_and_leaves_no_temp_files(tmp_path: Path, ops_df: pd.DataFrame) -> None:
    target = tmp_path / "a" / "b"
    write_table(ops_df, target, "ops")
    write_table(ops_df.head(3), target, "ops")  # overwrite
    assert sorted(p.name for p in target.iterdir()) == ["ops.csv", "ops.parquet"]
    assert len(read_table(target, "ops")) == 3


@pytest.mark.parametrize(
    ("module", "failing"), [("pyarrow.parquet", "write_table"), ("pyarrow.csv", "write_csv")]
)
def test_failed_write_keeps_old_files(
    tmp_path: Path, ops_df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch, module: str,
    failing: str,
) -> None:  # fmt: skip
    import importlib

    parquet, csv = write_table(ops_df, tmp_path, "ops")
    before = {p.name: p.read_bytes() for p in (parquet, csv)}

    def boom(*args, **kwargs):
        raise RuntimeError("serialization failed")

    monkeypatch.setattr(importlib.import_module(module), failing, boom)
    with pytest.raises(RuntimeError, match="serialization failed"):
        write_table(ops_df.head(5), tmp_path, "ops")
    monkeypatch.undo()

    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after == before  # same files, same bytes, no temp files
    assert len(read_table(tmp_path, "ops")) == len(ops_df)


def test_written_files_get_the_ordinary_mode(tmp_path, ops_df: pd.DataFrame) -> None:
    """Atomic writes go through mkstemp (0600); published files must have the mode a plain
    open() gives (0666 minus the umask), so a shared run folder stays readable."""
    old = os.umask(0o022)
    try:
        paths = write_table(ops_df.head(3), tmp_path, "ops")
    finally:
        os.umask(old)
    for path in paths:
        assert path.stat().st_mode & 0o777 == 0o644


def test_csv_reads_back_as_pandas_would_have_written_it(tmp_path: Path) -> None:
    """The CSV (Arrow's writer where it reads back alike) gives ``pd.read_csv`` the frame a
    pandas-written CSV gives: ints, fractional and missing floats, bools, strings with commas
    and quotes; a float column of whole values stays float (written by pandas)."""
    df = pd.DataFrame(
        {
            "op": pd.Series(["evict", 'say "hi", then', "insert"], dtype="string"),
            "ns": np.array([1, 2**40, 3], dtype=np.int64),
            "t": [0.1, 0.30000000000000004, 1e-300],
            "gap": [np.nan, 1.5, 2.0],
            "ok": [True, False, True],
        }
    )
    whole = df.assign(t=[1.0, 2.0, 3.0])
    for frame, stem in ((df, "mixed"), (whole, "whole")):
        _, csv = write_table(frame, tmp_path, stem)
        frame.to_csv(tmp_path / f"{stem}-pandas.csv", index=False)
        want = pd.read_csv(tmp_path / f"{stem}-pandas.csv")
        pd.testing.assert_frame_equal(pd.read_csv(csv), want, check_exact=True)
        pd.testing.assert_frame_equal(read_table(tmp_path, stem), frame)
    assert pd.read_csv(tmp_path / "whole.csv")["t"].dtype == np.float64
