"""Radix tree nodes.

Mirrors SGLang ``TreeNode`` (``sglang/srt/mem_cache/radix_cache.py`` in sglang 0.5.23), plus the
two T-LRU lengths that 0.5.23 keeps only on ``UnifiedTreeNode``
(``sglang/srt/mem_cache/unified_cache/unified_tree_core.py``). A ``slots=True`` hot object: nodes
are compared by identity (``is``), never by value; ``id`` is unique within one cache and is the
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
        last_access_time / creation_time: readings of the owning cache's clock (ints; SGLang reads
            ``time.monotonic()`` at the same points: twice when a node is created, once per
            match / insert walk).
        hit_count: inserts that walked through or created this node beyond what the inserting
            request had inserted before (0.5.23 ``inserted_len``); a new leaf starts at 1 (LFU,
            SLRU).
        priority: request priority, max over inserts that walked through it (Priority policy).
        tlru_cached_prefix_len: tokens from the root to the end of this node (T-LRU's depth).
        tlru_history_len: the deepest ``tlru_cached_prefix_len`` ever reached below this node
            (T-LRU's ``L``; never shrinks when the tail is evicted).
        evictable: cached ``parent is not None and not children and lock_ref == 0`` — kept exact
            by ``RadixCache`` so that evictors and counters never rescan the tree.
        heap_version: version stamp used by the persistent-heap evictor to drop stale entries.
        page_digests: SHA-256 digest of each page of ``key`` (``list[bytes]``), set by the
            cache's KV-event recorder (``kv_recorder.KVEventRecorder``); ``None`` with events
            off (0.5.23 ``hash_value`` / ``event_hash_value``).
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
        "page_digests",
        "parent",
        "prev",
        "priority",
        "tlru_cached_prefix_len",
        "tlru_history_len",
        "value",
    )

    def __init__(
        self,
        node_id: int,
        key: RadixKey,
        value: torch.Tensor,
        parent: TreeNode | None,
        last_access_time: int,
        creation_time: int,
        priority: int = 0,
    ) -> None:
        self.children: dict[ChildKey, TreeNode] = {}
        self.parent = parent
        self.key = key
        self.value = value
        self.lock_ref = 0
        self.last_access_time = last_access_time
        self.creation_time = creation_time
        self.hit_count = 0
        self.tlru_cached_prefix_len = 0
        self.tlru_history_len = 0
        self.priority = priority
        self.id = node_id
        self.evictable = False
        self.heap_version = 0
        self.page_digests: list[bytes] | None = None
        # Intrusive list links, used by list-based evictors only.
        self.prev: TreeNode | None = None
        self.next: TreeNode | None = None

    def __repr__(self) -> str:
        return (
            f"TreeNode(id={self.id}, len={len(self.key)}, lock_ref={self.lock_ref}, "
            f"children={len(self.children)}, t={self.last_access_time})"
        )
