"""The host (L2) tier: its slot pool, its evictable leaves and host eviction.

:class:`HostPool` is sglang 0.5.23's host KV pool as the tree sees it
(``mem_cache/pool_host/base.py:503-580``): ``size`` slots numbered ``0..size-1``, allocated
from the front of a free list, freed slots set aside and merged behind it lazily, whole pages
only. No bytes exist; only slot numbers.

:class:`HostTier` keeps the host tier's eviction state over the tree's
:class:`~radixbench.cache.hicache.node.TieredNode` s:

* a node is a **host leaf** when it is not the root, has no device KV, has host KV, no
  children, and is locked on neither tier (``UnifiedTreeCore._is_host_leaf``,
  ``unified_tree_core.py:2366-2387``); ``refresh(node)`` keeps ``node.host.evictable`` exact
  and tells the host evictor when it flips;
* the host evictor is any radixbench evictor (``heapify``, ``heapify-walk``,
  ``persistent-heap``, ``lru-list``) running on the nodes' :class:`HostView` s with the
  device tier's policy (sglang heapifies ``evictable_host_leaves`` by the same strategy key
  per call, ``components/full.py:235-258``: radixbench's ``heapify``);
* ``evict(n)`` is sglang's ``drive_host_eviction`` (``unified_tree_core.py:1931-1959``): under
  ``write_back`` it first reclaims host duplicates of device-resident nodes, in the order they
  became duplicates, sparing evictable device leaves in a first pass
  (``_reclaim_full_host_duplicates``, ``:1975-2006``), then evicts host leaves in the policy's
  order; evicting a leaf removes the node and every childless ancestor left with KV on neither
  tier (``_evict_host_leaf``, ``_iteratively_delete_tombstone_ancestors``, ``:2046,2289``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch

from radixbench.cache.evictor import make_evictor
from radixbench.cache.hicache.node import HostView, TieredNode
from radixbench.cache.key import child_key

if TYPE_CHECKING:
    from radixbench.cache.node import TreeNode
    from radixbench.cache.policy import EvictionPolicy

__all__ = ["HostPool", "HostTier"]


class HostPool:
    """Host KV slots (module docstring). ``size``: slots (a multiple of ``page_size``)."""

    def __init__(self, size: int, page_size: int) -> None:
        if size % page_size:
            raise ValueError(f"host pool of {size} slots is not whole pages of {page_size}")
        self.size = size
        self.page_size = page_size
        self.clear()

    def clear(self) -> None:
        self.free_slots = torch.arange(self.size, dtype=torch.int64)
        self.release_slots: list[torch.Tensor] = []
        self.num_release = 0

    def available_size(self) -> int:
        return len(self.free_slots) + self.num_release

    def used(self) -> int:
        return self.size - self.available_size()

    def alloc(self, need: int) -> torch.Tensor | None:
        """``need`` slots (a page multiple), or ``None`` when fewer are free. Mutates the pool."""
        if need % self.page_size:
            raise ValueError(f"host alloc of {need} slots is not whole pages")
        if need > self.available_size():
            return None
        if need > len(self.free_slots) and self.num_release:
            self.free_slots = torch.cat([self.free_slots, *self.release_slots])
            self.release_slots, self.num_release = [], 0
        out = self.free_slots[:need]
        self.free_slots = self.free_slots[need:]
        return out

    def free(self, slots: torch.Tensor) -> int:
        """Give ``slots`` back (kept aside, merged on demand); returns their count."""
        n = int(slots.numel())
        if n:
            self.release_slots.append(slots)
            self.num_release += n
        return n


class HostTier:
    """Host-tier eviction over a tiered tree (module docstring). ``tree``: the cache (its
    ``root``, ``page_size``, ``refresh_device(node)``, ``unregister(node)``); ``evictor``: the
    evictor's name; ``write_back``: reclaim duplicates first; ``on_free(slots)``: the host
    pool's free (the caller's wrapper may time it)."""

    def __init__(
        self,
        tree: Any,
        pool: HostPool,
        evictor: str,
        policy: EvictionPolicy,
        write_back: bool,
    ) -> None:
        self.tree = tree
        self.pool = pool
        self.evictor = make_evictor(evictor, policy)
        self.write_back = write_back
        self.num_evictable_leaves = 0
        #: node id -> node: device-resident nodes with a settled host copy, in the order they
        #: became such (``full_host_duplicates``, an insertion-ordered dict; lazily cleaned).
        self.duplicates: dict[int, TieredNode] = {}
        self.free_host: Callable[[torch.Tensor], int] = pool.free

    def reset(self) -> None:
        self.evictor.reset()
        self.num_evictable_leaves = 0
        self.duplicates = {}
        self.pool.clear()

    # ------------------------------------------------------------------ leaf state
    @staticmethod
    def is_host_leaf(node: TieredNode) -> bool:
        return (
            node.value is None
            and node.parent is not None
            and node.host_value is not None
            and node.host_lock_ref == 0
            and node.lock_ref == 0
            and not node.children
        )

    def refresh(self, node: TieredNode) -> None:
        """Recompute ``node.host.evictable``; tell the evictor when it flips."""
        view = node.host
        leaf = self.is_host_leaf(node)
        if leaf is not view.evictable:
            view.evictable = leaf
            self.num_evictable_leaves += 1 if leaf else -1
            self.evictor.on_change(cast("TreeNode", view))

    def touched(self, node: TieredNode) -> None:
        """``node``'s sort key may have changed (an access): re-key it if it is a host leaf."""
        if node.host.evictable:
            self.evictor.on_change(cast("TreeNode", node.host))

    def track_duplicate(self, node: TieredNode) -> None:
        """``_update_duplicate_tracking`` (``unified_tree_core.py:1604-1622``): register a
        node holding KV on both tiers with no transfer in flight; deregister otherwise."""
        if (
            node.parent is not None
            and node.value is not None
            and node.host_value is not None
            and node.backup_ack is None
            and node.load_ack is None
        ):
            self.duplicates.setdefault(node.id, node)
        else:
            self.duplicates.pop(node.id, None)

    # ------------------------------------------------------------------ EvictionHost
    def collect_evictable_leaves(self) -> list[TreeNode]:
        """Every host leaf, by a DFS of the tree (for ``heapify-walk``)."""
        out: list[TreeNode] = []
        stack = list(self.tree.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif self.is_host_leaf(node):
                out.append(cast("TreeNode", node.host))
        return out

    def delete_leaf(self, view: Any) -> int:
        """Evict a host leaf (``_evict_host_leaf``): free its host slots, unlink it, then
        unlink every childless ancestor with KV on neither tier. Returns host tokens freed."""
        node: TieredNode = view.node
        assert self.is_host_leaf(node), f"node {node.id} is not a host leaf"
        assert node.host_value is not None
        freed = self.free_host(node.host_value)
        node.host_value = None
        self.duplicates.pop(node.id, None)
        parent = self.tree.unlink(node)
        self.refresh(node)
        self.delete_tombstones(parent)
        return freed

    def delete_tombstones(self, cur: TieredNode) -> None:
        """``_iteratively_delete_tombstone_ancestors``: from ``cur`` up, unlink childless,
        unlocked nodes with KV on neither tier; stop at a node with KV (refreshing it)."""
        tree = self.tree
        while cur.parent is not None and not cur.children:
            if cur.lock_ref > 0 or cur.host_lock_ref > 0:
                break
            if cur.value is not None or cur.host_value is not None:
                tree.refresh(cur)
                break
            parent = tree.unlink(cur)
            self.refresh(cur)
            tree.refresh(parent)
            cur = parent

    # ------------------------------------------------------------------ eviction
    def evict(self, num_tokens: int) -> tuple[list[int], int]:
        """Free at least ``num_tokens`` host slots if possible (module docstring); returns the
        ids of the nodes whose host KV went, in order, and the slots freed."""
        victims: list[int] = []
        freed = 0
        if num_tokens <= 0:
            return victims, 0
        if self.write_back:
            freed = self._reclaim_duplicates(num_tokens, victims)
        if freed < num_tokens:
            views, n = self.evictor.evict(self, num_tokens - freed)
            victims += [v.id for v in views]
            freed += n
        return victims, freed

    def _reclaim_duplicates(self, num_tokens: int, victims: list[int]) -> int:
        freed = 0
        swept: list[int] = []
        for spare_device_leaves in (True, False):
            if freed >= num_tokens:
                break
            for node in self.duplicates.values():
                if freed >= num_tokens:
                    break
                if node.value is None or node.host_value is None:
                    swept.append(node.id)
                    continue
                if spare_device_leaves and node.evictable:
                    continue
                if node.backup_ack is not None or node.load_ack is not None:
                    continue
                if node.host_lock_ref:
                    continue
                freed += self.free_host(node.host_value)
                node.host_value = None
                victims.append(node.id)
                swept.append(node.id)
                self.refresh(node)
        for nid in swept:
            self.duplicates.pop(nid, None)
        return freed

    def unlink_child(self, parent: TieredNode, node: TieredNode) -> None:
        del parent.children[
            child_key(node.key.token_ids, 0, self.pool.page_size, node.key.namespace)
        ]

    @staticmethod
    def views(nodes: list[TieredNode]) -> list[HostView]:
        return [n.host for n in nodes]
