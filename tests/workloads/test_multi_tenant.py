"""The multi-tenant workload (llm-d's benchmark) and the staged Poisson arrivals (its QPS ramp)."""

from __future__ import annotations

import numpy as np
import pytest

from radixbench.workloads.arrivals import Arrivals, apply_arrivals
from radixbench.workloads.multi_tenant import MultiTenant, multi_tenant
from radixbench.workloads.tokens import block_tokens


def test_prompts_are_tenant_context_plus_a_fixed_user_question() -> None:
    p = MultiTenant(tenants=3, users_per_tenant=2, context_tokens=64, query_tokens=32,
                    output_tokens=8, requests=200)  # fmt: skip
    reqs = multi_tenant(p, np.random.default_rng(0))
    assert len(reqs) == 200 and all(r.input_length == 96 and r.output_length == 8 for r in reqs)
    prompts = {tuple(block_tokens(r.hash_ids, r.input_length)) for r in reqs}
    assert len(prompts) == 6  # 3 tenants x 2 users, each prompt repeated
    contexts = {p[:64] for p in prompts}
    assert len(contexts) == 3
    with pytest.raises(ValueError, match="tenants"):
        MultiTenant(tenants=0)


def test_stages_ramp_the_rate() -> None:
    a = Arrivals(process="stages", stages=((10.0, 20.0), (40.0, 20.0)))
    reqs = multi_tenant(MultiTenant(tenants=2, requests=5000), np.random.default_rng(1))
    timed = apply_arrivals(reqs, a, np.random.default_rng(2))
    t = np.array([r.arrival_s for r in timed])
    assert t[0] == 0.0 and np.all(np.diff(t) >= 0)
    first, second = (t < 20).sum(), ((t >= 20) & (t < 40)).sum()
    assert 150 < first < 250 and 700 < second < 900  # ~200 then ~800 (Poisson)
    assert len(timed) == first + second < 5000  # cut to the arrivals the ramp has
    with pytest.raises(ValueError, match="stages"):
        Arrivals(process="stages")
    with pytest.raises(ValueError, match="stages"):
        Arrivals(process="poisson", rate=1.0, stages=((1.0, 1.0),))
    with pytest.raises(ValueError, match="rate > 0"):
        Arrivals(process="stages", stages=((1.0, 0.0),))
