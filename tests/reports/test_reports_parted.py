"""Tables in parts (reports.parted): written chunk by chunk into the files ``write_table``
writes for the whole frame, and summarised group by group as the frame is."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import radixbench.sim.parted as parted
from radixbench.reports.parted import TableParts, as_frame
from radixbench.reports.summary import op_summary
from radixbench.reports.tables import write_table
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.parted import PartedTable
from radixbench.sim.timeseries import StepLog

AXES = {"impl": "radixbench", "evictor": None}


def _steps(whole: bool) -> PartedTable:
    logs = [StepLog() for _ in range(3)]
    for k, log in enumerate(logs[:2]):
        for i in range(30):
            t = float(i) if whole else i + 0.25 * k
            cpu = 0.0 if whole else 0.001
            log.append(t, "decode", 1.0 if whole else 0.5, cpu, 1, 2, 3, 4, 5, 6, 7, 8, 9)
            if i % 8 == 7:
                log.spill()
    return PartedTable.of(logs, "v", AXES, "instance", [0, 1, 2])


def _same_files(a: Path, b: Path, stem: str) -> None:
    assert (a / f"{stem}.csv").read_bytes() == (b / f"{stem}.csv").read_bytes()
    ta, tb = pq.read_table(a / f"{stem}.parquet"), pq.read_table(b / f"{stem}.parquet")
    assert ta.schema.equals(tb.schema, check_metadata=True) and ta.equals(tb)


@pytest.mark.parametrize("whole", [False, True])  # Arrow's CSV; pandas' (whole floats)
def test_parts_write_the_files_of_their_frame(
    tmp_path: Path, whole: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parted, "CHUNK_ROWS", 7)
    table = _steps(whole)
    assert isinstance(table, TableParts)
    write_table(as_frame(table), tmp_path / "frame", "timeseries")
    write_table(table, tmp_path / "parts", "timeseries")
    _same_files(tmp_path / "frame", tmp_path / "parts", "timeseries")
    text = (tmp_path / "parts" / "timeseries.csv").read_text()
    assert ("1.0," in text) == whole  # pandas writes a whole float as 1.0, Arrow as 1


def test_parts_over_a_spreadsheet_write_their_parquet_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import radixbench.reports.tables as tables

    monkeypatch.setattr(parted, "CHUNK_ROWS", 7)
    table = _steps(False)
    write_table(as_frame(table), tmp_path / "frame", "timeseries")
    monkeypatch.setattr(tables, "CSV_MAX_ROWS", len(table) - 1)
    assert write_table(table, tmp_path / "parts", "timeseries")[1] is None
    assert [p.name for p in (tmp_path / "parts").iterdir()] == ["timeseries.parquet"]
    a, b = (pq.read_table(tmp_path / d / "timeseries.parquet") for d in ("frame", "parts"))
    assert a.schema.equals(b.schema, check_metadata=True) and a.equals(b)


def test_an_empty_table_writes_the_empty_files(tmp_path: Path) -> None:
    table = PartedTable.of([OpRecorder(), OpRecorder()], "v", AXES, "instance", [0, 1])
    write_table(table.frame(), tmp_path / "frame", "ops")
    write_table(table, tmp_path / "parts", "ops")
    _same_files(tmp_path / "frame", tmp_path / "parts", "ops")


def test_op_summary_of_parts_is_the_summary_of_the_frame() -> None:
    logs = [OpRecorder() for _ in range(2)]
    for k, log in enumerate(logs):
        for i in range(50):
            log.add(("insert", "alloc", "evict")[(i * (k + 1)) % 3], 100 + i * i, i, 0, 0, 0, 0, i)
            if i % 9 == 8:
                log.spill()
    table = PartedTable.concat([PartedTable.of(logs, v, AXES, "instance", [0, 1])
                                for v in ("b", "a")])  # fmt: skip
    pd.testing.assert_frame_equal(op_summary(table), op_summary(table.frame()))
