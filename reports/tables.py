"""Input table schemas (docs/CONTRACTS.md) and their validation and storage.

Two tables flow from the simulator into the reports:

* the per-request table (:data:`REQUEST_COLUMNS`), one row per request per variant; times are
  in seconds (s) of simulated time, lengths in tokens;
* the per-op table (:data:`OP_COLUMNS`), one row per timed cache operation; ``ns`` is the
  ``perf_counter_ns`` wall time of the call in nanoseconds (ns), ``key_len``/``result`` are in
  tokens, ``sim_time_s`` is simulated time in seconds.

Tables are stored as ``<stem>.parquet`` (the canonical, typed copy that :func:`read_table`
reads) plus ``<stem>.csv`` (for humans and spreadsheets) where the table fits a spreadsheet
(:data:`CSV_MAX_ROWS`), both written atomically.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from radixbench.reports._atomic import atomic_paths

__all__ = [
    "CSV_MAX_ROWS",
    "OP_COLUMNS",
    "REQUEST_COLUMNS",
    "REQUEST_STATUSES",
    "TIMESERIES_COLUMNS",
    "read_table",
    "validate_frame",
    "write_table",
]

#: Per-request table: column name -> dtype name ("str", "int64" or "float64").
#: Units: ``*_s`` seconds of simulated time; ``input_len``/``output_len``/``prefix_hit_tokens``
#: tokens; ``status`` is one of :data:`REQUEST_STATUSES`.
REQUEST_COLUMNS: dict[str, str] = {
    "variant": "str",
    "rid": "int64",
    "arrival_s": "float64",
    "input_len": "int64",
    "output_len": "int64",
    "prefix_hit_tokens": "int64",
    "first_token_s": "float64",
    "finish_s": "float64",
    "ttft_s": "float64",
    "e2e_s": "float64",
    "status": "str",
}

#: Per-op table: column name -> dtype name. ``ns`` is wall time in nanoseconds; ``key_len`` and
#: ``result`` are tokens; ``tree_nodes``/``tree_tokens``/``evictable_leaves`` describe the tree
#: before the call; ``sim_time_s`` is simulated time in seconds. Optional, not checked here
#: (absent in older runs): ``parent`` (str), the timed op the call was made in ("" = top level).
OP_COLUMNS: dict[str, str] = {
    "variant": "str",
    "op": "str",
    "ns": "int64",
    "key_len": "int64",
    "result": "int64",
    "tree_nodes": "int64",
    "tree_tokens": "int64",
    "evictable_leaves": "int64",
    "sim_time_s": "float64",
}

#: Time-series table (docs/CONTRACTS.md, stem ``timeseries``): the columns the reports use.
#: ``sim_time_s`` s of simulated time; ``queue_len`` waiting requests; ``kv_*_tokens`` tokens.
TIMESERIES_COLUMNS: dict[str, str] = {
    "variant": "str",
    "sim_time_s": "float64",
    "queue_len": "int64",
    "kv_used_tokens": "int64",
    "kv_capacity_tokens": "int64",
}

#: Allowed values of the per-request ``status`` column.
REQUEST_STATUSES: tuple[str, ...] = ("finished", "rejected")


def _dtype_ok(series: pd.Series, expected: str) -> bool:
    """Return whether ``series`` has the contract dtype ``expected``.

    ``"str"`` accepts pandas string dtypes and ``object`` columns holding only ``str`` values
    (pandas < 3 stores strings as ``object``); ``"int64"``/``"float64"`` require exactly that
    NumPy dtype (no nullable extension types, no silent widening).
    """
    if expected == "str":
        if isinstance(series.dtype, pd.StringDtype):
            return True
        if series.dtype == np.dtype(object):
            return bool(series.map(lambda v: isinstance(v, str)).all())
        return False
    return bool(series.dtype == np.dtype(expected))


def validate_frame(df: pd.DataFrame, columns: Mapping[str, str], name: str) -> None:
    """Check that ``df`` has every column of ``columns`` with the declared dtype.

    Extra columns are allowed. Raises :class:`ValueError` with a one-line message naming the
    table (``name``) and the first missing or mistyped column, e.g.
    ``"ops table: column 'ns' has dtype float64, expected int64"``.
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} table: expected a pandas DataFrame, got {type(df).__name__}")
    for column, expected in columns.items():
        if column not in df.columns:
            raise ValueError(f"{name} table: missing column {column!r} (expected {expected})")
        if not _dtype_ok(df[column], expected):
            raise ValueError(
                f"{name} table: column {column!r} has dtype {df[column].dtype}, expected {expected}"
            )


#: Most rows a table may hold to get a CSV copy: what one spreadsheet sheet holds (Excel:
#: 1,048,576 rows, the header one of them). Larger tables, the per-call ``ops`` log and the
#: per-step ``timeseries`` of long runs (the whole Mooncake trace on 8 instances: 5.2 M op
#: rows, 0.9 GB of CSV, more CPU than their Parquet to write), are stored as Parquet only.
CSV_MAX_ROWS = 1_048_575


def write_table(df: Any, directory: Path | str, stem: str) -> tuple[Path, Path | None]:
    """Write ``df`` (a DataFrame, or a table held in parts: ``reports.parted.TableParts``,
    written chunk by chunk) to ``<directory>/<stem>.parquet`` and, when it has at most
    :data:`CSV_MAX_ROWS` rows, ``<directory>/<stem>.csv``; a larger table's old
    ``<stem>.csv`` (of an earlier table of that name) is removed once the Parquet is in place.

    Both files are serialized to temporary files in ``directory`` first and only then moved
    over the targets with :func:`os.replace`; if either serialization fails, neither existing
    file is touched and no temporary file remains. The index is not written.

    Returns ``(parquet_path, csv_path)``; ``csv_path`` is None where no CSV was written.
    """
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    directory = Path(directory)
    parquet_path = directory / f"{stem}.parquet"
    csv_path = directory / f"{stem}.csv"
    csv = csv_path if len(df) <= CSV_MAX_ROWS else None
    with atomic_paths(parquet_path, *filter(None, [csv])) as (parquet_tmp, *tmps):
        csv_tmp = tmps[0] if tmps else None
        if not isinstance(df, pd.DataFrame):
            from radixbench.reports.parted import write_parts

            write_parts(df, parquet_tmp, csv_tmp)
        else:
            # what df.to_parquet(engine="pyarrow", index=False) does, the Arrow table kept
            table = pa.Table.from_pandas(df, preserve_index=False)
            pq.write_table(table, parquet_tmp)
            if csv_tmp is not None and _arrow_csv_reads_alike(table):
                pa_csv.write_csv(table, csv_tmp)  # ~10x faster than pandas on millions of rows
            elif csv_tmp is not None:
                df.to_csv(csv_tmp, index=False)
    if csv is None:
        csv_path.unlink(missing_ok=True)  # an earlier table's copy of that name
    return parquet_path, csv


def _arrow_csv_reads_alike(table: Any) -> bool:
    """Whether Arrow's CSV of ``table`` reads back (``pd.read_csv``) as pandas' CSV does:
    Arrow writes a whole float as ``1``, not ``1.0``, so a float column with no missing value
    and only whole values would come back as ints; such a table is written by pandas."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for col in table.columns:
        if not pa.types.is_floating(col.type) or col.null_count:
            continue
        if len(col) == 0 or pc.all(pc.equal(col, pc.floor(col))).as_py():
            return False
    return True


def read_table(directory: Path | str, stem: str) -> pd.DataFrame:
    """Read the table ``<directory>/<stem>.parquet`` written by :func:`write_table`."""
    return pd.read_parquet(Path(directory) / f"{stem}.parquet", engine="pyarrow")
