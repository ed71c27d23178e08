"""records_frame: row tuples to typed columns; paused_gc: the collector paused, then restored."""

from __future__ import annotations

import gc

import pandas as pd
import pytest

from radixbench.sim.records import records_frame
from radixbench.sim.run import paused_gc

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


def test_paused_gc_pauses_then_restores_the_collector() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # was off before: stays off
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()
