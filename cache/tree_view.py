"""What radixbench's radix tree reports without changing it: sizes, per-op condition, shape.

:class:`TreeView` is the read side of :class:`~radixbench.cache.radix_cache.RadixCache` (and of
its tiered subclass): the O(1) counters the tree keeps exact (``evictable_size_``,
``protected_size_``, ``num_nodes``, ``num_evictable_leaves``), its walks (``walk``,
``held_slots``, ``collect_evictable_leaves``, ``path_device_indices``, ``pretty_print``), and
what it says of itself (``take_actions``, ``info``). Nothing here mutates the tree; the tree
algorithms mirroring sglang 0.5.23 are in ``radix_cache``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

import torch

from radixbench.cache.interface import CacheAction, ImplInfo, TreeStats

if TYPE_CHECKING:
    from radixbench.cache.kv_recorder import KVEventRecorder
    from radixbench.cache.node import TreeNode

__all__ = ["TreeView"]


class TreeView:
    """The read side of a radix tree (module docstring); the tree keeps the state below."""

    root: TreeNode
    evictable_size_: int
    protected_size_: int
    num_nodes: int
    num_evictable_leaves: int
    kv_events: KVEventRecorder | None
    _empty: torch.Tensor

    def evictable_size(self) -> int:
        """Tokens in unlocked nodes: all of them can be freed by cascading leaf evictions."""
        return self.evictable_size_

    def protected_size(self) -> int:
        """Tokens in nodes locked by running requests."""
        return self.protected_size_

    def total_size(self) -> int:
        """Tokens held by the tree (O(1); ``check_integrity`` verifies it against a walk)."""
        return self.evictable_size_ + self.protected_size_

    def tree_stats(self) -> TreeStats:
        """``(nodes excluding the root, tokens held, evictable leaves)``, from the O(1)
        counters (``PrefixCache.tree_stats``)."""
        return (
            self.num_nodes,
            self.evictable_size_ + self.protected_size_,
            self.num_evictable_leaves,
        )

    def node_id(self, node: TreeNode) -> int:
        """``node.id`` (the root's is 0)."""
        return node.id

    def walk(self) -> Iterator[tuple[int, int]]:
        """``(node id, parent id)`` of every node but the root, depth first, a node before its
        children, children in insertion order (``PrefixCache.walk``). Mutates nothing."""
        stack = list(reversed(self.root.children.values()))
        while stack:
            node = stack.pop()
            assert node.parent is not None
            yield node.id, node.parent.id
            if node.children:
                stack.extend(reversed(node.children.values()))

    def held_slots(self) -> torch.Tensor:
        """int64 ``[total_size()]``: the KV slots of every node, in :meth:`walk`'s reverse
        order of siblings. Mutates nothing."""
        values = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            values.append(node.value)
            stack.extend(node.children.values())
        if not values:
            return self._empty
        return torch.cat(values)

    def take_actions(self) -> list[CacheAction]:
        """The KV events queued since the last call, in order (``[]`` with events off); see
        :mod:`radixbench.cache.kv_recorder`."""
        if self.kv_events is None:
            return []
        return list(self.kv_events.take())

    def info(self) -> ImplInfo:
        """radixbench's version, the folder of ``radixbench.cache`` and its files' sha256."""
        from radixbench.cache.impls import radixbench_info

        return radixbench_info()

    def collect_evictable_leaves(self) -> list[TreeNode]:
        """All unlocked leaves by DFS (SGLang ``_collect_leaves``); O(nodes)."""
        leaves = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif node.lock_ref == 0:
                leaves.append(node)
        return leaves

    def path_device_indices(self, node: TreeNode) -> torch.Tensor:
        """int64 ``[depth tokens]`` KV slots on the path root..node, a fresh tensor
        (``RadixCache.path_device_indices`` of sglang 0.5.23). Mutates nothing."""
        values = []
        root = self.root
        while node is not root:
            values.append(node.value)
            assert node.parent is not None
            node = node.parent
        if not values:
            return self._empty
        values.reverse()
        return torch.cat(values)

    def pretty_print(self, file: TextIO | None = None, max_tokens: int = 8) -> None:
        """Print the tree, one node per line indented by depth: id, token count, first
        ``max_tokens`` ids, lock_ref, access time, hit count, priority; then the sizes. Mutates
        nothing. Mirrors SGLang ``pretty_print`` / ``_print_helper``."""
        from radixbench.cache.printing import pretty_print

        pretty_print(self, file, max_tokens)
