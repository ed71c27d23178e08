from __future__ import annotations

import pytest

from radixbench.sim import SimConfig
from radixbench.workloads import load_mooncake


@pytest.fixture(scope="session")
def trace200():
    """First 200 bundled Mooncake requests, arrivals compressed 4x to create KV pressure."""
    import dataclasses

    trace = load_mooncake(max_requests=200)
    return [dataclasses.replace(t, arrival_s=t.arrival_s / 4) for t in trace]


@pytest.fixture
def small_cfg() -> SimConfig:
    """A pool small enough that eviction happens on 200 requests."""
    return SimConfig(kv_capacity_tokens=150_000, max_running=16, max_prefill_tokens=16_384)
