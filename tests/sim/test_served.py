"""End to end through the simulator: radixbench's cache, sglang 0.5.23's served
``UnifiedRadixCache`` with the Rust core (``sglang``) and with the Python core
(``sglang-python``), and its classic ``RadixCache`` (``sglang-legacy``), run interleaved
(``sim.run.run_interleaved``) on the same requests of every bundled scenario, must give every
request the same prefix hits (``harness.equivalence.check_equivalence`` on the concatenated
request tables), and each run's KV pool must add up (``VariantSim.result`` runs
``sim.accounting.kv_account``). A few dozen requests per scenario in the default suite; 1,000
Mooncake requests under ``-m slow``. Skipped, with the reason, where sglang is not installed.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest
import torch

from radixbench.cache.registry import ImplError, check_policy, resolve
from radixbench.harness.config.scenario import bundled_scenarios, load_scenario
from radixbench.harness.experiments.equivalence import check_equivalence
from radixbench.sim import VariantSim, run_interleaved
from radixbench.sim.config import Variant
from radixbench.workloads.sources import load_workload

if importlib.util.find_spec("sglang") is None:
    pytest.skip(
        "sglang is not installed (make install): served-cache runs skipped", allow_module_level=True
    )

SPECS = ("radixbench", "sglang", "sglang-python", "sglang-legacy")
CPU = torch.device("cpu")


def _specs(policy: str) -> list[str]:
    out = []
    for spec in SPECS:
        try:
            check_policy(spec, policy)
        except ImplError:  # tlru: not on the legacy class (the server refuses it there too)
            continue
        out.append(spec)
    return out


def run_all(scenario: str, overrides: dict[str, object]) -> tuple[dict, list]:
    sc = load_scenario(scenario, overrides)
    trace = load_workload(
        sc.kind, sc.workload, sc.arrivals, np.random.default_rng(sc.seed), base_dir=sc.base_dir
    )
    specs = _specs(sc.sim.policy)
    sims = [VariantSim(trace, sc.sim, Variant(impl=spec), CPU) for spec in specs]
    results = run_interleaved(sims, slice_events=17)
    return check_equivalence(pd.concat([r.requests for r in results])), results


def test_sglang_is_the_served_cache() -> None:
    info = resolve("sglang").info
    assert info.cls.endswith("UnifiedRadixCache") and info.tree_core in ("rust", "python")
    assert info.tree_core_reason
    assert any(path.endswith(".so") for path in info.files) or info.tree_core == "python"
    assert resolve("sglang-python").info.tree_core == "python"
    assert resolve("sglang-legacy").info.cls.endswith(".RadixCache")


#: Scenario overrides that keep the default suite quick (the shape stays, documents shrink).
QUICK = {
    "long-context": {"workload.min_document_tokens": 20_000, "workload.max_document_tokens": 40_000}
}


@pytest.mark.parametrize("scenario", sorted(bundled_scenarios()))
def test_every_bundled_scenario_gives_identical_hits(scenario: str) -> None:
    eq, results = run_all(scenario, {"arrivals.max_requests": 40, **QUICK.get(scenario, {})})
    assert eq["ok"], eq["first_diff"]
    assert eq["n_requests"] == len(results[0].requests) > 0 and len(eq["variants"]) >= 3
    served = [r for r in results if r.variant.startswith("sglang/")]
    assert served and (served[0].ops["op"] == "checkpoint").any()


def test_pressure_evicts_alike() -> None:
    """A pool small enough that all four evict, retract and re-prefill."""
    eq, results = run_all(
        "eviction-pressure", {"arrivals.max_requests": 300, "sim.kv_capacity_tokens": 6_000}
    )
    assert eq["ok"], eq["first_diff"]
    evicts = [int((r.ops["op"] == "evict").sum()) for r in results]
    assert min(evicts) > 0 and len(set(evicts)) == 1, evicts


@pytest.mark.slow
def test_mooncake_1000_requests() -> None:
    eq, results = run_all("mooncake-conversation", {"arrivals.max_requests": 1000})
    assert eq["ok"], eq["first_diff"]
    assert eq["n_requests"] == 1000 and len(results) == 4
