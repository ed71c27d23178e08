"""SimConfig declares what a run record keeps of it (field metadata ``record``, issue 32 item 3):
``run_record`` gives those fields under their ``RunMeta`` names, and every name is a field of
the run record."""

from __future__ import annotations

import dataclasses

from radixbench.reports.record import RunMeta
from radixbench.sim.config import SimConfig
from radixbench.sim.cost import cost_info


def test_recorded_fields_are_run_record_fields() -> None:
    sim = SimConfig(max_running=7, page_size=4, chunked_prefill_size=None, seed=3)
    record = sim.run_record()
    assert set(record) <= {f.name for f in dataclasses.fields(RunMeta)}
    assert record["max_running"] == 7 and record["page_size"] == 4 and record["seed"] == 3
    assert record["chunked_prefill_size"] is None
    assert record["cost_model"] == sim.cost.name  # recorded by name, not as the object
    assert record["cost_source"] == cost_info(sim.cost)  # and its source, from the same field
    assert RunMeta(**record).max_running == 7


def test_run_record_of_some_names() -> None:
    assert SimConfig(seed=5).run_record("seed", "page_size") == {"page_size": 1, "seed": 5}
