from __future__ import annotations

import pytest
import torch

from radixbench.sim import SimConfig, Variant, run_variant
from radixbench.workloads import load_mooncake


@pytest.mark.slow
def test_whole_mooncake_trace_runs_in_isolated_mode() -> None:
    """The whole bundled conversation trace (12,031 requests, one hour), every cache operation
    real. Speed is reported by scripts/bench_full_trace.py, not asserted here."""
    torch.set_num_threads(1)
    trace = load_mooncake()
    assert len(trace) == 12_031
    res = run_variant(
        trace, SimConfig(), Variant("persistent-heap", "galloping", "numpy"), torch.device("cpu")
    )
    df = res.requests
    assert len(df) == len(trace)
    assert set(df["status"]) <= {"finished", "rejected"}
    assert (df["status"] == "finished").mean() > 0.99
    assert res.metrics["completed"] == (df["status"] == "finished").sum()
    assert res.events > len(trace) and res.metrics["events_per_s"] > 0
    ts = res.timeseries
    assert (ts["kv_used_tokens"] <= ts["kv_capacity_tokens"]).all()
