from __future__ import annotations

import pytest

from radixbench.sim import SimConfig
from radixbench.workloads import load_mooncake


@pytest.fixture(scope="session")
def trace100():
    """First 100 bundled Mooncake requests, arrivals compressed 4x to create KV pressure."""
    import dataclasses

    trace = load_mooncake(max_requests=100)
    return [dataclasses.replace(t, arrival_s=t.arrival_s / 4) for t in trace]


@pytest.fixture
def small_cfg() -> SimConfig:
    """A pool small enough that eviction happens on 100 requests (linear cost model)."""
    from radixbench.sim.cost import LinearCostModel

    return SimConfig(
        kv_capacity_tokens=125_000,
        max_running=16,
        max_prefill_tokens=16_384,
        cost=LinearCostModel(),
    )


def make_trace(n: int, *, input_len: int, output_len: int, gap_s: float, groups: int = 3):
    """``n`` synthetic requests, ``gap_s`` apart; request i shares its first block with every
    request of group ``i % groups`` (hash ids ``(g, 1000 + i, ...)``)."""
    from radixbench.workloads.trace import TraceRequest

    out = []
    blocks = -(-input_len // 512)
    for i in range(n):
        hashes = (i % groups, *range(1000 + 100 * i, 1000 + 100 * i + blocks - 1))
        out.append(TraceRequest(i, i * gap_s, input_len, output_len, hashes))
    return out


@pytest.fixture
def pressure_trace():
    """40 requests of 500 input tokens and 100..1,900 output tokens arriving together: with a
    12,000-token pool, requests admitted on the decayed ``new_token_ratio`` outgrow it."""
    import dataclasses

    base = make_trace(40, input_len=500, output_len=1, gap_s=0.001)
    return [
        dataclasses.replace(t, output_length=100 + (i * 397) % 1800) for i, t in enumerate(base)
    ]
