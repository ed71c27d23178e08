"""Fixtures shared by the test packages: the rows of a synthetic eviction study (used by the
study rendering in tests/reports and by the study sections in tests/harness/config); and the
``sglang`` marker: a test marked ``@pytest.mark.sglang`` needs sglang 0.5.23 and is skipped,
with the reason, where it is not installed (``make test`` passes without it; CI installs it)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import torch

from radixbench.reports.study import point_rows

#: pytester: tests/cache/test_volume_checks.py runs pytest sessions of its own.
pytest_plugins = ["pytester"]

# One torch intra-op thread for the whole session, as ``compare`` runs (it sets the same:
# harness/experiments/compare.py). The tests make many tiny tensors (KV slot lists, masks), on
# which thread hand-offs cost more than the work, and much more whenever another process
# competes for the cores: on a busy 2-core machine the cache tests ran several times slower
# with two threads. It also stops the session's thread count depending on which test first
# ran compare in-process.
torch.set_num_threads(1)


#: Why a test marked ``sglang`` is skipped here (None: sglang is installed).
SGLANG_MISSING = (
    None
    if importlib.util.find_spec("sglang") is not None
    else "sglang 0.5.23 is not installed (make install)"
)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``sglang`` where sglang is not installed."""
    if SGLANG_MISSING and item.get_closest_marker("sglang") is not None:
        pytest.skip(SGLANG_MISSING)


def _tables(n: int = 200, speedup: float = 2.0, leaves: int = 500):
    """Two variants; the candidate's TTFT/E2E are ``speedup`` x shorter after t = 10 s; the
    baseline's evict calls see ``leaves`` evictable leaves."""
    rid = np.arange(n)
    arrival = rid * 0.1
    reqs = []
    for v, k in (("base", 1.0), ("cand", speedup)):
        ttft = np.where(arrival >= 10, 0.2 / k, 0.2)
        reqs.append(
            pd.DataFrame(
                {
                    "variant": v,
                    "rid": rid,
                    "arrival_s": arrival,
                    "ttft_s": ttft,
                    "e2e_s": ttft * 3,
                    "first_token_s": arrival + ttft,
                    "finish_s": arrival + ttft * 3,
                    "status": "finished",
                }
            )
        )
    ops = pd.DataFrame(
        {
            "variant": ["base"] * 50 + ["cand"] * 50,
            "op": "evict",
            "ns": [leaves * 1000] * 50 + [1000] * 50,
            "key_len": 0,
            "result": 16,
            "tree_nodes": 2 * leaves,
            "evictable_leaves": leaves,
            "sim_time_s": np.tile(np.linspace(10, 19, 50), 2),
        }
    )
    ts = pd.DataFrame(
        {
            "variant": ["base"] * 20 + ["cand"] * 20,
            "sim_time_s": np.tile(np.arange(20.0), 2),
            "step_s": 0.01,
            "measured_cpu_s": [0.005] * 20 + [0.001] * 20,
        }
    )
    return pd.concat(reqs, ignore_index=True), ops, ts


@pytest.fixture
def study_tables() -> Callable[..., tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]]:
    """``_tables(n=200, speedup=2.0, leaves=500)``: the requests, ops and timeseries tables of
    one synthetic eviction point (variants ``base`` and ``cand``)."""
    return _tables


@pytest.fixture
def study_rows() -> pd.DataFrame:
    """Three points (100, 1,000, 10,000 evictable leaves) of one candidate, ``persistent-heap``
    (speed-ups 1.0, 1.001, 1.5), the largest overloaded under ``heapify``."""
    rows = []
    for i, (leaves, speedup) in enumerate(((100, 1.0), (1000, 1.001), (10000, 1.5))):
        req, ops, ts = _tables(speedup=speedup, leaves=leaves)
        for r in point_rows(req, ops, ts, family="eviction", baseline="base", candidates=["cand"]):
            r.update(point=i, requests=200, kv_capacity_tokens=1000 * leaves, point_wall_s=1.0)
            r["overloaded"] = "heapify" if leaves == 10000 else ""
            r["candidate"] = "persistent-heap"
            rows.append(r)
    return pd.DataFrame(rows)
