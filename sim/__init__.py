"""radixbench.sim — a simpy discrete-event simulation of one serving engine.

An arrival process feeds trace requests to a continuous-batching scheduler that drives a real
``RadixCache`` and builds real ``ScheduleBatch`` tensors on the device; GPU step time comes from
a cost model. Every cache operation and batch build is timed with ``perf_counter_ns``.
"""

from radixbench.sim.batch import FLATTENERS, BatchBuilder, ScheduleBatch
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.cost import LinearCostModel, RooflineCostModel, load_cost_model, preset_names
from radixbench.sim.instrument import OpRecorder, instrument
from radixbench.sim.metrics import serving_metrics
from radixbench.sim.request import Req
from radixbench.sim.run import (
    VariantResult,
    VariantSim,
    resolve_device,
    run_interleaved,
    run_variant,
)
from radixbench.sim.sched_policy import SCHED_POLICIES, SchedPolicy
from radixbench.sim.scheduler import Scheduler

__all__ = [
    "FLATTENERS",
    "SCHED_POLICIES",
    "BatchBuilder",
    "LinearCostModel",
    "OpRecorder",
    "Req",
    "RooflineCostModel",
    "SchedPolicy",
    "ScheduleBatch",
    "Scheduler",
    "SimConfig",
    "Variant",
    "VariantResult",
    "VariantSim",
    "instrument",
    "load_cost_model",
    "preset_names",
    "resolve_device",
    "run_interleaved",
    "run_variant",
    "serving_metrics",
]
