"""radixbench.sim — a simpy discrete-event simulation of one serving engine.

An arrival process feeds trace requests to a continuous-batching scheduler that drives a real
``RadixCache`` and builds real ``ScheduleBatch`` tensors on the device; GPU step time comes from
a cost model. Every cache operation and batch build is timed with ``perf_counter_ns``.
"""

from radixbench.sim.batch import FLATTENERS, BatchBuilder, ScheduleBatch
from radixbench.sim.config import SimConfig, Variant
from radixbench.sim.cost import LinearCostModel
from radixbench.sim.instrument import OpRecorder, instrument
from radixbench.sim.request import Req
from radixbench.sim.run import (
    VariantResult,
    VariantSim,
    resolve_device,
    run_interleaved,
    run_variant,
)
from radixbench.sim.scheduler import Scheduler

__all__ = [
    "FLATTENERS",
    "BatchBuilder",
    "LinearCostModel",
    "OpRecorder",
    "Req",
    "ScheduleBatch",
    "Scheduler",
    "SimConfig",
    "Variant",
    "VariantResult",
    "VariantSim",
    "instrument",
    "resolve_device",
    "run_interleaved",
    "run_variant",
]
