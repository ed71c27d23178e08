"""``--kv-events FILE``: the file round-trips through sglang 0.5.23's own msgspec classes, holds
exactly what the caches emitted, and is written atomically (no file on failure or without
events)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import msgspec
import pytest
import torch

from radixbench.cache.kv_events import event_to_wire
from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.experiments.workload import load_requests
from radixbench.sim.config import Variant
from radixbench.sim.kv_event_log import KVEventLog
from radixbench.sim.run import VariantSim

needs_sglang = pytest.mark.skipif(
    importlib.util.find_spec("sglang") is None, reason="sglang is not installed (make install)"
)


def _run(path: Path, page: int = 1) -> tuple[VariantSim, KVEventLog, list]:
    scenario = load_scenario(
        "multi-turn", {"arrivals.max_requests": 40, "cache.kv_capacity_tokens": 6000 * page}
    )
    sim_cfg = scenario.sim
    if page != 1:
        import dataclasses

        sim_cfg = dataclasses.replace(sim_cfg, page_size=page, chunked_prefill_size=None)
    log = KVEventLog(path)
    seen: list = []
    sim = VariantSim(
        load_requests(scenario, None).requests, sim_cfg, Variant(), torch.device("cpu"),
        kv_event_log=log,
    )  # fmt: skip
    drain = sim.sched.after_step
    assert drain is not None

    def spy() -> None:  # the same drain, recording what the cache gave
        events = sim.cache.take_actions()
        seen.append(events)
        if events:
            log.write(sim.variant.name, 0, float(sim.env.now), events)

    sim.sched.after_step = spy
    while sim.step(1 << 20):
        pass
    sim.result()
    return sim, log, seen


def test_log_holds_every_event_in_order(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sim, log, seen = _run(path)
    assert not path.exists()  # written to FILE.tmp until closed
    assert log.close() == path
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == sum(1 for e in seen if e) == log.batches
    assert all(r["variant"] == sim.variant.name and r["instance"] == 0 for r in records)
    flat = [event_to_wire(e) for batch in seen for e in batch]
    assert [e for r in records for e in r["batch"][1]] == flat
    kinds = {e["type"] for e in flat}
    assert kinds == {"AllBlocksCleared", "BlockStored", "BlockRemoved"}  # the pool evicts
    times = [r["sim_time_s"] for r in records]
    assert times == sorted(times) and all(r["batch"][0] == r["sim_time_s"] for r in records)


def test_stores_name_the_session_of_the_turn(tmp_path: Path) -> None:
    """A multi-turn run: the requests carry their conversation's ``session_id`` from the
    workload and every ``BlockStored`` their checkpoints publish names it (sglang 0.5.23:
    ``InsertParams.session_id = req.session_id``)."""
    _, log, seen = _run(tmp_path / "events.jsonl")
    log.abort()
    stores = [e for batch in seen for e in batch if type(e).__name__ == "BlockStored"]
    sessions = {e.session_id for e in stores}
    assert len(sessions) >= 4 and all(re.fullmatch(r"session-\d+", str(s)) for s in sessions)


def test_abort_and_empty_leave_no_file(tmp_path: Path) -> None:
    log = KVEventLog(tmp_path / "a.jsonl")
    assert log.close() is None and not (tmp_path / "a.jsonl").exists()
    other = tmp_path / "other"
    _, first, seen = _run(other / "c.jsonl")
    first.abort()
    log = KVEventLog(tmp_path / "b.jsonl")
    log.write("v", 0, 0.0, [])
    log.write("v", 0, 0.0, seen[0])
    assert (tmp_path / "b.jsonl.tmp").exists()
    log.abort()
    assert list(tmp_path.iterdir()) == [other] and list(other.iterdir()) == []


@needs_sglang
@pytest.mark.parametrize("page", [1, 16])
def test_round_trip_through_sglang_classes(tmp_path: Path, page: int) -> None:
    """Every batch decodes as sglang 0.5.23's ``KVEventBatch`` (msgspec, typed: tagged events,
    array-like batch) and re-encodes to the same bytes."""
    from radixbench.cache.sglang import loaded_modules

    try:
        kv = loaded_modules("sglang")["sglang.srt.disaggregation.kv_events"]
    except ValueError as e:  # registry.ImplError: sglang cannot be loaded
        pytest.skip(str(e))
    path = tmp_path / "events.jsonl"
    _, log, _ = _run(path, page)
    log.close()
    decoder = msgspec.json.Decoder(kv.KVEventBatch)
    n = 0
    for line in path.read_bytes().splitlines():
        raw = msgspec.json.encode(msgspec.json.decode(line)["batch"])
        batch = decoder.decode(raw)
        assert isinstance(batch, kv.KVEventBatch)
        assert all(isinstance(e, kv.BlockStored | kv.BlockRemoved | kv.AllBlocksCleared)
                   for e in batch.events)  # fmt: skip
        assert msgspec.json.encode(batch) == raw
        n += len(batch.events)
    assert n > 50
