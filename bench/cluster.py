"""``radixbench bench cluster``: what a cluster costs the simulator (a benchmark that prints
figures, never a timed test).

The bundled Mooncake conversation trace (all 12,031 requests unless ``--requests``), run as the
``mooncake-cluster`` scenario sets it up (16-token pages, 400k KV tokens and 64 running
requests per server, ``heapify/galloping/numpy``, isolated clock): once on ONE server
(``VariantSim``, no router) and then on N servers behind one router (``ClusterSim``) for each N
of ``--instances``. Each run is a fresh Python process, timed after it has loaded the trace:
CPU s (``time.process_time``), wall s, simulated events, peak resident memory
(``ru_maxrss`` of that process: interpreter, torch, the trace and the run), the router's
decision time (p50 / p99) and, to show the work is the same, the requests served and the
prefix hit rate. The figures: each cluster's CPU relative to the one server's (the cluster does
the same requests, spread over N schedulers, plus routing), and the memory per instance, a
least-squares line ``RSS = a + b x N`` over the cluster runs (``b``: MB per instance).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ClusterBench", "run_cluster_bench", "time_cluster"]

VARIANT = "heapify/galloping/numpy"


def time_cluster(requests: int | None, instances: int, router: str, loader: str) -> dict[str, Any]:
    """One run in this process: ``instances == 0`` is the one server without a router, else
    ``instances`` servers behind ``router``. ``loader``: ``module:function`` giving
    ``(SimConfig, requests)`` of a scenario name and overrides (the harness's
    ``bench_inputs.scenario_requests``). Returns the figures (module docstring)."""
    import importlib
    import resource
    import time

    import torch

    from radixbench.cluster.run import ClusterSim
    from radixbench.cluster.spec import ClusterSpec, router_variants
    from radixbench.sim.config import Variant
    from radixbench.sim.run import VariantSim

    torch.set_num_threads(1)
    overrides: dict[str, Any] = {"cluster.routers": [router]}
    if requests is not None:
        overrides["arrivals.max_requests"] = requests
    module, _, function = loader.partition(":")
    sim_cfg, trace = getattr(importlib.import_module(module), function)(
        "mooncake-cluster", overrides
    )
    evictor, matcher, flatten = VARIANT.split("/")
    base = Variant(evictor, matcher, flatten)
    cpu = torch.device("cpu")
    w0, c0 = time.perf_counter(), time.process_time()
    if instances == 0:
        sim: Any = VariantSim(trace, sim_cfg, base, cpu)
    else:
        spec = ClusterSpec(instances=instances, routers=(router,))
        sim = ClusterSim(trace, sim_cfg, router_variants([base], spec)[0], cpu, spec)
    while sim.step(1 << 30):
        pass
    res = sim.result()
    cpu_s, wall_s = time.process_time() - c0, time.perf_counter() - w0
    m = res.metrics
    return {
        "instances": instances,
        "router": router if instances else "-",
        "requests": len(trace),
        "completed": int(m["completed"]),
        "prefix_hit_rate": float(m["prefix_hit_rate"]),
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "events": int(res.events),
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "route_p50_us": float(m.get("route_p50_us", 0.0)),
        "route_p99_us": float(m.get("route_p99_us", 0.0)),
    }


def _run_child(requests: int | None, instances: int, router: str, loader: str) -> dict[str, Any]:
    code = (
        "import json\n"
        "from radixbench.bench.cluster import time_cluster\n"
        f"print(json.dumps(time_cluster({requests!r}, {instances!r}, {router!r}, {loader!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(
            f"cluster run ({instances} instances) exited {proc.returncode}: {tail[0]}"
        )
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


@dataclass
class ClusterBench:
    """``rows``: the one-server run first, then one per instance count; ``mb_per_instance`` /
    ``mb_fixed``: the memory line's slope and intercept (MB)."""

    rows: list[dict[str, Any]]
    mb_per_instance: float
    mb_fixed: float

    def table(self) -> str:
        one = self.rows[0]["cpu_s"]
        head = (
            f"{'config':>22} {'requests':>8} {'hit rate':>8} {'CPU s':>8} {'x 1 server':>10} "
            f"{'wall s':>8} {'peak RSS MB':>11} {'route p50/p99 us':>17}"
        )
        lines = [head]
        for r in self.rows:
            name = "1 server, no router" if r["instances"] == 0 else (
                f"{r['instances']} x {r['router']}"
            )  # fmt: skip
            lines.append(
                f"{name:>22} {r['completed']:>8,} {r['prefix_hit_rate']:>8.3f} "
                f"{r['cpu_s']:>8.1f} {r['cpu_s'] / one:>10.2f} {r['wall_s']:>8.1f} "
                f"{r['maxrss_mb']:>11,.0f} {r['route_p50_us']:>8.1f}/{r['route_p99_us']:<8.0f}"
            )
        lines.append(
            f"memory: {self.mb_fixed:,.0f} MB + {self.mb_per_instance:,.1f} MB per instance "
            "(least squares over the cluster runs)"
        )
        return "\n".join(lines)


def run_cluster_bench(
    requests: int | None, instances: list[int], router: str, loader: str
) -> ClusterBench:
    """The one-server run, then ``router`` over each count of ``instances`` (fresh processes,
    each loading the scenario with ``loader``, ``module:function``: see :func:`time_cluster`).
    Raises ``RuntimeError`` when a run fails."""
    rows = [_run_child(requests, 0, router, loader)]
    rows += [_run_child(requests, n, router, loader) for n in instances]
    cl = [r for r in rows if r["instances"] > 0]
    if len(cl) >= 2:
        slope, fixed = np.polyfit([r["instances"] for r in cl], [r["maxrss_mb"] for r in cl], 1)
    else:
        slope, fixed = float("nan"), float("nan")
    return ClusterBench(rows, float(slope), float(fixed))
