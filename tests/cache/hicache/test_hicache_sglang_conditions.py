"""Issue 31 item 5: sglang's HiCache cache on its Rust core reports the conditions radixbench
records before every op (``tree_stats``: nodes, evictable leaves) instead of 0: its shape
shadow keeps the device-resident part of the tree (``TreeShadow``, ``tiered``). Checked in
lockstep against radixbench's tiers (themselves checked against sglang's Python core node by
node, ``test_hicache_differential``): the device-resident nodes and the evictable device
leaves agree after every op, for every write policy, page 1 and 16, with and without
storage."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang") is None, reason="sglang 0.5.23 is not installed"
)


def _device(cache: Any) -> tuple[int, int]:
    nodes = [n for n in cache.nodes_by_id.values() if n.parent is not None and n.value is not None]
    return len(nodes), sum(1 for n in nodes if n.evictable)


@pytest.mark.parametrize("storage", [False, True], ids=["l2", "l3"])
@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("policy", ["write_through", "write_through_selective", "write_back"])
def test_rust_core_reports_device_nodes_and_leaves(
    lockstep: Any, policy: str, page: int, storage: bool
) -> None:
    rb, sg = lockstep.build_pair(policy, page, "auto", storage, device_tokens=256 * page)
    assert sg.c.rust
    run = lockstep.Lockstep(rb, sg, page, 0, storage)
    seen = 0
    for _ in range(1000):
        run.step()
        nodes, _, leaves = sg.c.tree_stats()
        assert (nodes, leaves) == _device(rb.c), f"op {run.ops}"
        seen = max(seen, leaves)
    assert seen > 0
