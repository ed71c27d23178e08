"""Simulation configuration: frozen dataclasses validated on construction."""

from __future__ import annotations

from dataclasses import dataclass, field

from radixbench.cache.evictor import EVICTORS
from radixbench.cache.matcher import MATCHERS
from radixbench.cache.policy import POLICIES
from radixbench.sim.cost import LinearCostModel

FLATTENERS_NAMES = ("sum", "chain", "numpy")


@dataclass(frozen=True, slots=True)
class Variant:
    """One algorithm combination run by the harness. ``name`` is "evictor/matcher/flatten"."""

    evictor: str = "heapify"
    matcher: str = "linear"
    flatten: str = "chain"

    def __post_init__(self) -> None:
        for key, value, known in (
            ("evictor", self.evictor, tuple(EVICTORS)),
            ("matcher", self.matcher, tuple(MATCHERS)),
            ("flatten", self.flatten, FLATTENERS_NAMES),
        ):
            if value not in known:
                raise ValueError(f"unknown {key} {value!r}; known: {', '.join(known)}")

    @property
    def name(self) -> str:
        return f"{self.evictor}/{self.matcher}/{self.flatten}"


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Scheduler, memory and clock settings of one simulated server (units in field names).

    kv_capacity_tokens: KV slots in the pool (one token each). max_running: cap on running
    requests (also the ``req_to_token`` rows). max_prefill_tokens: token budget of one prefill
    step (a single longer request is still admitted alone; chunked prefill comes later).
    max_context_len_tokens: longest request (input + output) accepted; longer ones are rejected.
    clock: "isolated" — measured CPU time of cache operations is recorded, not added to
    simulated time, so every variant sees an identical schedule.
    """

    kv_capacity_tokens: int = 400_000
    max_running: int = 64
    max_prefill_tokens: int = 16_384
    max_context_len_tokens: int = 131_072
    page_size: int = 1
    policy: str = "lru"
    clock: str = "isolated"
    seed: int = 0
    cost: LinearCostModel = field(default_factory=LinearCostModel)

    def __post_init__(self) -> None:
        for name in (
            "kv_capacity_tokens",
            "max_running",
            "max_prefill_tokens",
            "max_context_len_tokens",
            "page_size",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.page_size != 1:
            raise ValueError("page_size > 1 needs the paged allocator (not in this version)")
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; known: {', '.join(POLICIES)}")
        if self.clock != "isolated":
            raise ValueError(f"unknown clock mode {self.clock!r}; known: isolated")
