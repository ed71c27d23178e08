"""records_frame: row tuples to typed columns."""

from __future__ import annotations

import pandas as pd
import pytest

from radixbench.sim.records import records_frame

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
