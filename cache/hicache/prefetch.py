"""The storage (L3) paths of the tiered cache: backups to storage, prefetch back to the host.

Mirrors sglang 0.5.23's ``UnifiedRadixCache`` in cache mode (``mem_cache/unified_radix_cache.py``):

* **storage write** (``write_backup_storage``, ``:1990-2020``): once a node's host copy is
  acked, its host slots and page keys go to storage; the node's host copy is pinned until the
  storage ack (``_drain_backup``, ``:3240-3260``);
* **prefetch** (``prefetch_from_storage``, ``:2081-2257``, called for a request when it joins
  the waiting queue, ``managers/scheduler.py:3342-3392``): the span past the request's match
  on both tiers, when at least ``storage_prefetch_threshold`` tokens and the host is not
  rate-limited (prefetches may hold at most half the host pool), pins the anchor's host copy
  and submits a hit query (``prefetch_tokens_occupied`` grows by the span);
* the **drains** of ``check_hicache_events`` (``_drain_storage_control_queues_impl``,
  ``:3010-3296``), each over the items queued before the drain began: a hit below the
  threshold, or of a terminated prefetch, revokes it; a hit is given host slots
  (``allocate_storage_hit``: evicting host leaves, partial down to the threshold) and read;
  each read batch's ack raises ``completed_tokens``; the final ack inserts what was read into
  the tree as host-only nodes (``_handle_prefetch_result`` -> ``insert_host``,
  ``unified_tree_core.py:2395-2489``) if the request did not take it first, and releases the
  host slots of pages read after the request took it; released slots go back to the host
  pool at the next drain;
* **admission** (``check_prefetch_progress``, ``:2391-2420``): ``best_effort`` takes what has
  landed at once; ``wait_complete`` waits for the final ack; ``timeout`` waits up to
  ``prefetch_timeout_base + pages * per_page`` s of (simulated) time from the first blocked
  poll (``_start_storage_prefetch_wait``), never while the last pages are in flight.
"""

from __future__ import annotations

from typing import Any

import torch

from radixbench.cache.hicache.node import TieredNode
from radixbench.cache.hicache.ops import TransferOps
from radixbench.cache.hicache.storage import page_keys
from radixbench.cache.key import RadixKey, child_key

__all__ = ["StorageOps"]


class StorageOps(TransferOps):
    """Storage writes and prefetch (module docstring). State: ``ongoing_prefetch`` (rid ->
    ``[anchor, key, host slots, op, anchor receipt, wait deadline]``), ``prefetch_loaded``
    (rid -> tokens the request's prefetch added to the host tier)."""

    prefetch_policy = "timeout"
    prefetch_threshold = 256
    timeout_base_s = 1.0
    timeout_per_ki_s = 0.25

    def reset_storage(self) -> None:
        self.ongoing_prefetch: dict[Any, list[Any]] = {}
        self.prefetch_loaded: dict[Any, int] = {}

    def page_keys(self, node: TieredNode, parent: TieredNode) -> list[Any]:
        prior = parent.hash_value[-1] if parent.hash_value and len(parent.key) else None
        return page_keys(node.key.token_ids, self.page_size, prior, node.key.namespace)

    def hash_span(self, key: RadixKey, last_hash: Any) -> list[Any]:
        return page_keys(key.token_ids, self.page_size, last_hash, key.namespace)

    @staticmethod
    def last_hash(node: TieredNode) -> Any:
        return node.hash_value[-1] if node.hash_value else None

    # ------------------------------------------------------------------ storage write
    def write_backup_storage(self, node: TieredNode) -> None:
        if node.host_value is None:
            return
        op_id = self.ctrl.write_storage(node.host_value, node.key.token_ids, node.hash_value)
        self.ongoing_backup[op_id] = (node, self.inc_host_lock_ref(node))

    # ------------------------------------------------------------------ prefetch
    def prefetch_from_storage(
        self, rid: Any, anchor: TieredNode, tokens: Any, storage_start: int, namespace: Any
    ) -> None:
        """Submit the prefetch of ``tokens`` (the span past the match ending at ``anchor``)."""
        if rid in self.ongoing_prefetch:
            return
        if not (anchor.host_value is not None or anchor is self.root):
            return
        page = self.page_size
        n = len(tokens) // page * page
        if n < self.prefetch_threshold or self.ctrl.prefetch_rate_limited():
            return
        key = RadixKey(tokens[:n], namespace)
        receipt = self.inc_host_lock_ref(anchor)
        op = self.ctrl.submit_prefetch(rid, key, self.last_hash(anchor), None).operation
        op.stats_requested_tokens = n
        op.storage_start = storage_start
        self.ongoing_prefetch[rid] = [anchor, key, None, op, receipt, None]
        self.ctrl.prefetch_tokens_occupied += n

    def revoke_prefetch(self, rid: Any) -> None:
        info = self.ongoing_prefetch.pop(rid, None)
        if info is None:
            return
        self.dec_host_lock_ref(info[0], info[4])
        self.ctrl.prefetch_tokens_occupied = max(
            0, self.ctrl.prefetch_tokens_occupied - len(info[1])
        )

    def check_prefetch_progress(self, rid: Any, now: float) -> bool:
        """Whether ``rid`` may be admitted now (module docstring); takes what has landed."""
        info = self.ongoing_prefetch.get(rid)
        if info is None:
            return True
        op = info[3]
        if not op.terminated:
            if self.prefetch_policy == "wait_complete":
                return False
            if self.prefetch_policy == "timeout":
                landed = (
                    op.host_indices is not None
                    and op.completed_tokens >= len(op.hash_value) * self.page_size
                )
                if info[5] is None:
                    info[5] = (
                        now
                        + self.timeout_base_s
                        + self.timeout_per_ki_s * op.stats_requested_tokens / 1024
                    )
                if landed or now <= info[5]:
                    return False
                op.deadline_expired = True
        self.ctrl.terminate_prefetch(op)
        if op.host_indices is None:
            self.revoke_prefetch(rid)
        else:
            self.handle_prefetch_result(op)
        return True

    def prefetch_deadline(self, rid: Any) -> float | None:
        """When a ``timeout`` wait of ``rid`` ends (s), once it started."""
        info = self.ongoing_prefetch.get(rid)
        return None if info is None else info[5]

    def pop_prefetch_loaded(self, rid: Any) -> int:
        return self.prefetch_loaded.pop(rid, 0)

    def handle_prefetch_result(self, op: Any) -> None:
        rid = op.handle
        anchor, key, host, _, receipt, _ = self.ongoing_prefetch[rid]
        done = op.completed_tokens
        inserted, dropped = self.insert_host(
            anchor, key[:done], host[:done], op.hash_value[: done // self.page_size]
        )
        if dropped:
            self.ctrl.append_host_mem_release(host[:done])
            loaded = 0
        else:
            self.hosts.free_host(host[:inserted])
            loaded = done - inserted
        self.dec_host_lock_ref(anchor, receipt)
        del self.ongoing_prefetch[rid]
        self.ctrl.prefetch_tokens_occupied -= len(key)
        self.prefetch_loaded[rid] = loaded

    def insert_host(
        self, anchor: TieredNode, key: RadixKey, host: torch.Tensor, hashes: list[Any]
    ) -> tuple[int, bool]:
        """``insert_host``: walk below ``anchor``; give host-less walked nodes the read slots
        (not under ``write_back``), add the rest as one host-only leaf. Returns the tokens
        whose read slots are duplicates, and whether the insert was dropped (the rest would
        hang under a node without a host copy)."""
        now = self.clock()
        anchor.last_access_time = now
        self._touch(anchor)
        node: TieredNode = anchor
        page = self.page_size
        tokens = key.token_ids
        total = len(tokens)
        offset = host_prefix = 0
        refilled = False
        extra = key.namespace
        while offset < total:
            child: TieredNode | None = node.children.get(child_key(tokens, offset, page, extra))
            if child is None:
                break
            child.last_access_time = now
            n = self.matcher.common_prefix(child.key.token_ids, tokens, offset, page)
            if n < len(child.key):
                child = self._split_node(child, n)
            assert child is not None
            self._touch(child)
            if not self.write_back:
                if child.host_value is None:
                    child.host_value = host[offset : offset + n].clone()
                    if child.hash_value is None:
                        child.hash_value = list(hashes[offset // page : (offset + n) // page])
                    self._refresh(child)
                    assert child.parent is not None
                    self._refresh(child.parent)
                    self.hosts.track_duplicate(child)
                    refilled = True
                else:
                    assert not refilled, "write-through host-prefix invariant broken"
                    host_prefix += n
            offset += n
            node = child
        matched = offset if self.write_back else host_prefix
        if offset == total:
            return matched, False
        if node is not self.root and node.host_value is None and not self.write_back:
            return matched, True
        leaf = self._new_node(key[offset:], None, node, node.priority)
        leaf.hash_value = list(hashes[offset // page :])
        leaf.host_value = host[offset:].clone()
        if self.tlru:
            self._set_tlru_lengths(leaf, node)
        node.children[child_key(tokens, offset, page, extra)] = leaf
        self.nodes_by_id[leaf.id] = leaf
        self.num_nodes += 1
        self._refresh(leaf)
        self._refresh(node)
        return matched, False

    # ------------------------------------------------------------------ drains
    def storage_queue_sizes(self) -> tuple[int, int, int, int]:
        c = self.ctrl
        return (
            c.prefetch_hit_queue.qsize(),
            c.ack_prefetch_queue.qsize(),
            c.ack_backup_queue.qsize(),
            c.host_mem_release_queue.qsize(),
        )

    def drain_storage(self, hits: int, acks: int, backups: int, releases: int) -> None:
        c = self.ctrl
        for _ in range(hits):
            self._hit(c.prefetch_hit_queue.get())
        for _ in range(acks):
            ack = c.ack_prefetch_queue.get()
            op = ack.operation
            info = self.ongoing_prefetch.get(op.handle)
            current = info is not None and info[3] is op
            if ack.completed_tokens is not None and current:
                op.completed_tokens = ack.completed_tokens
            if ack.completed_req:
                if current:
                    self.handle_prefetch_result(op)
                if op.host_indices is not None:
                    c.append_host_mem_release(op.host_indices[op.completed_tokens :])
        for _ in range(backups):
            op = c.ack_backup_queue.get()
            entry = self.ongoing_backup.pop(op.id, None)
            if entry is not None:
                self.dec_host_lock_ref(*entry)
        freed = [c.host_mem_release_queue.get() for _ in range(releases)]
        if freed:
            self.hosts.free_host(torch.cat(freed))

    def _hit(self, op: Any) -> None:
        rid = op.handle
        info = self.ongoing_prefetch.get(rid)
        if info is None:
            return
        if op.terminated or op.storage_hit_count < self.prefetch_threshold:
            self.revoke_prefetch(rid)
            return
        host, alloc_len = self.ctrl.allocate_storage_hit(
            op,
            op.storage_hit_count,
            allow_partial=True,
            min_tokens=self.prefetch_threshold,
            evict_host=self.evict_host,
        )
        if host is None:
            self.revoke_prefetch(rid)
            return
        op.storage_hit_count = alloc_len
        op.hash_value = op.hash_value[: alloc_len // self.page_size]
        op.host_indices = host
        info[2] = host
        self.ctrl.prefetch_buffer.put(op)
