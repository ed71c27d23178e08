"""The scenario label a run records (its reports' "scenario" line) states what ran: the request
count and the KV pool after ``--requests`` / ``--kv-capacity`` (issue 31 item 11)."""

from __future__ import annotations

from radixbench.harness.config.scenario import load_scenario
from radixbench.harness.experiments.workload import describe_selection


def test_the_kv_pool_in_the_description_follows_the_override() -> None:
    bundled = load_scenario("shared-prefix-serving")
    assert "96k-token KV pool" in describe_selection(bundled, 3000)  # as stated: kept
    sc = load_scenario(
        "shared-prefix-serving",
        {"sim.kv_capacity_tokens": 50_000, "arrivals.max_requests": 200},
    )
    label = describe_selection(sc, 200)
    assert "50,000-token KV pool" in label and "96k" not in label
    assert "200 requests" in label and "3,000" not in label
