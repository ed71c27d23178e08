from __future__ import annotations

import math
from array import array
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from radixbench.sim.metrics import max_gaps, serving_metrics, token_gaps
from radixbench.sim.parted import PartedTable
from radixbench.sim.request import Req
from radixbench.sim.timeseries import StepLog


def _req(rid: int, arrival: float, tokens: list[float], hit: int = 0) -> Req:
    r = Req(rid, arrival, array("q", range(10)), len(tokens))
    r.token_s = array("d", tokens)
    r.first_token_s, r.finish_s = tokens[0], tokens[-1]
    r.prefix_hit_tokens = hit
    r.status = "finished"
    return r


def test_metrics_follow_vllm_definitions() -> None:
    reqs = [_req(0, 0.0, [1.0, 1.5, 2.5], hit=0), _req(1, 1.0, [2.0, 3.0], hit=5)]
    steps = pd.DataFrame(
        {
            "step_s": [1.0, 3.0],
            "kv_used_tokens": [10, 30],
            "kv_capacity_tokens": [100, 100],
            "queue_len": [4, 0],
            "measured_cpu_s": [0.1, 0.2],
        }
    )
    m = serving_metrics(reqs, steps, "isolated")
    assert m["duration_s"] == 3.0  # last finish 3.0 - first arrival 0.0
    assert m["request_throughput"] == pytest.approx(2 / 3)
    assert m["output_throughput"] == pytest.approx(5 / 3)
    assert m["mean_ttft_ms"] == pytest.approx(1000.0)  # both 1 s
    # TPOT: (2.5-1)/2 = 0.75, (3-2)/1 = 1.0
    assert m["mean_tpot_ms"] == pytest.approx(875.0)
    # ITL pooled: 0.5, 1.0, 1.0
    assert m["median_itl_ms"] == pytest.approx(1000.0)
    assert m["mean_itl_ms"] == pytest.approx(2500 / 3)
    assert m["mean_e2el_ms"] == pytest.approx(2250.0)
    assert m["prefix_hit_rate"] == pytest.approx(5 / 20)
    assert m["prefix_hit_rate_last50"] == pytest.approx(5 / 10)
    assert m["mean_kv_util"] == pytest.approx((0.1 * 1 + 0.3 * 3) / 4)
    assert m["max_queue_len"] == 4
    assert m["clock"] == "isolated"


def test_rejected_requests_only_count_as_failed() -> None:
    ok = _req(0, 0.0, [1.0, 2.0])
    bad = Req(1, 0.5, array("q", range(10)), 5)
    bad.status = "rejected"
    m = serving_metrics([ok, bad], pd.DataFrame(), "coupled")
    assert (m["completed"], m["failed"]) == (1, 1)
    assert m["total_output_tokens"] == 2


def test_token_gaps_and_max_gaps_per_request() -> None:
    """Gaps are those of a per-request np.diff, never across requests, for array('d') and
    list times, with requests of 0 and 1 tokens in between."""
    times = [[], array("d", [1.0, 3.0, 3.5]), [7.0], [0.0, 0.25], array("d"), [9.0, 9.5, 11.0]]
    reqs = [SimpleNamespace(token_s=t) for t in times]
    gaps, counts = token_gaps(reqs)  # type: ignore[arg-type]
    want = [np.diff(np.asarray(t, dtype=np.float64)) for t in times]
    assert gaps.tolist() == np.concatenate(want).tolist() == [2.0, 0.5, 0.25, 0.5, 1.5]
    assert counts.tolist() == [0, 2, 0, 1, 0, 2]
    m = max_gaps(gaps, counts)
    assert [None if math.isnan(x) else x for x in m.tolist()] == [None, 2.0, None, 0.25, None, 1.5]
    g, c = token_gaps([])
    assert g.size == 0 and c.size == 0 and max_gaps(g, c).size == 0


def test_metrics_from_steps_in_parts_are_those_of_the_frame() -> None:
    """A cluster's step table in parts (read a column at a time) gives the frame's metrics."""
    logs = [StepLog(), StepLog()]
    rng = np.random.default_rng(1)
    for k, log in enumerate(logs):
        for i in range(40):
            log.append(
                i * 0.1,
                "decode",
                float(rng.random()),
                float(rng.random()) / 7,
                3,
                3,
                int(rng.integers(9)),
                3,
                int(rng.integers(1, 900)),
                1000 + k,
                0,
                0,
                0,
            )
            if i % 9 == 8:
                log.spill()
    table = PartedTable.of(logs, "v", {"impl": "radixbench"}, "instance", [0, 1])
    ok = Req(0, 0.0, array("q", range(10)), 3)
    ok.status, ok.first_token_s, ok.finish_s, ok.token_s = "finished", 0.5, 1.5, [0.5, 1.0, 1.5]
    assert serving_metrics([ok], table, "isolated") == serving_metrics(
        [ok], table.frame(), "isolated"
    )
