"""Tree nodes of the tiered cache: a ``TreeNode`` with host residency, and its host-tier view.

Mirrors the HiCache fields of sglang 0.5.23's ``UnifiedTreeNode``
(``mem_cache/unified_cache/unified_tree_core.py:112-190``) for the FULL component:
``value`` (device KV slots, ``None`` once evicted from the device: ``evicted``), ``host_value``
(host pool slots, ``None`` when not backed up: ``backuped``), ``host_lock_ref``,
``write_through_pending_id`` (``backup_ack``: the ack id of an in-flight device->host copy),
``load_back_pending_id`` (``load_ack``: the anchor of an in-flight host->device load, used by
``write_back`` only) and ``hash_value`` (the L3 page keys, one per page).

:class:`HostView` is the node as the *host* tier's evictor sees it: the same evictors
(``heapify``, ``heapify-walk``, ``persistent-heap``, ``lru-list``) run unchanged on the host
tier because a view carries its own ``evictable`` / ``heap_version`` / ``prev`` / ``next``
and forwards every field a policy key reads to its node (``last_access_time``, ``id``...), as
sglang keys its host heap with the same eviction strategy as the device one
(``components/full.py:246-258``: ``session_ref_eviction_strategy(n)`` over
``evictable_host_leaves``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from radixbench.cache.node import TreeNode

if TYPE_CHECKING:
    import torch


class TieredNode(TreeNode):
    """A ``TreeNode`` with host residency (see the module docstring).

    ``value`` is ``None`` while the node's KV is not on the device (``evicted``);
    ``host_value``: int64 ``[len(key)]`` host slots or ``None``; ``host_lock_ref``: holders
    that pin the host copy (a prefetch anchor, a storage write, a load-back); ``backup_ack`` /
    ``load_ack``: ids of in-flight transfers reading or writing this node's slots;
    ``hash_value``: L3 page keys (``None`` until computed); ``host_uuid``: the receipt of the
    host locks whose segment ends at this node (sglang's ``metadata["host_uuid"]``); ``host``:
    this node's :class:`HostView`."""

    __slots__ = (
        "backup_ack",
        "hash_value",
        "host",
        "host_lock_ref",
        "host_uuid",
        "host_value",
        "load_ack",
    )

    if TYPE_CHECKING:  # a tiered tree holds tiered nodes only
        parent: TieredNode | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.host_value: torch.Tensor | None = None
        self.host_lock_ref = 0
        self.backup_ack: int | None = None
        self.load_ack: int | None = None
        self.hash_value: list[int] | None = None
        self.host_uuid: int | None = None
        self.host = HostView(self)

    @property
    def evicted(self) -> bool:
        """Not the root and no device KV (``UnifiedTreeNode.evicted``)."""
        return self.value is None and self.parent is not None

    @property
    def backuped(self) -> bool:
        """Host KV present (``UnifiedTreeNode.backuped``)."""
        return self.host_value is not None


class HostView:
    """A node as the host tier's evictor sees it (module docstring). ``evictable``: the node is
    a host leaf (kept exact by the host tier); ``heap_version`` / ``prev`` / ``next``: the
    evictors' own bookkeeping for this tier. ``parent`` is the parent node's view."""

    __slots__ = ("evictable", "heap_version", "next", "node", "prev")

    def __init__(self, node: TieredNode) -> None:
        self.node = node
        self.evictable = False
        self.heap_version = 0
        self.prev: HostView | None = None
        self.next: HostView | None = None

    @property
    def id(self) -> int:
        return self.node.id

    @property
    def parent(self) -> HostView | None:
        p = self.node.parent
        return None if p is None else p.host

    @property
    def children(self) -> dict[Any, TreeNode]:
        return self.node.children

    @property
    def last_access_time(self) -> int:
        return self.node.last_access_time

    @property
    def creation_time(self) -> int:
        return self.node.creation_time

    @property
    def hit_count(self) -> int:
        return self.node.hit_count

    @property
    def priority(self) -> int:
        return self.node.priority

    @property
    def key(self) -> Any:
        return self.node.key

    @property
    def tlru_cached_prefix_len(self) -> int:
        return self.node.tlru_cached_prefix_len

    @property
    def tlru_history_len(self) -> int:
        return self.node.tlru_history_len

    @property
    def lock_ref(self) -> int:
        return self.node.host_lock_ref

    def __repr__(self) -> str:
        return f"HostView({self.node!r}, evictable={self.evictable})"
