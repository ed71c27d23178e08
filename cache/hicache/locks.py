"""The locks of radixbench's tiered tree: device holders over host-only segments, host pins.

Mirrors the FULL component of sglang 0.5.23's ``UnifiedTreeCore`` with HiCache on
(``mem_cache/unified_cache/components/full.py``): ``inc_lock_ref`` also counts up the host-only
segment at the bottom of the path, moving no sizes (``full.py:286-322``); ``dec_lock_ref``
undoes it; a host lock pins one node's host copy (even a device-only node's under
``write_back``) and is released up to the node whose ``host_uuid`` marks its boundary, which a
split moves to the upper half (``full.py:270-283, 324-352``; ``redistribute_on_node_split``,
``unified_tree_core.py:140-166``).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from radixbench.cache.hicache.node import TieredNode
    from radixbench.cache.hicache.tree import TieredTree
    from radixbench.cache.node import TreeNode

__all__ = ["TierLocks"]

_host_uuids = itertools.count(1)


class TierLocks:
    """The lock operations of :class:`~radixbench.cache.hicache.tree.TieredTree` (module
    docstring); sizes in tokens."""

    def inc_lock_ref(self: TieredTree, node: TreeNode) -> int:
        """Lock root..node: host-only nodes (always at the bottom of a path) count a holder
        without moving sizes; device nodes move from evictable to protected on their first
        holder. Returns the change of the evictable size (<= 0)."""
        delta = 0
        root = self.root
        while node is not root:
            if node.lock_ref == 0 and node.value is not None:
                delta -= len(node.key)
            node.lock_ref += 1
            self._refresh(node)
            node = node.parent
        self.evictable_size_ += delta
        self.protected_size_ -= delta
        return delta

    def dec_lock_ref(self: TieredTree, node: TreeNode) -> int:
        delta = 0
        root = self.root
        while node is not root:
            if node.lock_ref <= 0:
                raise RuntimeError(f"dec_lock_ref on unlocked node {node.id}")
            if node.lock_ref == 1 and node.value is not None:
                n = len(node.key)
                self.evictable_size_ += n
                self.protected_size_ -= n
                delta += n
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self._refresh(node)
            node = node.parent
        return delta

    def inc_host_lock_ref(self: TieredTree, node: TieredNode) -> int | None:
        """Pin ``node``'s host copy (``write_back``: even a device-only node); the receipt for
        :meth:`dec_host_lock_ref`, ``None`` when nothing was pinned."""
        if node.host_value is None and not self.write_back:
            return None
        if node.host_uuid is None:
            node.host_uuid = next(_host_uuids)
        node.host_lock_ref += 1
        self._refresh(node)
        return node.host_uuid

    def dec_host_lock_ref(self: TieredTree, node: TieredNode, receipt: int | None) -> None:
        if receipt is None:
            return
        cur: TieredNode | None = node
        while cur is not None:
            if cur.host_value is None and not self.write_back:
                return
            assert cur.host_lock_ref > 0, f"host lock release on node {cur.id}"
            cur.host_lock_ref -= 1
            self._refresh(cur)
            if cur.host_uuid == receipt:
                return
            cur = cur.parent
        raise AssertionError(f"host lock boundary {receipt} not above node {node.id}")
