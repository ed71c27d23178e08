"""Device<->host transfers of the tiered cache: backup, load-back, host eviction, ack drains.

Mirrors the HiCache paths of sglang 0.5.23's ``UnifiedRadixCache``
(``mem_cache/unified_radix_cache.py``), FULL component, cache mode:

* **backup** (``_execute_and_commit_kv_backup`` / ``_execute_kv_backup``, ``:1681-1762``):
  for each node of the chain, ancestors first, skip one already backed; when the host pool is
  short, evict host leaves for the shortfall and stop the chain if that fails; the controller
  allocates host slots and queues the copy (submitted as one operation at the next
  ``start_writing``); the node gets its host slots at once, is marked pending under its own id
  and, for ``write_through`` (not ``write_back``), device-locked until its ack
  (``_track_write_through_node``);
* **acks** drain in FIFO order, only the prefix of completed ones (``_count_ready_acks``,
  ``writing_check`` / ``loading_check``, ``:3404-3584``): a write ack clears the pending mark
  (the node becomes a tracked duplicate), unlocks, and with storage starts the node's L3
  write (``_finish_write_through_ack``, ``:1803-1818``); a load ack unlocks the loaded path and
  its host pin (``finish_load_back``);
* **write_back** backs a device leaf up inside ``evict``, synchronously, then demotes it; if
  the host cannot take it, drops its subtree (``_evict_components``, ``:1002-1027``,
  ``drop_subtree_no_host``, ``unified_tree_core.py:1825-1876``); every ``evict`` ends with a
  blocking ``writing_check`` (``_evict``, ``:833-837``);
* **load-back** (``load_back`` / ``_load_back_transfers``, ``:1820-1937``, ``init_load_back``,
  ``:3586-3624``): pin the best node's host copy, lock its path, collect the host-only chain
  above it (refused when another load holds one of its nodes), skip it below
  ``load_back_threshold`` tokens, evict device leaves for the shortfall, allocate device slots
  and queue the copy; the nodes are device-resident at once but stay locked until the load's
  ack, which the simulator gives when the copy has run (the forward pass that reads them waits
  for it, not the tree).
"""

from __future__ import annotations

from typing import Any

import torch

from radixbench.cache.hicache.node import TieredNode
from radixbench.cache.hicache.tree import TieredTree
from radixbench.cache.interface import EvictResult

__all__ = ["TransferOps"]


class TransferOps(TieredTree):
    """Backup, load-back, host eviction and ack drains (module docstring). State:
    ``ctrl`` (:class:`~radixbench.cache.hicache.controller.SimController`),
    ``ongoing_write_through`` (ack id -> ``[node, locked, published nodes]``),
    ``ongoing_load_back`` (anchor id -> ``(node, host lock receipt)``)."""

    ctrl: Any
    load_back_threshold = 10

    def reset_transfers(self) -> None:
        self.ongoing_write_through: dict[int, list[Any]] = {}
        self.ongoing_load_back: dict[int, tuple[TieredNode, int | None]] = {}
        self.ongoing_backup: dict[int, tuple[TieredNode, int | None]] = {}

    # ------------------------------------------------------------------ backup
    def backup_chain(self, node: TieredNode) -> int:
        """Write-through backup of ``node`` and its unbacked ancestors, ancestors first
        (``_build_backup_kv_action``); returns the host slots of the last node written."""
        chain = [node]
        a = node.parent
        while a is not None and a is not self.root and a.host_value is None:
            chain.append(a)
            a = a.parent
        chain.reverse()
        return self.execute_backup(chain, write_back=False)

    def execute_backup(self, chain: list[TieredNode], write_back: bool) -> int:
        written = 0
        pool = self.hosts.pool
        for node in chain:
            if node.host_value is not None:
                continue
            dev = node.value
            assert dev is not None, f"backup of node {node.id} without device KV"
            avail = pool.available_size()
            if avail < len(dev):
                needed = len(dev) - avail
                if self.evict_host(needed) < needed:
                    return 0
            host = self.ctrl.write(dev, node_id=node.id, flush=False)
            if host is None:
                return 0
            node.host_value = host.clone()
            locked = False
            if not write_back:
                self.inc_lock_ref(node)
                locked = True
            node.backup_ack = node.id
            self.ongoing_write_through[node.id] = [node, locked, [node]]
            self._refresh(node)
            written = len(host)
        return written

    def split_pending_backup(self, ack: int, old: TieredNode, new: TieredNode) -> None:
        pending = self.ongoing_write_through.get(ack)
        if pending is None:
            return
        published = pending[2]
        if any(n is old for n in published):
            pending[2] = [x for n in published for x in ((new, old) if n is old else (n,))]

    def finish_write(self, ack_id: int) -> None:
        """``_finish_write_through_ack``."""
        node, locked, published = self.ongoing_write_through.pop(ack_id)
        for n in published:
            if n.backup_ack == ack_id:
                n.backup_ack = None
                self.hosts.track_duplicate(n)
        if locked:
            self.dec_lock_ref(node)
        if self.storage_on:
            for n in published:
                self.write_backup_storage(n)

    def write_backup_storage(self, node: TieredNode) -> None:
        raise NotImplementedError

    def writing_check(self, write_back: bool = False, finish_count: int | None = None) -> None:
        ctrl = self.ctrl
        if write_back:
            ctrl.start_writing()
            while self.ongoing_write_through:
                for ack in ctrl.ack_write_queue:
                    ack.finish_event.synchronize()
                    for ack_id in ack.node_ids:
                        if ack_id in self.ongoing_write_through:
                            self.finish_write(ack_id)
                ctrl.ack_write_queue.clear()
            return
        if finish_count is None:
            finish_count = _ready(ctrl.ack_write_queue)
        while finish_count > 0:
            ack = ctrl.ack_write_queue.pop(0)
            for ack_id in ack.node_ids:
                self.finish_write(ack_id)
            finish_count -= 1

    def write_back_leaf(self, node: TieredNode) -> int:
        """A device leaf without a host copy under ``write_back``: back it up (blocking), then
        demote it; when the host cannot take it, drop its subtree."""
        if self.execute_backup([node], write_back=True) > 0:
            self.writing_check(write_back=True)
            return self.demote(node)
        return self.drop_subtree(node)

    def drop_subtree(self, node: TieredNode) -> int:
        """``drop_subtree_no_host``: delete ``node`` and its host-only subtree when nothing in
        it is locked or in flight; returns the device tokens freed (0 when declined)."""
        stack = list(node.children.values())
        desc: list[TieredNode] = []
        if node.load_ack is not None or node.lock_ref or node.host_lock_ref:
            return 0
        while stack:
            cur: TieredNode = stack.pop()
            if (
                cur.backup_ack is not None
                or cur.load_ack is not None
                or cur.lock_ref
                or cur.host_lock_ref
            ):
                return 0
            desc.append(cur)
            stack.extend(cur.children.values())
        for d in reversed(desc):
            if d.host_value is not None:
                self.hosts.free_host(d.host_value)
                d.host_value = None
            self.unlink(d)
            self._refresh(d)
        return self._delete_device_leaf(node)

    def evict(self, num_tokens: int) -> EvictResult:
        """Device eviction (``RadixCache.evict`` over device leaves); under ``write_back``
        ending with a blocking ``writing_check`` (``_evict``)."""
        result = super().evict(num_tokens)
        if self.write_back:
            self.writing_check(write_back=True)
        return result

    # ------------------------------------------------------------------ host eviction
    def evict_host(self, num_tokens: int) -> int:
        """Free at least ``num_tokens`` host slots if possible (``evict_host`` ->
        ``drive_host_eviction``); returns the slots freed. Timed as op ``evict_host``."""
        victims, freed = self.hosts.evict(num_tokens)
        self.host_victims.extend(victims)
        return freed

    # ------------------------------------------------------------------ load-back
    def init_load_back(
        self, best_node: TieredNode, host_hit_length: int, last_node: TieredNode
    ) -> tuple[int, TieredNode]:
        """``init_load_back``: load the host-only chain ending at ``best_node`` when the match
        had a host hit; ``(tokens loaded, the request's new last device node)``."""
        if (best_node.value is None or host_hit_length > 0) and self.load_back_node(best_node):
            n = 0
            cur: Any = best_node
            while cur is not last_node:
                n += len(cur.value)
                cur = cur.parent
            if n:
                return n, best_node
        return 0, last_node

    def load_back_node(self, node: TieredNode, mem_quota: int | None = None) -> bool:
        """``load_back`` of ``node``'s host-only chain (module docstring); whether it started."""
        host_lock = self.inc_host_lock_ref(node)
        delta = self.inc_lock_ref(node)
        chain: list[TieredNode] = []
        cur: Any = node
        while cur.value is None and cur.parent is not None:
            chain.append(cur)
            cur = cur.parent
        chain.reverse()
        if any(n.load_ack not in (None, node.id) for n in chain):
            chain = []
        tokens = sum(len(n.host_value) for n in chain)
        if tokens < max(1, self.load_back_threshold) or (
            mem_quota is not None and tokens - delta > mem_quota
        ):
            self.dec_lock_ref(node)
            self.dec_host_lock_ref(node, host_lock)
            return False
        avail = self.allocator.available_size()
        if avail < tokens:
            self.evict(tokens - avail)
            if self.allocator.available_size() < tokens:
                self.dec_lock_ref(node)
                self.dec_host_lock_ref(node, host_lock)
                return False
        host = torch.cat([n.host_value for n in chain])
        device = self.ctrl.load(host, node_id=node.id)
        self.dec_lock_ref(node)
        if device is None:
            self.dec_host_lock_ref(node, host_lock)
            return False
        off = 0
        for n in chain:
            if self.write_back:
                n.load_ack = node.id
            k = len(n.host_value)
            n.value = device[off : off + k].clone()
            off += k
            if n.lock_ref > 0:
                self.protected_size_ += k
            else:
                self.evictable_size_ += k
            self._refresh(n)
        self._refresh(node)
        self.inc_lock_ref(node)
        self.ongoing_load_back[node.id] = (node, host_lock)
        return True

    def loading_check(self, finish_count: int | None = None) -> None:
        ctrl = self.ctrl
        if finish_count is None:
            finish_count = _ready(ctrl.ack_load_queue)
        while finish_count > 0:
            ack = ctrl.ack_load_queue.pop(0)
            for ack_id in ack.node_ids:
                node, host_lock = self.ongoing_load_back.pop(ack_id)
                self.dec_lock_ref(node)
                self.dec_host_lock_ref(node, host_lock)
                cur: Any = node
                while cur is not None and cur is not self.root:
                    if self.write_back:
                        if cur.load_ack != ack_id:
                            cur = cur.parent
                            continue
                        cur.load_ack = None
                    self.hosts.track_duplicate(cur)
                    cur = cur.parent
            finish_count -= 1

    def start_loading(self) -> int:
        """Start the queued loads (``ready_to_load_host_cache``); the layer slot or -1."""
        return int(self.ctrl.start_loading())

    # ------------------------------------------------------------------ events
    def check_events(self) -> None:
        """``check_hicache_events``: submit pending backups, then drain the completed write
        and load acks and the storage queues, each as it stood before the drain began."""
        ctrl = self.ctrl
        ctrl.start_writing()
        writes = _ready(ctrl.ack_write_queue)
        loads = _ready(ctrl.ack_load_queue)
        sizes = self.storage_queue_sizes() if self.storage_on else None
        self.writing_check(finish_count=writes)
        self.loading_check(finish_count=loads)
        if sizes is not None:
            self.drain_storage(*sizes)

    def storage_queue_sizes(self) -> tuple[int, int, int, int]:
        raise NotImplementedError

    def drain_storage(self, hits: int, acks: int, backups: int, releases: int) -> None:
        raise NotImplementedError


def _ready(acks: list[Any]) -> int:
    """Completed acks at the head of ``acks`` (``_count_ready_acks``)."""
    n = 0
    for ack in acks:
        if not ack.finish_event.query():
            break
        n += 1
    return n
