"""radixbench's cache with a host tier: the tree side of HiCache.

:class:`TieredTree` is ``RadixCache`` where a node's KV can live on the device, the host, or
both, mirroring the FULL component of sglang 0.5.23's ``UnifiedTreeCore`` with HiCache on
(``mem_cache/unified_cache/unified_tree_core.py``; ``components/full.py``). What changes:

* **device leaves** (the ``evictable`` set the device evictor serves) are nodes with device KV,
  no child with device KV, unlocked (``_is_device_leaf``, ``:2348-2364``): a node whose
  children are host-only is one;
* **match** walks through host-only nodes that have a host copy and stops at one with KV on
  neither tier (``_match_prefix_helper``, ``:905-984``); the device prefix ends at the deepest
  device node, ``host_hit_length`` counts the host-only tokens below it
  (``FullComponent.finalize_match_result_in_tree_core``, ``full.py:117-138``);
* **insert** adopts the request's slots for a walked host-only node (``_unevict_node_on_insert``,
  ``:1564-1590``); hits are counted on insert walks only (not under ``write_back``), and a
  node reaching ``write_through_threshold`` is backed up with its unbacked ancestors, ancestors
  first, locked until its ack (``_inc_hit_count_and_check``, ``_build_backup_kv_action``,
  ``_execute_and_commit_kv_backup``: ``:1104-1123,2622-2644``, ``unified_radix_cache.py:
  1681-1716``);
* **locks** (:mod:`~radixbench.cache.hicache.locks`): ``inc_lock_ref`` also counts up the
  host-only segment at the bottom of the path (no size moves; ``full.py:286-322``); host locks
  pin one node and release up to the node that marks their boundary, which a split moves to the
  upper half (``full.py:270-283, 324-352``, ``redistribute_on_node_split``, ``:140-166``);
* **evicting a device leaf** demotes it when it has a host copy (its device slots freed, the
  node kept host-only), deletes it when it has none, and under ``write_back`` backs it up first,
  synchronously (``evict_device_leaf``, ``_demote``, ``:1788-1823,2090-2123``;
  ``unified_radix_cache.py:1002-1027``).

The transfers, load-back, storage and the scheduler's entry points are in
:mod:`radixbench.cache.hicache.ops` (a mixin of this class); the host tier in
:mod:`radixbench.cache.hicache.host`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from radixbench.cache.hicache.locks import TierLocks
from radixbench.cache.hicache.node import TieredNode
from radixbench.cache.interface import MatchResult
from radixbench.cache.key import RadixKey, child_key
from radixbench.cache.node import TreeNode
from radixbench.cache.radix_cache import RadixCache

__all__ = ["TieredTree"]


class TieredTree(TierLocks, RadixCache):
    """The tree side (module docstring). Built by :class:`~radixbench.cache.hicache.ops.
    TieredRadixCache`, which sets ``write_back``, ``threshold`` (hits for a write-through
    backup), ``hosts`` (:class:`~radixbench.cache.hicache.host.HostTier`) and ``storage_on``
    before ``reset``."""

    write_back = False
    threshold = 1
    storage_on = False
    hosts: Any
    root: TieredNode
    #: ids of the nodes the last host eviction dropped (``TransferOps.evict_host``)
    host_victims: list[int]
    #: ``[start, end)`` token ranges of the last ``insert``'s key whose slots the tree adopted
    #: (host-only nodes given the request's device slots); the caller must not free them.
    adopted: list[tuple[int, int]]

    def _new_node(
        self, key: RadixKey, value: torch.Tensor, parent: TreeNode | None, priority: int = 0
    ) -> TieredNode:
        clock = self.clock
        access = clock()
        node = TieredNode(self._next_id, key, value, parent, access, clock(), priority)
        self._next_id += 1
        return node

    def reset(self) -> None:
        super().reset()
        self.root.hash_value = []
        self.adopted = []
        self.nodes_by_id: dict[int, TieredNode] = {0: self.root}

    # ------------------------------------------------------------------ leaf state
    def _refresh(self, node: TreeNode) -> None:
        """Device-leaf state of ``node`` (module docstring), then its host-leaf state."""
        evictable = (
            node.value is not None
            and node.lock_ref == 0
            and node.parent is not None
            and not any(c.value is not None for c in node.children.values())
        )
        if evictable is not node.evictable:
            node.evictable = evictable
            self.num_evictable_leaves += 1 if evictable else -1
            self.evictor.on_change(node)
        self.hosts.refresh(node)

    refresh = _refresh

    def _touch(self, node: TieredNode) -> None:
        if node.evictable:
            self.evictor.on_change(node)
        self.hosts.touched(node)

    def unlink(self, node: TieredNode) -> TieredNode:
        """Remove ``node`` (childless) from its parent; returns the parent."""
        parent = node.parent
        assert parent is not None and not node.children
        del parent.children[child_key(node.key.token_ids, 0, self.page_size, node.key.namespace)]
        node.parent = None
        self.num_nodes -= 1
        self.nodes_by_id.pop(node.id, None)
        self.hosts.duplicates.pop(node.id, None)
        return parent

    def collect_evictable_leaves(self) -> list[TreeNode]:
        """Every device leaf by a DFS (for ``heapify-walk``)."""
        out: list[TreeNode] = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if (
                node.value is not None
                and node.lock_ref == 0
                and not any(c.value is not None for c in node.children.values())
            ):
                out.append(node)
        return out

    def held_slots(self) -> torch.Tensor:
        """int64: the device KV slots of every device-resident node."""
        values = [
            n.value
            for n in self.nodes_by_id.values()
            if n.parent is not None and n.value is not None
        ]
        return torch.cat(values) if values else self._empty

    def held_host_slots(self) -> torch.Tensor:
        values = [n.host_value for n in self.nodes_by_id.values() if n.host_value is not None]
        return torch.cat(values) if values else self._empty

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Longest cached prefix of ``key`` on either tier, whole pages (module docstring).
        Mutates access times (the root and every walked node: one clock reading) and may split
        one node; never sizes or locks."""
        page = self.page_size
        tokens = key.token_ids
        limit = len(key) // page * page
        node: TreeNode = self.root
        if limit == 0:
            return MatchResult(self._empty, node, 0, 0, node)
        now = self.clock()
        node.last_access_time = now
        values: list[torch.Tensor] = []
        offset = dev_len = 0
        dev_node = node
        extra = key.namespace
        common_prefix = self.matcher.common_prefix
        while offset < limit:
            child = node.children.get(child_key(tokens, offset, page, extra))
            if child is None or (child.value is None and child.host_value is None):
                break
            child.last_access_time = now
            n = common_prefix(child.key.token_ids, tokens, offset, page)
            if n > limit - offset:
                n = limit - offset
            if n < len(child.key):
                child = self._split_node(child, n)
                offset += n
                if child.value is not None:
                    values.append(child.value)
                    dev_node, dev_len = child, offset
                node = child
                break
            self._touch(child)
            offset += n
            if child.value is not None:
                values.append(child.value)
                dev_node, dev_len = child, offset
            node = child
        indices = torch.cat(values) if values else self._empty
        return MatchResult(indices, dev_node, dev_len, offset - dev_len, node)

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """``UnifiedTreeCore._split_node`` (``:1467-1530``) on both tiers: values, host values
        and L3 keys split; lock counts, host lock counts, hits, priority and in-flight transfer
        marks copied; a host-lock boundary moves to the upper half; the upper half joins the
        duplicate tracking when it qualifies. Times by the split rule (``RadixCache``)."""
        c: TieredNode = child
        parent = c.parent
        assert parent is not None
        page, extra = self.page_size, c.key.namespace
        dev = None if c.value is None else c.value[:split_len].clone()
        new: TieredNode = self._new_node(c.key[:split_len], dev, parent)
        new.lock_ref = c.lock_ref
        new.host_lock_ref = c.host_lock_ref
        new.priority = c.priority
        new.hit_count = c.hit_count
        new.backup_ack = c.backup_ack
        new.load_ack = c.load_ack
        if c.host_uuid is not None:
            new.host_uuid, c.host_uuid = c.host_uuid, None
        if self.tlru:
            new.tlru_cached_prefix_len = parent.tlru_cached_prefix_len + split_len
            new.tlru_history_len = c.tlru_history_len
        if c.hash_value is not None:
            cut = split_len // page
            new.hash_value, c.hash_value = c.hash_value[:cut], c.hash_value[cut:]
        parent.children[child_key(new.key.token_ids, 0, page, extra)] = new
        c.key = c.key[split_len:]
        if c.value is not None:
            c.value = c.value[split_len:].clone()
        if c.host_value is not None:
            new.host_value = c.host_value[:split_len].clone()
            c.host_value = c.host_value[split_len:].clone()
        c.parent = new
        new.children[child_key(c.key.token_ids, 0, page, extra)] = c
        self.num_nodes += 1
        self.nodes_by_id[new.id] = new
        if c.backup_ack is not None:
            self.split_pending_backup(c.backup_ack, c, new)
        if self.served_split:
            new.creation_time = c.creation_time
            c.last_access_time = self.clock()
        self._refresh(new)
        self._refresh(c)
        if c.evictable:
            self.evictor.on_change(c)
        self.hosts.touched(c)
        self.hosts.track_duplicate(new)
        return new

    def split_pending_backup(self, ack: int, old: TieredNode, new: TieredNode) -> None:
        """A node whose backup is in flight was split (``UpdatePendingBackupOnNodeSplit``):
        the ack now publishes both halves (``_replace_pending_write_through_node``)."""

    # ------------------------------------------------------------------ insert
    def insert(
        self,
        key: RadixKey,
        value: Tensor | None = None,
        priority: int = 0,
        inserted_len: int = 0,
        session_id: str | None = None,
    ) -> int:
        """``RadixCache.insert`` with tiers (module docstring): returns the tokens already in
        the tree; the slots of ``adopted`` ranges of that prefix now belong to the tree, the
        rest are duplicates for the caller to free. May back up nodes (host slots, device
        locks until the ack) and evict host leaves to make room for them. ``session_id`` is
        unused: the tiered cache records no KV events."""
        page = self.page_size
        key, tokens, value, n_tok = self._insert_input(key, value)
        self.adopted = []
        now = self.clock()
        node: TieredNode = self.root
        node.last_access_time = now
        if priority > node.priority:
            node.priority = priority
        extra = key.namespace
        common_prefix = self.matcher.common_prefix
        offset = 0
        while offset < n_tok:
            ck = child_key(tokens, offset, page, extra)
            child: TieredNode | None = node.children.get(ck)
            if child is None:
                leaf = self._new_node(key[offset:], value[offset:n_tok].clone(), node, priority)
                if self.tlru:
                    self._set_tlru_lengths(leaf, node)
                if self.storage_on:
                    leaf.hash_value = self.page_keys(leaf, node)
                node.children[ck] = leaf
                self.nodes_by_id[leaf.id] = leaf
                self.num_nodes += 1
                self.evictable_size_ += n_tok - offset
                self._refresh(leaf)
                self._refresh(node)
                if n_tok > inserted_len and self.count_hit(leaf):
                    self.backup_chain(leaf)
                return offset
            child.last_access_time = now
            n = common_prefix(child.key.token_ids, tokens, offset, page)
            if n < len(child.key):
                child = self._split_node(child, n)
            assert child is not None
            if priority > child.priority:
                child.priority = priority
            if child.value is None:
                self._unevict(child, value[offset : offset + n])
                adopted = self.adopted
                if adopted and adopted[-1][1] == offset:  # one range, as sglang records it
                    adopted[-1] = (adopted[-1][0], offset + n)
                else:
                    adopted.append((offset, offset + n))
            else:
                self._touch(child)
            offset += n
            if offset > inserted_len and self.count_hit(child):
                self.backup_chain(child)
            node = child
        return offset

    def _unevict(self, node: TieredNode, fresh: torch.Tensor) -> None:
        node.value = fresh.clone()
        n = len(node.key)
        if node.lock_ref > 0:
            self.protected_size_ += n
        else:
            self.evictable_size_ += n
        self._refresh(node)
        self.hosts.track_duplicate(node)
        assert node.parent is not None
        self._refresh(node.parent)

    def count_hit(self, node: TieredNode) -> bool:
        """``_inc_hit_count_and_check``: count an insert walk's hit (never under
        ``write_back``, never on a host-only node); whether it now needs a backup. The hit
        re-keys the node for the policies that read it (LFU, SLRU): the evictor is told."""
        if node.value is None or self.write_back:
            return False
        node.hit_count += 1
        if node.evictable:
            self.evictor.on_change(node)
        return node.host_value is None and node.hit_count >= self.threshold

    def backup_chain(self, node: TieredNode) -> int:
        """Back ``node`` up with its unbacked ancestors (``ops``)."""
        raise NotImplementedError

    def page_keys(self, node: TieredNode, parent: TieredNode) -> list[Any]:
        raise NotImplementedError

    # ------------------------------------------------------------------ device eviction
    def delete_leaf(self, node: TreeNode) -> int:
        """Evict a device leaf (module docstring); returns the device tokens freed."""
        n: TieredNode = node
        assert n.evictable, f"node {n.id} is not a device leaf"
        if n.host_value is not None:
            return self.demote(n)
        if self.write_back:
            return self.write_back_leaf(n)
        return self._delete_device_leaf(n)

    def demote(self, node: TieredNode) -> int:
        """Free ``node``'s device slots, keep it host-only (``_demote``)."""
        assert node.value is not None and node.host_value is not None
        self.allocator.free(node.value)
        n = len(node.key)
        node.value = None
        self.evictable_size_ -= n
        self._refresh(node)
        assert node.parent is not None
        self._refresh(node.parent)
        return n

    def _delete_device_leaf(self, node: TieredNode) -> int:
        """``_delete_unbacked_device_leaf``: free and unlink, then the tombstone cascade."""
        assert node.value is not None
        self.allocator.free(node.value)
        n = len(node.key)
        node.value = None
        self.evictable_size_ -= n
        parent = self.unlink(node)
        self._refresh(node)
        self._refresh(parent)
        self.hosts.delete_tombstones(parent)
        return n

    def write_back_leaf(self, node: TieredNode) -> int:
        raise NotImplementedError

    def node(self, node_id: int) -> TieredNode:
        return self.nodes_by_id[node_id]
