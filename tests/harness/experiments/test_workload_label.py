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


def test_the_instance_count_in_the_description_follows_the_override() -> None:
    bundled = load_scenario("mooncake-cluster")
    assert "on 8 simulated H100s behind a router" in describe_selection(bundled, 12_031)
    four = load_scenario("mooncake-cluster", {"cluster.instances": 4})
    assert "on 4 simulated H100s behind a router" in describe_selection(four, 12_031)
    one = load_scenario("mooncake-cluster", {"cluster.instances": 1})
    label = describe_selection(one, 12_031)
    assert "on 1 simulated H100 behind a router" in label and "8 simulated" not in label
    # one server's description ("overloads one simulated H100; ...") is left as written
    server = load_scenario("mooncake-conversation")
    assert describe_selection(server, 1000) == server.description
