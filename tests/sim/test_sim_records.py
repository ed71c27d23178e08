"""records_frame: row tuples to typed columns; relaxed_gc: thresholds raised, then restored."""

from __future__ import annotations

import gc

import pandas as pd
import pytest

from radixbench.sim.records import records_frame
from radixbench.sim.run import relaxed_gc

SCHEMA = (("op", "str"), ("ns", "int64"), ("t", "float64"))


def test_columns_follow_the_tuples_and_the_schema() -> None:
    df = records_frame([("insert", 5, 0.5), ("evict", 7, 1.0)], SCHEMA, "v")
    assert list(df.columns) == ["variant", "op", "ns", "t"]
    assert df["op"].tolist() == ["insert", "evict"]
    assert df["ns"].tolist() == [5, 7] and df["ns"].dtype == "int64"
    assert df["t"].dtype == "float64"
    assert set(df["variant"]) == {"v"}
    assert pd.api.types.is_string_dtype(df["op"])


def test_empty_records_keep_the_column_types() -> None:
    empty = records_frame([], SCHEMA, "v")
    full = records_frame([("insert", 5, 0.5)], SCHEMA, "v")
    assert len(empty) == 0
    assert empty.dtypes.tolist() == full.dtypes.tolist()


def test_a_tuple_that_does_not_fit_raises() -> None:
    with pytest.raises((ValueError, TypeError)):
        records_frame([("insert", "five", 0.5)], SCHEMA, "v")


def test_relaxed_gc_raises_gen0_then_restores() -> None:
    before = gc.get_threshold()
    with relaxed_gc(before[0] + 1000):
        assert gc.get_threshold() == (before[0] + 1000, *before[1:])
    assert gc.get_threshold() == before


def test_relaxed_gc_never_lowers_the_threshold() -> None:
    before = gc.get_threshold()
    with relaxed_gc(1):
        assert gc.get_threshold() == before
    assert gc.get_threshold() == before


def test_str_column_is_what_pandas_makes_of_a_list_of_str() -> None:
    ops = ["insert", "evict", "insert", "match_prefix", "evict"]
    df = records_frame([(op, i, 0.5) for i, op in enumerate(ops)], SCHEMA, "v")
    pd.testing.assert_series_equal(df["op"], pd.DataFrame({"op": ops})["op"])
