"""``compare`` writes a cluster's report without the runs' state (issue 28 item 3): the routers,
servers and trees are let go once the results are taken, and the report reads the per-op and
per-step tables in parts."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

import radixbench.harness.experiments.compare as compare
from radixbench.cluster.run import ClusterSim
from radixbench.harness.cli import main
from radixbench.sim.parted import PartedTable


def test_the_report_runs_after_the_runs_are_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    alive: list[weakref.ref[ClusterSim]] = []
    real_init, real_report = ClusterSim.__init__, compare.write_routing_report
    seen: dict[str, Any] = {}

    def init(self: ClusterSim, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        alive.append(weakref.ref(self))

    def report(run_dir: Path, requests: Any, ops: Any, timeseries: Any, *a: Any, **k: Any) -> Any:
        gc.collect()
        seen["alive"] = [r for r in alive if r() is not None]
        seen["tables"] = (type(ops), type(timeseries))
        return real_report(run_dir, requests, ops, timeseries, *a, **k)

    monkeypatch.setattr(ClusterSim, "__init__", init)
    monkeypatch.setattr(compare, "write_routing_report", report)
    argv = ["compare", "mooncake-cluster", "--requests", "40", "--instances", "2",
            "--routers", "cache-aware,round-robin", "--reference", "none", "--no-aa",
            "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    assert len(alive) == 2 and seen["alive"] == []
    assert seen["tables"] == (PartedTable, PartedTable)
