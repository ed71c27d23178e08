"""PartedTable: a run table held as its servers' logs gives the frames the concatenated frames
gave (issue 28 item 3: never the whole table of a whole trace behind N instances at once)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import radixbench.sim.parted as parted
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.parted import PartedTable
from radixbench.sim.records import STRING, RecordLog, repeated, stacked_frame
from radixbench.sim.timeseries import StepLog

AXES = {"impl": "radixbench", "evictor": None, "router": "cache-aware"}


def _rec(rows: int, spill_every: int, seed: int) -> OpRecorder:
    rng = np.random.default_rng(seed)
    rec = OpRecorder()
    for i in range(rows):
        op = ("alloc", "insert", "evict", "route")[int(rng.integers(4))]
        rec.add(op, int(rng.integers(10**10)), i, -i, 3, 4, 5, float(rng.random() * 100))
        if spill_every and i % spill_every == spill_every - 1:
            rec.spill()
    return rec


def _old(logs: list[OpRecorder], variant: str, tags: list[int]) -> pd.DataFrame:
    """The frame the cluster built before: ``stacked_frame`` then ``with_axes``."""
    df = stacked_frame(logs, variant, "instance", tags)
    for i, (axis, value) in enumerate(AXES.items(), start=1):
        df.insert(i, axis, pd.Series(repeated(value, len(df), STRING), index=df.index))
    return df


@pytest.fixture
def tables() -> tuple[PartedTable, pd.DataFrame]:
    logs = [_rec(40, 5, 0), _rec(0, 0, 1), _rec(23, 0, 2), _rec(31, 10, 3)]
    t = PartedTable.concat([
        PartedTable.of(logs, "v1", AXES, "instance", [0, 1, 2, -1]),
        PartedTable.of(logs[:3], "v2", AXES, "instance", [0, 1, 2]),
    ])  # fmt: skip
    old = pd.concat([_old(logs, "v1", [0, 1, 2, -1]), _old(logs[:3], "v2", [0, 1, 2])],
                    ignore_index=True)  # fmt: skip
    return t, old


def test_the_frame_is_the_concatenated_frames(tables: tuple[PartedTable, pd.DataFrame]) -> None:
    t, old = tables
    pd.testing.assert_frame_equal(t.frame(), old)
    assert len(t) == len(old) and t.columns == list(old.columns)
    pd.testing.assert_frame_equal(t.empty(), old.iloc[:0].reset_index(drop=True))


def test_selected_rows_and_columns_keep_their_order(
    tables: tuple[PartedTable, pd.DataFrame],
) -> None:
    t, old = tables
    sel = old[old["op"].isin(["evict", "route"])][["ns", "variant", "instance", "op"]]
    got = t.frame(["ns", "variant", "instance", "op"], where={"op": ["evict", "route"]})
    pd.testing.assert_frame_equal(got, sel.reset_index(drop=True))
    one = old[(old["variant"] == "v2") & (old["instance"] == 2)][["sim_time_s", "key_len"]]
    got = t.frame(["sim_time_s", "key_len"], where={"variant": ["v2"], "instance": [2]})
    pd.testing.assert_frame_equal(got, one.reset_index(drop=True))
    assert len(t.frame(["variant"], where={"op": ["route"]})) == (old["op"] == "route").sum()
    with pytest.raises(KeyError):
        t.frame(["nope"])
    with pytest.raises(KeyError):
        t.frame(where={"ns": [1]})


def test_chunks_groups_values_and_variants(
    tables: tuple[PartedTable, pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    t, old = tables
    monkeypatch.setattr(parted, "CHUNK_ROWS", 7)
    chunks = list(t.chunks())
    assert max(len(c) for c in chunks) <= 7
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), old)
    groups = dict(t.groups("op", "ns"))
    want = {k: g["ns"].to_numpy() for k, g in old.groupby(["op", "variant"])}
    assert list(groups) == list(want)  # in key order
    assert all(np.array_equal(groups[k], want[k]) for k in want)
    assert sorted(t.values("op")) == sorted(old["op"].unique())
    first = old.drop_duplicates("variant")[["variant", *AXES]].reset_index(drop=True)
    got = t.variants().drop_duplicates("variant").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, first)


def test_a_single_server_table_has_no_tag_column() -> None:
    log = StepLog()
    for i in range(5):
        log.append(float(i), "decode", 0.5, 0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    t = PartedTable.of([log], "v", AXES)
    want = log.frame("v")
    for i, (axis, value) in enumerate(AXES.items(), start=1):
        want.insert(i, axis, pd.Series(repeated(value, len(want), STRING)))
    pd.testing.assert_frame_equal(t.frame(), want)


def test_tables_of_other_columns_do_not_concatenate() -> None:
    a = PartedTable.of([OpRecorder()], "v", AXES, "instance", [0])
    b = PartedTable.of([OpRecorder()], "w", {**AXES, "replica": "1"}, "instance", [0])
    with pytest.raises(ValueError, match="columns differ"):
        PartedTable.concat([a, b])
    with pytest.raises(ValueError, match="tags"):
        PartedTable.of([OpRecorder()], "v", AXES, "instance", [0, 1])


def test_arrow_chunks_are_the_tables_arrow_makes_of_the_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``reports.parted.write_parts`` writes: each Arrow chunk equals
    ``pa.Table.from_pandas`` of the same frame chunk (a NaN as null, a missing axis value as
    null, each log's own codes for a str column, the tag), schema and metadata included."""
    import pyarrow as pa

    monkeypatch.setattr(parted, "CHUNK_ROWS", 6)
    schema = (("op", "str"), ("ns", "int64"), ("t", "float64"))
    logs = [RecordLog(schema) for _ in range(3)]
    for k, log in enumerate(logs):
        for i in range(17 if k != 1 else 0):
            op = ("evict", "insert", "alloc")[(i + k) % 3]  # coded in another order per log
            log.append_row((op, i * 10**9 + k, float("nan") if i % 4 == 0 else i / 3))
            if i % 7 == 6:
                log.spill()
    table = PartedTable.of(logs, "v", AXES, "instance", [0, 1, 2])
    whole = pa.Table.from_pandas(table.empty(), preserve_index=False).schema
    got = list(table.arrow_chunks(whole))
    want = [pa.Table.from_pandas(c, preserve_index=False) for c in table.chunks()]
    assert len(got) == len(want) > 2
    for g, w in zip(got, want):
        assert g.schema.equals(w.schema, check_metadata=True) and g.equals(w)
    assert sum(g["t"].null_count for g in got) == 10  # the NaNs, as from_pandas reads them
    some = pa.schema([whole.field("op"), whole.field("instance")])
    assert [t.to_pydict() for t in table.arrow_chunks(some)] == [
        w.select(["op", "instance"]).to_pydict() for w in want
    ]
    with pytest.raises(KeyError, match="nope"):
        next(table.arrow_chunks(pa.schema([("nope", pa.int64())])))
