"""radixbench's HiCache tiers against sglang 0.5.23's, op by op (``conftest.Lockstep``).

Seeded op streams (insert, match, load back, lock/unlock, evict device, evict host, complete
transfers and poll events, prefetch from storage, admit) run in lockstep on radixbench's
``TieredRadixCache`` and on sglang's real ``UnifiedRadixCache`` with HiCache on, its I/O
simulated (``radixbench.cache.sglang.hicache``). Compared after every op: the op's result
(matched device / host tokens and nodes, inserted prefix and adopted slots, device victims in
order, host victims in order, loads, prefetch outcomes), the transfers each started, sizes,
free device slots, host slots in use, and with the Python core every node's parent, length,
residency on each tier, lock counts and leaf state on each tier. LRU, page 1 and 16, the three
write policies, with and without storage, host pools of 1x and 2x the device pool, the three
prefetch policies: 52,800 ops in the default suite (``-m slow``: 20x more, and the Rust core).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang") is None, reason="sglang 0.5.23 is not installed"
)

POLICIES = ["write_through", "write_through_selective", "write_back"]
PREFETCH = ("best_effort", "wait_complete", "timeout")
OPS = 2200


def _run(lockstep: Any, policy: str, page: int, storage: bool, seeds: range, core: str) -> int:
    ops = 0
    for seed in seeds:
        ratio = 1.0 if seed % 2 else 2.0  # a host pool as small as the device's, or twice it
        prefetch = PREFETCH[(seed + page // 16 + POLICIES.index(policy)) % 3]
        rb, sg = lockstep.build_pair(
            policy, page, core, storage, device_tokens=256 * page, ratio=ratio,
            prefetch_policy=prefetch,
        )  # fmt: skip
        run = lockstep.Lockstep(rb, sg, page, seed, storage)
        for _ in range(OPS):
            run.step()
        ops += run.ops
    return ops


@pytest.mark.parametrize("storage", [False, True], ids=["l2", "l3"])
@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("policy", POLICIES)
def test_tiers_match_sglang(lockstep: Any, policy: str, page: int, storage: bool) -> None:
    assert _run(lockstep, policy, page, storage, range(2), "python") == 2 * OPS


@pytest.mark.slow
@pytest.mark.parametrize("core", ["python", "auto"])
@pytest.mark.parametrize("storage", [False, True], ids=["l2", "l3"])
@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("policy", POLICIES)
def test_tiers_match_sglang_long(
    lockstep: Any, policy: str, page: int, storage: bool, core: str
) -> None:
    """20 seeds per case; ``auto`` is sglang's default (Rust) core: results, transfers, sizes
    and pools compared, not nodes (it has no node objects)."""
    assert _run(lockstep, policy, page, storage, range(2, 22), core) == 20 * OPS
