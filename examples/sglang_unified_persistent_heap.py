"""A patch to the cache sglang 0.5.23 serves, for review: FULL eviction keeps a persistent heap.

sglang 0.5.23's scheduler builds a ``UnifiedRadixCache`` (``mem_cache/unified_radix_cache.py``).
With the Python tree core (``unified_cache/unified_tree_core.py``: what a Python PR to 0.5.23
changes; ``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=python``, radixbench's ``sglang-python``) every
eviction walk starts with ``FullComponent._evict_device_start`` (``unified_cache/components/
full.py:209-217``), which builds ``(key, node)`` for every node of ``evictable_device_leaves`` and
heapifies them: O(E) per ``evict`` in evictable leaves E, however few victims it needs. This
subclass keeps that heap across calls instead — the idea of SGLang PR #6907, carried to the
served cache — so that radixbench can run it against upstream as it stands:

    radixbench compare eviction-pressure --impl sglang-python,\\
        sglang-python:examples/sglang_unified_persistent_heap.py:PersistentHeapUnifiedRadixCache

This is radixbench's own code, not a copy of SGLang's or of the PR. How it works:

* ``PersistentHeapUnifiedRadixCache`` passes SGLang's own seam,
  ``CacheInitParams.component_registry_override`` (``unified_radix_cache.py:217-224``), so the
  FULL component is :class:`PersistentHeapFullComponent`. A custom component makes SGLang's
  own rules build the Python tree core (``tree_core_registry.py:53-54``: "custom components
  require the Python TreeCore"), so the class runs on it under ``sglang:`` too (radixbench
  reports the core each cache built); compare it with ``sglang-python``, its unpatched self.
  Were another core built (it evicts in compiled code and never calls the component's heap),
  the constructor raises ``ValueError``.
* A node enters ``evictable_device_leaves`` only through ``_update_evictable_leaf_sets``
  (``unified_tree_core.py:1592-1597``: ``set.add``). The component replaces that set by a
  ``set`` subclass whose ``add`` of a new member pushes one entry ``(key, node)`` with the key
  upstream's heap would use (``_session_ref_eviction_strategy``, ``full.py:205-207``). Removals
  (``discard``: a lock, a new child, an eviction) are not tracked: a popped entry whose node is
  no longer in the set is dropped. ``reset`` (``unified_tree_core.py:518`` makes a new set) puts
  the tracking back on the new set.
* A touch (match / insert) changes a leaf's key without telling anyone, so a popped entry's key
  is re-read; if it changed, the entry goes back with the current key and popping goes on. This
  is exact when a touch can only make a key larger. LRU, LFU, SLRU and priority keys read
  ``last_access_time``, ``hit_count`` and ``priority``, which only grow (the clock adds 1 per
  reading, ``components/base.py:161-165``; a match stamps its path with the reading minus 1e-5
  per level, ``unified_tree_core.py:1030-1033``, still larger than any earlier reading on paths
  shallower than 100,000 nodes; ``priority`` is raised with ``max``, ``:1297``); FIFO / FILO keys
  (``creation_time``) never change. MRU (``-last_access_time``) and T-LRU (whose TEL-safe flag
  can flip both ways) shrink, and session references go up and down: for those the component
  runs upstream's per-call heap unchanged.
* The walk (``_evict_components``, ``unified_radix_cache.py:1001-1040``) asks for one victim at a
  time (``_evict_device_next_node``, ``full.py:219-244``); a parent that becomes an evictable
  leaf is pushed by the set when it enters, where upstream pushes it on the next request. A
  victim chosen but not evicted (a write-back backup declined) is pushed back when the walk
  ends, as upstream rebuilds its heap on the next call.
* Stale entries are compacted away (the heap rebuilt from the set) once they outnumber the
  live ones: memory stays O(E) between evictions too.

Victims come out in upstream's order: the heap holds upstream's keys, and a tie of keys falls
back to ``UnifiedTreeNode.__lt__`` (``last_access_time``, ``unified_tree_core.py:175``) in both;
the keys of two evictable leaves are never equal on radixbench's paths (readings are distinct;
a split shares a creation time only along one path, which holds one evictable leaf).
``radixbench compare``'s equivalence check verifies the order request by request, and
``tests/examples/test_sglang_unified_persistent_heap.py`` victim by victim for every policy.
Cost: upstream O(E) per ``evict``; this O((k + s) log H) for k victims and s stale pops from a
heap of H entries, plus one heap push per leaf that becomes evictable.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from sglang.srt.mem_cache.evict_policy import MRUStrategy, TLRUStrategy
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.components.full import FullComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

FULL = ComponentType.FULL


class _TrackedLeaves(set):
    """``evictable_device_leaves`` that reports each node entering it to ``entered``."""

    __slots__ = ("entered",)

    def __init__(self, nodes: Iterable[Any], entered: Callable[[Any], None]) -> None:
        super().__init__(nodes)
        self.entered = entered

    def add(self, node: Any) -> None:
        if node not in self:
            set.add(self, node)
            self.entered(node)


class PersistentHeapFullComponent(FullComponent):
    """SGLang's FULL component whose device eviction pops one heap kept across calls."""

    def track_leaves(self) -> None:
        """Put the tracking on the tree core's current ``evictable_device_leaves`` and build
        the heap from its members (O(E), once per tree, not per evict). Mutates the tree
        core's set attribute and this component's heap."""
        core = self.tree_core
        self._ensure_eviction_strategy()
        self.persistent = not (
            isinstance(core.eviction_strategy, (MRUStrategy, TLRUStrategy))
            or self.cache.enable_session_radix_cache
        )
        self._heap: list[tuple[Any, Any]] = []
        self._deferred: list[Any] = []
        entered = self._push if self.persistent else _ignore
        core.evictable_device_leaves = _TrackedLeaves(core.evictable_device_leaves, entered)
        if self.persistent:
            self._rebuild()

    def _rebuild(self) -> None:
        key = self.session_ref_eviction_strategy
        heap = self._heap
        heap[:] = [(key(n), n) for n in self.tree_core.evictable_device_leaves]
        heapq.heapify(heap)

    def _push(self, node: Any) -> None:
        """``node`` entered the set (it is a member already)."""
        if len(self._heap) > 2 * len(self.tree_core.evictable_device_leaves) + 64:
            self._rebuild()  # compaction: the new member is in the set, so in the heap
        else:
            heapq.heappush(self._heap, (self.session_ref_eviction_strategy(node), node))

    def _evict_device_start(self, request_cnt: int) -> None:
        if not isinstance(self.tree_core.evictable_device_leaves, _TrackedLeaves):
            self.track_leaves()  # the tree core was reset on its own
        if not self.persistent:
            super()._evict_device_start(request_cnt)
            return
        self._evict_device_request_cnt = request_cnt
        self._evict_device_last_node = None

    def _evict_device_next_node(
        self,
        tracker: dict[Any, int],
        device_frees: dict[Any, list[Any]],
        host_frees: dict[Any, list[Any]],
        cache_actions: list[Any],
    ) -> Any:
        if not self.persistent:
            return super()._evict_device_next_node(tracker, device_frees, host_frees, cache_actions)
        leaves = self.tree_core.evictable_device_leaves
        last = self._evict_device_last_node
        if last is not None and last in leaves:
            self._deferred.append(last)  # chosen, not evicted: not again in this walk
        self._evict_device_last_node = None
        heap, key, ct = self._heap, self.session_ref_eviction_strategy, self.component_type
        while tracker[ct] < self._evict_device_request_cnt and heap:
            stored, node = heap[0]
            if node not in leaves or node in self._deferred:
                heapq.heappop(heap)  # stale: locked, grew a child, evicted; or deferred
                continue
            current = key(node)
            if current != stored:  # touched since it was pushed: its key only grew
                heapq.heapreplace(heap, (current, node))
                continue
            heapq.heappop(heap)
            self._evict_device_last_node = node
            return node.id
        return None

    def _evict_device_end(self) -> None:
        if not self.persistent:
            super()._evict_device_end()
            return
        leaves = self.tree_core.evictable_device_leaves
        last = self._evict_device_last_node
        for node in [*self._deferred, *([last] if last is not None else [])]:
            if node in leaves:
                heapq.heappush(self._heap, (self.session_ref_eviction_strategy(node), node))
        self._deferred.clear()
        self._evict_device_last_node = None


def _ignore(node: Any) -> None:
    pass


class PersistentHeapUnifiedRadixCache(UnifiedRadixCache):
    """sglang 0.5.23's ``UnifiedRadixCache`` with :class:`PersistentHeapFullComponent` as its
    FULL component (Python tree core only, which SGLang builds for it; see the module
    docstring). Raises ``ValueError`` if another tree core was built."""

    def __init__(self, params: Any) -> None:
        override = {**(params.component_registry_override or {}), FULL: PersistentHeapFullComponent}
        super().__init__(replace(params, component_registry_override=override))
        if not isinstance(self.tree_core, UnifiedTreeCore):
            raise ValueError(
                "PersistentHeapUnifiedRadixCache patches the Python tree core's FULL eviction; "
                f"this cache runs {type(self.tree_core).__name__} (use sglang-python:...)"
            )
        self.components[FULL].track_leaves()

    def reset(self) -> None:
        super().reset()
        full = getattr(self, "components", {}).get(FULL)
        if isinstance(full, PersistentHeapFullComponent) and hasattr(full, "persistent"):
            full.track_leaves()
