"""A patch to SGLang's ``RadixCache`` for review: ``evict`` keeps a persistent heap.

The idea of SGLang PR #6907 — keep the eviction heap across calls instead of rebuilding it on
every ``evict`` — written as a subclass of the installed SGLang's ``RadixCache`` (sglang 0.5.23),
so that radixbench can run it against upstream as it stands:

    radixbench compare eviction-pressure \
        --impl sglang,sglang:examples/sglang_persistent_heap.py:PersistentHeapRadixCache

This is radixbench's own code, not a copy of the PR. How it works:

* Every time a node enters ``evictable_leaves`` (SGLang's ``_update_leaf_status`` adds it), its
  version stamp is bumped and one entry ``(priority, seq, version, node)`` is pushed, with the
  eviction strategy's priority at that moment. ``seq`` is a push counter, so entries never
  compare nodes.
* ``evict`` pops entries; an entry is dropped when its node left ``evictable_leaves`` or was
  pushed again since (version). A touch (match / insert) changes a leaf's priority without
  telling the cache, so the popped entry's priority is re-read: if it changed, the entry is
  pushed back with the current one and popping goes on. This lazy re-check is exact when a touch
  can only make a node's priority larger (LRU, LFU, FIFO, FILO, priority, SLRU: access times,
  hit counts and priorities only grow). MRU's priority (``-last_access_time``) shrinks on a
  touch, so for MRU ``evict`` falls back to upstream's.
* Stale entries are compacted away once they outnumber the live ones.

Cost: upstream heapifies every evictable leaf on every call, O(E); this pays O((k + s) log H)
for k victims and s stale pops. Victims come out in exactly upstream's order (the equivalence
check of ``radixbench compare`` verifies it request by request).
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Any

from sglang.srt.mem_cache.base_prefix_cache import EvictParams, EvictResult
from sglang.srt.mem_cache.evict_policy import MRUStrategy
from sglang.srt.mem_cache.radix_cache import RadixCache


class PersistentHeapRadixCache(RadixCache):
    """SGLang's ``RadixCache`` with a persistent eviction heap (see the module docstring)."""

    def reset(self) -> None:
        self._heap: list[tuple[Any, int, int, Any]] = []
        self._versions: dict[Any, int] = {}
        self._seq = itertools.count()
        super().reset()

    def _update_leaf_status(self, node: Any) -> None:
        was_leaf = node in self.evictable_leaves
        super()._update_leaf_status(node)
        if not was_leaf and node in self.evictable_leaves:
            version = self._versions.get(node, 0) + 1
            self._versions[node] = version
            priority = self.eviction_strategy.get_priority(node)
            heapq.heappush(self._heap, (priority, next(self._seq), version, node))

    def evict(self, params: EvictParams) -> EvictResult:
        if self.disable:
            return EvictResult()
        if isinstance(self.eviction_strategy, MRUStrategy):
            return super().evict(params)  # a touch lowers MRU's priority: no lazy re-check
        start_time = time.perf_counter()
        heap, leaves, versions = self._heap, self.evictable_leaves, self._versions
        get_priority = self.eviction_strategy.get_priority
        num_evicted = 0
        while num_evicted < params.num_tokens and heap:
            priority, _, version, node = heapq.heappop(heap)
            if node not in leaves or versions.get(node) != version:
                continue  # stale: locked, grew a child, evicted, or pushed again since
            current = get_priority(node)
            if current != priority:  # touched since it was pushed
                heapq.heappush(heap, (current, next(self._seq), version, node))
                continue
            self.token_to_kv_pool_allocator.free_segment(node.value, start_pos=0)
            num_evicted += len(node.value)
            self._delete_leaf(node)  # its parent may enter evictable_leaves: pushed there
            versions.pop(node, None)
            self.kv_events.record_remove(node)
        if len(heap) > 2 * len(leaves) + 64:
            live = [e for e in heap if e[3] in leaves and versions.get(e[3]) == e[2]]
            heapq.heapify(live)
            self._heap = live
        self.update_eviction_metrics(num_evicted, start_time)
        return EvictResult(num_tokens_evicted=num_evicted)
