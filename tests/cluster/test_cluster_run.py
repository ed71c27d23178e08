"""Cluster runs end to end: every request served once, deterministic, the event-fed index equal
to what the instances hold (radixbench's cache and sglang's served cache), lossy and delayed
events, and cache-aware / precise routing beating round-robin on prefix hits."""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

import pandas as pd
import pytest
import torch

from radixbench.cache.kv_events import block_id
from radixbench.cluster.run import ClusterSim
from radixbench.cluster.spec import ClusterSpec, router_variants
from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.experiments.workload import load_requests
from radixbench.sim.config import Variant
from radixbench.sim.run import run_interleaved

CPU = torch.device("cpu")


def _setup(requests: int = 160, page: int = 1) -> tuple[Any, Any]:
    sc = load_scenario(
        "generated-shared-prefix",
        {
            "arrivals.max_requests": requests,
            "arrivals.rate": 40.0,
            "workload.groups": 12,
            "workload.prompts_per_group": 16,
            "workload.system_prompt_tokens": 512,
            "workload.question_tokens": 64,
            "workload.output_tokens": 16,
            "cache.kv_capacity_tokens": 6000,
        },
    )
    sim = sc.sim
    if page != 1:
        sim = dataclasses.replace(sim, page_size=page, chunked_prefill_size=None)
    return load_requests(sc, None).requests, sim


def _run(spec: ClusterSpec, requests: int = 160, page: int = 1, impl: str = "radixbench") -> list:
    trace, sim = _setup(requests, page)
    base = Variant("heapify", "galloping", "numpy", impl=impl)
    sims = [ClusterSim(trace, sim, v, CPU, spec) for v in router_variants([base], spec)]
    return [sims, run_interleaved(sims)]


def test_every_request_served_once_and_deterministic() -> None:
    spec = ClusterSpec(instances=3, routers=("round-robin", "random", "cache-aware"))
    sims, results = _run(spec)
    _, again = _run(spec)
    for sim, r, r2 in zip(sims, results, again):
        reqs = r.requests
        assert len(reqs) == 160 and reqs["rid"].is_unique
        assert (reqs["status"] == "finished").all()
        assert set(reqs["instance"]) <= {0, 1, 2}
        assert [len(i.done) for i in sim.instances] == list(
            reqs["instance"].value_counts(sort=False).sort_index()
        )
        assert r.metrics["instances"] == 3 and r.metrics["route_p50_us"] > 0
        pd.testing.assert_frame_equal(reqs, r2.requests)
        routes = r.ops[r.ops["op"] == "route"]
        assert len(routes) == 160 and (routes["instance"] == -1).all()
        assert (r.timeseries["instance"].isin([0, 1, 2])).all()
        load = sim.load_frame()
        assert len(load) == 160 * 3 and load["outstanding"].min() >= 0
    rr = results[0].requests
    assert list(rr.sort_values("arrival_s")["instance"][:6]) == [0, 1, 2, 0, 1, 2]


def _tree_ids(cache: Any) -> set[int]:
    ids: set[int] = set()
    stack = list(cache.root.children.values())
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        ids.update(block_id(d) for d in node.page_digests)
    return ids


@pytest.mark.parametrize("page", [1, 16])
def test_precise_index_equals_the_instances_trees(page: int) -> None:
    spec = ClusterSpec(instances=3, routers=("precise", "oracle"))
    sims, results = _run(spec, page=page)
    for sim in sims:
        index = sim.router.index
        for inst in sim.instances:
            held = {h for h, m in index.holders.items() if m >> inst.index & 1}
            assert held == _tree_ids(inst.cache)
        assert sim.bus.published > 0 and sim.bus.lost == 0
    for r in results:
        assert r.metrics["events_published"] > 0


@pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="sglang not installed")
def test_precise_runs_on_sglang_s_own_events() -> None:
    """Instances running sglang 0.5.23's served cache (Rust core): the router's index is fed by
    the real recorder and equals what radixbench's caches publish for the same schedule."""
    spec = ClusterSpec(instances=2, routers=("precise",))
    sims_rb, res_rb = _run(spec, requests=80)
    sims_sg, res_sg = _run(spec, requests=80, impl="sglang")
    assert sims_sg[0].router.index.holders == sims_rb[0].router.index.holders
    cols = ["rid", "instance", "prefix_hit_tokens", "ttft_s"]
    pd.testing.assert_frame_equal(res_rb[0].requests[cols], res_sg[0].requests[cols])


def test_lossy_delayed_events() -> None:
    spec = ClusterSpec(instances=3, routers=("precise",), event_delay_s=0.05, event_loss=0.3)
    sims, results = _run(spec)
    bus = sims[0].bus
    assert bus.lost > 0 and bus.delivered + bus.lost == bus.published
    assert results[0].metrics["events_lost"] == bus.lost
    assert (results[0].requests["status"] == "finished").all()


def test_cache_aware_and_precise_beat_round_robin_on_prefix_hits() -> None:
    spec = ClusterSpec(instances=4, routers=("round-robin", "cache-aware", "precise"))
    _, results = _run(spec, requests=240)
    hit = {r.metrics["router"]: r.metrics["prefix_hit_rate"] for r in results}
    assert hit["cache-aware"] > hit["round-robin"] + 0.05
    assert hit["precise"] > hit["round-robin"] + 0.05


def test_coupled_router_time_delays_requests() -> None:
    spec = ClusterSpec(instances=2, routers=("cache-aware",), couple_router_time=True)
    _, results = _run(spec, requests=40)
    r = results[0]
    assert (r.requests["status"] == "finished").all()
    assert r.metrics["route_p50_us"] > 0


def test_event_log_names_sessions_and_keeps_the_lora_tables(tmp_path: Any) -> None:
    """Multi-turn turns routed over 2 instances, events logged in the Dynamo format: every
    store names its turn's session, and the log's adapter table reaches the caches."""
    import json

    from radixbench.cache.kv_events import KVEventConfig
    from radixbench.sim.kv_event_log import KVEventLog

    sc = load_scenario("multi-turn", {"arrivals.max_requests": 40})
    adapters = (("0" * 32, "adapter-z"),)
    log = KVEventLog(tmp_path / "ev.jsonl", KVEventConfig(lora_adapters=adapters))
    spec = ClusterSpec(instances=2, routers=("precise",), dynamo_format=True)
    (v,) = router_variants([Variant("heapify", "galloping", "numpy")], spec)
    sim = ClusterSim(load_requests(sc, None).requests, sc.sim, v, CPU, spec, kv_event_log=log)
    run_interleaved([sim])
    config = sim.instances[0].cache.kv_events.config
    assert config.dynamo_format and config.lora_adapters == adapters
    log.close()
    stores = [
        e
        for line in (tmp_path / "ev.jsonl").read_text().splitlines()
        for e in json.loads(line)["batch"][1]
        if e["type"] == "BlockStored"
    ]
    sessions = {e.get("session_id") for e in stores}
    assert len(sessions) >= 4 and all(str(s).startswith("session-") for s in sessions)
