"""Multi-tenant shared contexts: the workload of llm-d's precise-scheduling benchmark.

The ``shared_prefix`` data of inference-perf as llm-d-kv-cache-manager's
``benchmarking/73-capacity/README.md`` configures it (``num_groups`` 150,
``num_prompts_per_group`` 5, ``system_prompt_len`` 6,000, ``question_len`` 1,200,
``output_len`` 1,000): ``tenants`` contexts of ``context_tokens``, each with
``users_per_tenant`` users whose own question of ``query_tokens`` follows their tenant's
context; every request sends one (tenant, user) prompt drawn uniformly at random (seeded), so
prompts repeat and a user's whole prompt can be resident. ``requests`` prompts are drawn (an
arrival process with ``stages`` keeps those its ramp has arrivals for).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from radixbench.workloads.segments import BlockIds, build_request
from radixbench.workloads.trace import TraceRequest

__all__ = ["MultiTenant", "multi_tenant"]


@dataclass(frozen=True)
class MultiTenant:
    """Parameters (tokens; see the module docstring). All must be >= 1."""

    tenants: int = 150
    users_per_tenant: int = 5
    context_tokens: int = 6000
    query_tokens: int = 1200
    output_tokens: int = 1000
    requests: int = 20000
    block_size: int = 16

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def multi_tenant(p: MultiTenant, rng: np.random.Generator) -> list[TraceRequest]:
    """``p.requests`` prompts, each a uniformly drawn (tenant, user): context + question."""
    ids = BlockIds(p.block_size)
    prompts = []
    for _ in range(p.tenants):
        context = ids.segment(p.context_tokens)
        prompts += [[context, ids.segment(p.query_tokens)] for _ in range(p.users_per_tenant)]
    picks = rng.integers(len(prompts), size=p.requests)
    return [
        build_request(i, prompts[k], p.query_tokens, p.output_tokens, p.block_size)
        for i, k in enumerate(picks.tolist())
    ]
