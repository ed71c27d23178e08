"""RecordLog: rows appended to flat int/float buffers, read back as typed columns."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from radixbench.sim.instrument import OpRecorder
from radixbench.sim.records import RecordLog, stacked_frame
from radixbench.sim.timeseries import StepLog

SCHEMA = (("op", "str"), ("ns", "int64"), ("t", "float64"), ("k", "int64"))


def test_columns_follow_the_rows_and_the_schema() -> None:
    log = RecordLog(SCHEMA)
    log.append_row(("insert", 5, 0.5, -3))
    log.ints.extend((log.code("evict"), 7))  # the hot-path form: ints then floats
    log.ints.append(2**62)
    log.floats.append(1.0)
    log.append_row(("insert", 9, 2.25, 0))
    df = log.frame("v")
    assert list(df.columns) == ["variant", "op", "ns", "t", "k"]
    assert df["op"].tolist() == ["insert", "evict", "insert"]
    assert df["ns"].tolist() == [5, 7, 9] and df["ns"].dtype == "int64"
    assert df["k"].tolist() == [-3, 2**62, 0] and df["k"].dtype == "int64"
    assert df["t"].tolist() == [0.5, 1.0, 2.25] and df["t"].dtype == "float64"
    assert set(df["variant"]) == {"v"}
    assert pd.api.types.is_string_dtype(df["op"])
    assert len(log) == 3
    assert log.rows == {
        "op": ["insert", "evict", "insert"],
        "ns": [5, 7, 9],
        "t": [0.5, 1.0, 2.25],
        "k": [-3, 2**62, 0],
    }
    assert all(type(v) is int for v in log.rows["ns"])


def test_str_columns_are_pandas_str_on_shared_python_objects() -> None:
    """The str family a frame built from str gives (NaN for missing), stored as pointers to
    one shared object per distinct value (sim.records.STR), not a copy of the characters per
    row."""
    log = RecordLog(SCHEMA)
    log.append_row(("insert", 5, 0.5, 1))
    log.append_row(("insert", 6, 0.5, 1))
    direct = pd.DataFrame({"op": ["insert"]})
    col = log.frame("v")["op"]
    assert (
        isinstance(col.dtype, pd.StringDtype) and col.dtype.na_value is direct["op"].dtype.na_value
    )
    assert col.dtype.storage == "python" and col.array[0] is col.array[1]
    assert log.frame("v")["variant"].dtype == col.dtype


def test_empty_log_keeps_the_column_types() -> None:
    empty, full = RecordLog(SCHEMA), RecordLog(SCHEMA)
    full.append_row(("insert", 5, 0.5, 1))
    assert len(empty) == 0 and len(empty.frame("v")) == 0
    assert empty.frame("v").dtypes.tolist() == full.frame("v").dtypes.tolist()


def test_a_half_written_row_is_caught_when_read() -> None:
    log = RecordLog(SCHEMA)
    log.append_row(("insert", 5, 0.5, 1))
    log.ints.extend((log.code("evict"), 7, 1))  # no float value
    with pytest.raises(ValueError, match="log rows disagree"):
        log.frame("v")


def test_values_that_do_not_fit_the_columns_raise() -> None:
    log = RecordLog(SCHEMA)
    with pytest.raises(TypeError):
        log.append_row(("insert", "five", 0.5, 1))
    with pytest.raises(ValueError, match="unknown column kinds"):
        RecordLog((("a", "int32"),))
    with pytest.raises(ValueError, match="at least one int64 or str"):
        RecordLog((("a", "float64"),))


def test_last_row_copies_the_last_row() -> None:
    log = RecordLog(SCHEMA)
    with pytest.raises(IndexError):
        log.last_row()
    log.append_row(("insert", 5, 0.5, 1))
    log.append_row(("evict", 6, 1.5, 2))
    ints, floats = log.last_row()
    assert list(ints) == [log.code("evict"), 6, 2] and list(floats) == [1.5]
    ints[1] = 99  # a copy: the log is unchanged
    assert log.rows["ns"] == [5, 6]


def test_op_recorder_and_step_log_give_their_contract_columns() -> None:
    rec = OpRecorder()
    rec.add("insert", 10, 3, 1, 4, 5, 6, 0.25)
    rec.add("evict", 20, 7, 2, 8, 9, 1, 0.5)
    df = rec.frame("v")
    assert list(df.columns) == [
        "variant",
        "op",
        "ns",
        "key_len",
        "result",
        "tree_nodes",
        "tree_tokens",
        "evictable_leaves",
        "parent",
        "sim_time_s",
    ]
    assert df.iloc[1, 1:].tolist() == ["evict", 20, 7, 2, 8, 9, 1, "", 0.5]
    assert rec.take_charge_ns() == 30 and rec.take_charge_ns() == 0
    steps = StepLog()
    steps.append(1.5, "decode", 0.02, 1e-5, 4, 4, 0, 4, 100, 1000, 50, 40, 0)
    steps.add(
        sim_time_s=2.0,
        step="prefill",
        step_s=0.1,
        measured_cpu_s=2e-5,
        batch_size=1,
        new_tokens=30,
        queue_len=2,
        running=4,
        kv_used_tokens=130,
        kv_capacity_tokens=1000,
        evictable_tokens=60,
        protected_tokens=70,
        retractions=0,
    )
    sdf = steps.frame("v")
    assert sdf["step"].tolist() == ["decode", "prefill"]
    assert sdf.iloc[0, 1:].tolist() == [1.5, "decode", 0.02, 1e-5, 4, 4, 0, 4, 100, 1000, 50, 40, 0]
    assert sdf["kv_used_tokens"].tolist() == [100, 130]
    with pytest.raises(KeyError):
        steps.add(sim_time_s=3.0)


def test_each_row_names_the_timed_op_it_was_made_in() -> None:
    """``parent``: "" for the simulator's own calls, else the enclosing timed op (an insert and
    a match inside a checkpoint), so call sites can be compared like for like."""
    rec = OpRecorder()
    stats = lambda: (1, 2, 3)  # noqa: E731
    match = rec.timed("match_prefix", lambda k: k, stats, lambda k: k, lambda r, k: r)
    insert = rec.timed("insert", lambda k: k, stats, lambda k: k, lambda r, k: r)

    def checkpoint(k: int) -> int:
        insert(k)
        return match(k)

    ckpt = rec.timed("checkpoint", checkpoint, stats, lambda k: k, lambda *_: 0)
    match(5)
    ckpt(7)
    rec.add("build_extend", 10, 1, 0, 0, 0, 0, 0.0)
    df = rec.frame("v")
    assert list(zip(df["op"], df["parent"])) == [
        ("match_prefix", ""),
        ("insert", "checkpoint"),
        ("match_prefix", "checkpoint"),
        ("checkpoint", ""),
        ("build_extend", ""),
    ]
    with pytest.raises(ZeroDivisionError):  # an exception leaves no parent behind
        rec.timed("evict", lambda: 1 // 0, stats, lambda: 0, lambda *_: 0)()
    match(1)
    assert rec.frame("v")["parent"].iloc[-1] == ""


def test_a_log_read_mid_run_can_still_grow() -> None:
    log = RecordLog(SCHEMA)
    log.append_row(("insert", 5, 0.5, 1))
    first = log.frame("v")
    for i in range(5000):  # grows the buffers: no view of them may outlive frame()
        log.append_row(("evict", i, 1.0, 2))
    assert len(first) == 1 and len(log.frame("v")) == 5001


def test_compact_storage_gives_the_same_int64_columns() -> None:
    """``int32`` ints and ``wide`` int64 columns kept among the floats (OpRecorder's ns) come
    back as int64, exactly (an ns above int32 too); a value outside int32 is refused."""
    schema = (("op", "str"), ("ns", "int64"), ("n", "int64"), ("t", "float64"))
    wide, plain = RecordLog(schema, int32=True, wide=("ns",)), RecordLog(schema)
    rows = [("evict", 3 * 10**9 + 7, 5, 1.5), ("insert", 12, -2, 2.5)]
    for row in rows:
        wide.append_row(row)
        plain.append_row(row)
    assert wide.float_cols == ("ns", "t") and wide.int_cols == ("op", "n")
    a, b = wide.frame("v"), plain.frame("v")
    pd.testing.assert_frame_equal(a, b)
    assert a["ns"].dtype == np.int64 and a["ns"].tolist() == [3 * 10**9 + 7, 12]
    with pytest.raises(OverflowError):
        wide.ints.append(2**40)
    with pytest.raises(ValueError, match="not an int64 column"):
        RecordLog(schema, wide=("t",))


def test_stacked_frame_equals_the_concatenated_frames() -> None:
    """One frame of several logs (each instance's) column by column: the values a concat of
    each log's frame with its tag column gives, string columns included (codes per log)."""
    logs = []
    for k in range(3):
        log = OpRecorder()
        for i in range(k + 1):
            log.add(["evict", "insert", "match_prefix"][(i + k) % 3], 10 * i, i, k, 1, 2, 3, 0.5)
        logs.append(log)
    logs.append(OpRecorder())  # an empty one
    got = stacked_frame(logs, "v", "instance", [0, 1, 2, -1])
    parts = []
    for log, tag in zip(logs, [0, 1, 2, -1]):
        f = log.frame("v")
        f["instance"] = pd.Series([tag] * len(f), dtype="int64")
        parts.append(f)
    want = pd.concat(parts, ignore_index=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert list(got.dtypes.astype(str)) == list(want.dtypes.astype(str))
    with pytest.raises(ValueError, match="tags"):
        stacked_frame(logs, "v", "instance", [0])


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def test_a_timed_call_leaves_out_bookkeeping_nested_in_it() -> None:
    """Issue 31 item 5: an adapter's bookkeeping (``untimed``) and the stats reads of timed
    calls nested in a call are not the call's time. Each of 5 nested calls reads stats for
    200 µs and runs 200 µs of untimed work; the outer call records well under that."""
    rec = OpRecorder()
    slow_stats = lambda: (_spin(200_000), (0, 0, 0))[1]  # noqa: E731
    inner = rec.timed("insert", lambda: None, slow_stats, lambda: 0, lambda *_: 0)

    def body() -> None:
        for _ in range(5):
            inner()
            rec.untimed(_spin, 200_000)

    outer = rec.timed("checkpoint", body, lambda: (0, 0, 0), lambda: 0, lambda *_: 0)
    outer()
    df = rec.frame("v")
    ckpt = int(df.loc[df["op"] == "checkpoint", "ns"].iloc[0])
    assert ckpt < 1_000_000, ckpt  # 2 ms of bookkeeping ran inside it
    assert rec.take_charge_ns() == ckpt  # the coupled clock is charged what was recorded
    assert rec.untimed(lambda x: x + 1, 1) == 2


@pytest.mark.parametrize("int32", [False, True])
def test_extend_rows_gives_the_log_of_single_appends(int32: bool) -> None:
    schema = [("op", "str"), ("n", "int64"), ("t", "float64"), ("ns", "int64")]
    one = RecordLog(schema, int32=int32, wide=("ns",))
    many = RecordLog(schema, int32=int32, wide=("ns",))
    rows = [("a", 3, 0.5, 10**12), ("b", -4, 1.25, 7), ("a", 2**31 - 1, 2.0, 0)]
    for r in rows:
        one.append_row(r)
    ints = np.array([[many.code(op), n] for op, n, _, _ in rows])
    floats = np.array([[t, ns] for _, _, t, ns in rows], dtype=np.float64)
    many.extend_rows(ints, floats)
    assert one.rows == many.rows
    assert one.ints == many.ints and one.floats == many.floats


def test_extend_rows_refuses_what_does_not_fit() -> None:
    log = RecordLog([("op", "str"), ("t", "float64")], int32=True)
    with pytest.raises(ValueError, match="do not fit"):
        log.extend_rows(np.zeros((2, 2)), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="do not fit"):
        log.extend_rows(np.zeros((2, 1)), np.zeros((3, 1)))
    with pytest.raises(OverflowError, match="outside int32"):
        log.extend_rows(np.array([[2**31]]), np.zeros((1, 1)))
    assert len(log) == 0
