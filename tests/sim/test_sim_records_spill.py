"""RecordLog.spill: rows moved to a temporary file read back as the same rows (issue 28 item 3:
a whole trace behind N instances logs millions of op and step rows)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

import radixbench.sim.run as sim_run
from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.experiments.workload import load_requests
from radixbench.sim.config import Variant
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.records import RecordLog
from radixbench.sim.timeseries import StepLog

SCHEMA = (("op", "str"), ("ns", "int64"), ("t", "float64"), ("k", "int64"))


def _fill(log: OpRecorder, rows: int, spill_every: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for i in range(rows):
        op = ("alloc", "insert", "evict")[int(rng.integers(3))]
        log.add(op, int(rng.integers(10**10)), i, -i, 3, 4, 5, float(rng.random()))
        if spill_every and i % spill_every == spill_every - 1:
            log.spill()


@pytest.mark.parametrize("spill_every", [1, 7, 50])
def test_a_spilled_log_reads_back_as_the_same_rows(spill_every: int) -> None:
    kept, spilled = OpRecorder(), OpRecorder()
    _fill(kept, 123, 0)
    _fill(spilled, 123, spill_every)
    assert len(spilled) == len(kept) == 123
    assert len(spilled.ints) < len(kept.ints)  # rows left memory
    pd.testing.assert_frame_equal(spilled.frame("v"), kept.frame("v"))
    assert spilled.rows == kept.rows
    for name, _ in kept.schema:
        assert np.array_equal(spilled.column(name), kept.column(name))
    assert [list(x) for x in spilled.last_row()] == [list(x) for x in kept.last_row()]


def test_writers_holding_the_buffers_go_on_after_a_spill() -> None:
    """The hot paths keep ``ints.extend`` / ``floats.extend`` bound (``OpRecorder.timed``):
    a spill empties the buffers in place."""
    rec = OpRecorder()
    timed = rec.timed("insert", lambda x: x, lambda: (1, 2, 3), lambda x: x, lambda r, x: r)
    timed(5)
    assert rec.spill() and len(rec.ints) == 0
    timed(6)
    rec.add("evict", 9, 1, 1, 1, 1, 1, 0.5)
    assert rec.rows["key_len"] == [5, 6, 1] and rec.rows["op"] == ["insert", "insert", "evict"]
    assert rec.spill(min_rows=3) is False  # two rows in memory: kept
    assert len(rec) == 3


def test_a_spill_leaves_an_empty_memory_and_keeps_the_last_row() -> None:
    log = StepLog()
    log.append(0.5, "decode", 0.01, 0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    assert log.spill() and not log.ints
    ints, floats = log.last_row()
    assert list(ints) == [log.code("decode"), 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert list(floats) == [0.5, 0.01, 0.0]
    assert log.spill() is False  # nothing in memory
    assert len(log.frame("v")) == 1


def test_columns_select_rows_and_give_codes() -> None:
    log = RecordLog(SCHEMA)
    for i, op in enumerate(["a", "b", "a", "c", "b"]):
        log.append_row((op, i, i / 2, -i))
        if i == 2:
            log.spill()
    got = log.columns(["ns", "op"], where=("op", ("b", "zz")))
    assert got["ns"].tolist() == [1, 4] and list(got["op"]) == ["b", "b"]
    codes = log.columns(["op"], codes=True)["op"]
    assert [log.names[c] for c in codes] == ["a", "b", "a", "c", "b"]
    with pytest.raises(KeyError, match="not a str column"):
        log.columns(where=("ns", (1,)))


def test_a_half_written_row_is_not_spilled() -> None:
    log = RecordLog(SCHEMA)
    log.append_row(("a", 1, 0.5, 1))
    log.ints.extend((log.code("b"), 2, 3))  # no float yet
    with pytest.raises(ValueError, match="log rows disagree"):
        log.spill()
    log.floats.append(1.5)
    assert log.spill() and log.rows["op"] == ["a", "b"]


def test_a_view_holds_the_rows_not_the_writer() -> None:
    """A run's tables keep views: the rows (later ones too), not an OpRecorder's clock (and
    through it the simulation)."""
    rec = OpRecorder(lambda: 1.5)
    view = rec.view()
    rec.add("insert", 5, 1, 1, 1, 1, 1, 0.5)
    rec.spill()
    rec.add("evict", 6, 2, 2, 2, 2, 2, 0.75)
    assert type(view) is RecordLog and not hasattr(view, "clock")
    assert len(view) == 2
    pd.testing.assert_frame_equal(view.frame("v"), rec.frame("v"))


def _fail(env: Any, fn: Any) -> Any:
    yield env.timeout(0)
    fn()


def test_a_failed_step_raises_its_own_error_not_the_spills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``VariantSim.step`` moves logs to disk after a slice, not after a step that raised
    (whose half-written row would turn the error into the spill's ``log rows disagree``)."""
    sc = load_scenario("generated-shared-prefix", {"arrivals.max_requests": 20})
    trace, variant = load_requests(sc, None).requests, Variant("heapify", "galloping", "numpy")
    sim = sim_run.VariantSim(trace, sc.sim, variant, torch.device("cpu"))
    monkeypatch.setattr(sim_run, "SPILL_ROWS", 1)
    rec = sim.servers[0].rec

    def broken() -> None:
        rec.add("insert", 1, 1, 1, 1, 1, 1, 0.0)
        rec.floats.append(1.0)  # half a row, then the failure
        raise RuntimeError("the step's own error")

    sim.env.process(_fail(sim.env, broken))
    with pytest.raises(RuntimeError, match="own error"):
        while sim.step(64):
            pass


def test_a_forked_process_reads_the_rows_beside_this_one() -> None:
    """Chunks are read by position: a forked process (a report's drawing process) reading
    the same open file moves no offset under this one."""
    import os

    log = OpRecorder()
    _fill(log, 2000, 50)
    want = log.frame("v")
    pid = os.fork()
    if pid == 0:  # the child: read over and over, exit 0 only if every read was right
        ok = all(log.frame("v").equals(want) for _ in range(40))
        os._exit(0 if ok else 1)
    mine = all(log.frame("v").equals(want) for _ in range(40))
    _, status = os.waitpid(pid, 0)
    assert mine and os.waitstatus_to_exitcode(status) == 0
