"""What the benchmarks take from the harness: a scenario's requests, a demo run to report.

The benchmarks (:mod:`radixbench.bench`) sit below the harness and import nothing of it: the
command line (``radixbench bench``) hands them these functions, the cluster benchmark by their
import path (its runs are fresh processes, which import the loader they are given).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from radixbench.harness.config.scenario import DEFAULT_SCENARIO, load_scenario
from radixbench.harness.experiments.workload import load_requests
from radixbench.sim.config import SimConfig
from radixbench.workloads.trace import TraceRequest

__all__ = ["SCENARIO_REQUESTS", "demo_run", "scenario_requests"]

#: :func:`scenario_requests` as ``module:function``, for a benchmark's child processes.
SCENARIO_REQUESTS = f"{__name__}:scenario_requests"


def scenario_requests(name: str, overrides: dict[str, Any]) -> tuple[SimConfig, list[TraceRequest]]:
    """The simulator settings and the requests of the scenario ``name`` (bundled or a TOML
    file) with ``overrides`` (``"section.key"`` -> value, as ``--set``). Raises
    ``ScenarioError`` / ``TraceError`` for bad input."""
    sc = load_scenario(name, overrides)
    return sc.sim, list(load_requests(sc, None).requests)


def demo_run(out: Path, requests: int | None) -> Path:
    """Simulate the default scenario (its first ``requests`` when given) with ``compare``,
    tables only, into a run folder under ``out``; returns the run folder."""
    from radixbench.harness.experiments.compare import CompareSpec, run_compare

    over = {} if requests is None else {"arrivals.max_requests": requests}
    spec = CompareSpec(load_scenario(DEFAULT_SCENARIO, over), device="cpu", out=out)
    return run_compare(spec, progress=False, full_report=False).run_dir
