"""Benchmark: the whole bundled Mooncake conversation trace, one variant, isolated clock.

Prints wall time, simulated events, events/s and the serving metrics. Every cache operation is
real. Usage: python scripts/bench_full_trace.py [--requests N] [--variant E/M/F]
[--cost-model NAME] [--clock isolated|coupled] [--profile OUT.pstats]
"""

from __future__ import annotations

import argparse
import cProfile
import time

import torch

from radixbench.sim import SimConfig, Variant, run_variant
from radixbench.sim.cost import load_cost_model
from radixbench.workloads import load_mooncake


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--requests", type=int, default=None, help="first N (default: all)")
    p.add_argument("--variant", default="persistent-heap/galloping/numpy")
    p.add_argument("--cost-model", default="llama-3.1-8b-h100")
    p.add_argument("--clock", default="isolated", choices=["isolated", "coupled"])
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--profile", default=None, help="write cProfile stats here")
    a = p.parse_args()
    torch.set_num_threads(1)
    trace = load_mooncake(max_requests=a.requests)
    if a.time_scale != 1.0:
        import dataclasses

        trace = [dataclasses.replace(t, arrival_s=t.arrival_s * a.time_scale) for t in trace]
    cfg = SimConfig(cost=load_cost_model(a.cost_model), clock=a.clock)
    v = Variant(*a.variant.split("/"))
    prof = cProfile.Profile() if a.profile else None
    t0 = time.perf_counter()
    c0 = time.process_time()
    if prof:
        prof.enable()
    res = run_variant(trace, cfg, v, torch.device("cpu"))
    if prof:
        prof.disable()
        prof.dump_stats(a.profile)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    m = res.metrics
    print(f"requests {len(trace)}  variant {v.name}  clock {a.clock}  cost {a.cost_model}")
    print(
        f"wall {wall:.1f} s  cpu {cpu:.1f} s  events {res.events}  events/s "
        f"{res.events / wall:,.0f} (per cpu s {res.events / cpu:,.0f})  "
        f"sim end {res.sim_end_s:.0f} s"
    )
    print(
        f"  timed cache operations and batch builds (perf_counter_ns, top-level): "
        f"{m['measured_cpu_s']:.1f} s"
    )
    for k in (
        "request_throughput",
        "output_throughput",
        "median_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
        "prefix_hit_rate",
        "prefix_hit_rate_last50",
        "retractions",
        "mean_kv_util",
        "max_queue_len",
    ):
        print(f"  {k:24s} {m[k]:.4g}")


if __name__ == "__main__":
    main()
