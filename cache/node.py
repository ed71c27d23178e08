"""Radix tree nodes.

Mirrors SGLang ``TreeNode`` (radix_cache.py @ a7ec6b97). A ``slots=True`` hot object: nodes are
compared by identity (``is``), never by value; ``id`` is unique within one cache and is the
deterministic tie-breaker of every eviction order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from radixbench.cache.key import ChildKey, RadixKey


class TreeNode:
    """One edge of the radix tree: a run of tokens and their KV-slot indices.

    Attributes:
        children: child-key -> node (see ``key.child_key``).
        parent: ``None`` only for the root.
        key: the tokens of this edge (``RadixKey``).
        value: int64 tensor ``[len(key)]`` of KV-slot indices on the cache's device.
        lock_ref: number of running requests whose prefix passes through this node; a node with
            ``lock_ref > 0`` is protected, never evicted.
        last_access_time / creation_time: logical clock ticks of the owning cache.
        hit_count: number of inserts that walked through this node (LFU, SLRU).
        priority: request priority, max over inserts that walked through it (Priority policy).
        evictable: cached ``parent is not None and not children and lock_ref == 0`` — kept exact
            by ``RadixCache`` so that evictors and counters never rescan the tree.
        heap_version: version stamp used by the persistent-heap evictor to drop stale entries.
    """

    __slots__ = (
        "children",
        "creation_time",
        "evictable",
        "heap_version",
        "hit_count",
        "id",
        "key",
        "last_access_time",
        "lock_ref",
        "next",
        "parent",
        "prev",
        "priority",
        "value",
    )

    def __init__(
        self,
        node_id: int,
        key: RadixKey,
        value: torch.Tensor,
        parent: TreeNode | None,
        now: int,
        priority: int = 0,
    ) -> None:
        self.children: dict[ChildKey, TreeNode] = {}
        self.parent = parent
        self.key = key
        self.value = value
        self.lock_ref = 0
        self.last_access_time = now
        self.creation_time = now
        self.hit_count = 0
        self.priority = priority
        self.id = node_id
        self.evictable = False
        self.heap_version = 0
        # Intrusive list links, used by list-based evictors only.
        self.prev: TreeNode | None = None
        self.next: TreeNode | None = None

    def __repr__(self) -> str:
        return (
            f"TreeNode(id={self.id}, len={len(self.key)}, lock_ref={self.lock_ref}, "
            f"children={len(self.children)}, t={self.last_access_time})"
        )
