"""A cluster's report read from its tables in parts (the servers' logs, spilled to disk) writes
what it wrote from the whole frames (issue 28 item 3: the whole trace behind 8 instances in
1 GB), and never builds the whole per-op or per-step frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

import radixbench.sim.run as sim_run
from radixbench.cluster.run import ClusterSim, _same
from radixbench.cluster.spec import ClusterSpec, router_variants
from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.experiments.workload import load_requests
from radixbench.reports.record import RunMeta
from radixbench.reports.routing_report import write_routing_report
from radixbench.sim.config import Variant
from radixbench.sim.parted import PartedTable
from radixbench.sim.run import run_interleaved


def _scenario(requests: int, rate: float, groups: int, output_tokens: int) -> Any:
    """generated-shared-prefix, ``requests`` at ``rate`` req/s in ``groups`` groups, 512-token
    system prompts, 64-token questions, a 6,000-token KV pool per instance."""
    return load_scenario("generated-shared-prefix", {
        "arrivals.max_requests": requests, "arrivals.rate": rate, "workload.groups": groups,
        "workload.prompts_per_group": requests // groups, "workload.system_prompt_tokens": 512,
        "workload.question_tokens": 64, "workload.output_tokens": output_tokens,
        "cache.kv_capacity_tokens": 6000,
    })  # fmt: skip


def _results(monkeypatch: pytest.MonkeyPatch) -> tuple[list[ClusterSim], list[Any], Any]:
    """Two routers x two flatten variants (flatten pairs: the verdicts read build_decode rows)
    on 3 instances, the logs spilled every 50 rows."""
    monkeypatch.setattr(sim_run, "SPILL_ROWS", 50)
    sc = _scenario(requests=120, rate=40.0, groups=6, output_tokens=16)
    trace, cfg = load_requests(sc, None).requests, sc.sim
    spec = ClusterSpec(instances=3, routers=("cache-aware", "round-robin"))
    bases = [Variant("heapify", "galloping", f) for f in ("numpy", "chain")]
    cpu = torch.device("cpu")
    sims = [ClusterSim(trace, cfg, v, cpu, spec) for v in router_variants(bases, spec)]
    results = run_interleaved(sims)
    assert any(s.instances[0].rec._disk.rows for s in sims)  # the logs did leave memory
    return sims, results, cfg


def _write(out: Path, sims: list[ClusterSim], results: list[Any], cfg: Any, parts: bool) -> Any:
    requests = pd.concat([r.requests for r in results], ignore_index=True)
    ops: Any = PartedTable.concat([r.op_table for r in results])
    steps: Any = PartedTable.concat([r.step_table for r in results])
    if not parts:
        ops, steps = ops.frame(), steps.frame()
    meta = RunMeta(seed=0, max_running=cfg.max_running, max_prefill_tokens=cfg.max_prefill_tokens,
                   chunked_prefill_size=cfg.chunked_prefill_size)  # fmt: skip
    metrics = pd.DataFrame([r.metrics for r in results])
    load = pd.concat([s.load_frame() for s in sims], ignore_index=True)
    return write_routing_report(out, requests, ops, steps, metrics, load, meta, {"ok": True},
                                render=False, n_resamples=50)  # fmt: skip


def test_the_report_from_parts_writes_the_report_from_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sims, results, cfg = _results(monkeypatch)
    whole = _write(tmp_path / "frames", sims, results, cfg, parts=False)
    calls: list[Any] = []
    real = PartedTable.frame

    def frame(self: PartedTable, columns: Any = None, where: Any = None) -> pd.DataFrame:
        calls.append((columns, where))
        return real(self, columns, where)

    monkeypatch.setattr(PartedTable, "frame", frame)
    got = _write(tmp_path / "parts", sims, results, cfg, parts=True)
    assert calls and all(c is not None or w is not None for c, w in calls)  # never all of it
    files = sorted(p.name for p in (tmp_path / "frames").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "parts").iterdir())
    assert {"ops.parquet", "timeseries.csv", "verdicts.parquet", "instances.parquet"} <= set(files)
    for name in files:
        a, b = tmp_path / "frames" / name, tmp_path / "parts" / name
        if name.endswith(".csv"):
            assert a.read_bytes() == b.read_bytes(), name
        else:
            pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))
    verdicts = pd.read_parquet(tmp_path / "parts" / "verdicts.parquet")
    assert "build_decode ns" in set(verdicts["metric"])  # the flatten pairs read those rows
    a, b = got["answer"], whole["answer"]
    assert (a.load, a.headline, a.serving) == (b.load, b.headline, b.serving)
    for key in ("op_summary", "speedups", "verdicts"):
        pd.testing.assert_frame_equal(got[key], whole[key])


def test_a_queued_request_does_not_hold_the_routers_prompt_tokens() -> None:
    """cache-aware makes each prompt's tokens to route it; a request that joins a queue makes
    them again at admission (a whole trace on 2 instances queues thousands: ~300 MB of ids)."""
    sc = _scenario(requests=200, rate=400.0, groups=4, output_tokens=64)
    trace, cfg = load_requests(sc, None).requests, sc.sim
    spec = ClusterSpec(instances=2, routers=("cache-aware",))
    (v,) = router_variants([Variant("heapify", "galloping", "numpy")], spec)
    sim = ClusterSim(trace, cfg, v, torch.device("cpu"), spec)
    most = 0
    while sim.step(16):
        queued = [r for inst in sim.instances for r in list(inst.sched.waiting)[1:]]
        most = max(most, len(queued))
        assert all(r.expand is None or r.expand.func is not _same for r in queued)
    assert most > 20  # the queues did form
    same = run_interleaved([ClusterSim(trace, cfg, v, torch.device("cpu"), spec)])[0]
    pd.testing.assert_frame_equal(sim.result().requests, same.requests)
