"""``bench peers``' cluster overhead (case l): the one instance gets what round-robin hands
instance 0, the runs are the commands named, and the ratio and target status are stated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import radixbench.bench.peers_cluster as pc
from radixbench.bench.peers import TRACE


def test_the_one_instance_gets_every_8th_request_of_the_slice(tmp_path: Path) -> None:
    all_, every = pc._slices(tmp_path, 40)
    lines = all_.read_text().splitlines()
    assert lines == TRACE.read_text().splitlines()[:40]
    assert every.read_text().splitlines() == [lines[i] for i in range(0, 40, 8)]
    assert (
        json.loads(lines[8])["timestamp"]
        == json.loads(every.read_text().splitlines()[1])["timestamp"]
    )  # at its own timestamp


def test_run_overhead_runs_the_cluster_and_the_one_instance_per_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def fake(words: list[str], work: Path) -> float:
        seen.append(words)
        return 4.0 if "--instances" in words else 1.0

    monkeypatch.setattr(pc, "_sim_cpu", fake)
    o = pc.run_overhead(tmp_path, reps=1, requests=80)
    cluster, single = seen
    assert cluster[1] == "mooncake-cluster" and "round-robin" in cluster
    assert single[1] == "mooncake-conversation" and "--instances" not in single
    assert cluster[cluster.index("--trace") + 1].endswith("cluster_all.jsonl")
    assert single[single.index("--trace") + 1].endswith("cluster_every8.jsonl")
    assert (o.cluster, o.single, o.single_requests) == (4.0 / 80, 1.0 / 10, 10)
    assert o.ratio == pytest.approx(0.5)


def test_text_states_the_ratio_against_the_target() -> None:
    met = pc.overhead_text(pc.ClusterOverhead(0.012, 0.010, 1000, 125))
    assert "1.20x, met" in met and "every 8th request (125)" in met
    assert "1.60x, NOT met" in pc.overhead_text(pc.ClusterOverhead(0.016, 0.010, 1000, 125))
