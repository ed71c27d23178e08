"""Evictors: data structures that serve evictable leaves in a policy's order, registered by name.

An evictor never decides *what* is evictable — ``RadixCache`` keeps ``node.evictable`` exact and
calls ``on_change(node)`` whenever a node enters or leaves the evictable set, or its sort key may
have changed while in it. Every evictor must produce the same victims in the same order for the
same operation stream; the differential tests check this.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from typing import ClassVar, Protocol

from radixbench.cache.node import TreeNode
from radixbench.cache.policy import EvictionPolicy, SortKey


class EvictionHost(Protocol):
    """What an evictor may use of the cache."""

    num_evictable_leaves: int

    def collect_evictable_leaves(self) -> list[TreeNode]:
        """All unlocked leaves, by a full DFS of the tree (SGLang ``_collect_leaves``)."""
        ...

    def delete_leaf(self, node: TreeNode) -> int:
        """Free the leaf's KV slots and unlink it; returns tokens freed. Refreshes its parent."""
        ...


class Evictor(ABC):
    """Serves victims for ``RadixCache.evict``."""

    name: ClassVar[str]

    def __init__(self, policy: EvictionPolicy) -> None:
        self.policy = policy

    def on_change(self, node: TreeNode) -> None:  # noqa: B027 - optional hook
        """``node.evictable`` flipped, or its sort key may have changed while evictable."""

    @abstractmethod
    def evict(self, host: EvictionHost, num_tokens: int) -> list[TreeNode]:
        """Evict leaves until ``num_tokens`` tokens are freed or nothing is evictable.

        Mutates the tree through ``host.delete_leaf``. Returns the victims in eviction order.
        A parent whose last child was evicted and that is unlocked becomes a candidate at once.
        """

    def members(self, host: EvictionHost) -> set[int]:
        """Ids of the nodes this evictor would consider now (for ``check_integrity``)."""
        return {n.id for n in host.collect_evictable_leaves()}

    def reset(self) -> None:  # noqa: B027 - optional hook
        """Forget all state (the tree was reset)."""


class HeapifyEvictor(Evictor):
    """SGLang's classic ``RadixCache.evict`` @ a7ec6b97: on every call, collect all evictable
    leaves by DFS, ``heapq.heapify`` them by sort key, pop; push a parent once it becomes an
    unlocked leaf. O(N) per call in the number of tree nodes, however few tokens are asked for.
    """

    name = "heapify"

    def evict(self, host: EvictionHost, num_tokens: int) -> list[TreeNode]:
        key = self.policy.key
        heap: list[tuple[SortKey, TreeNode]] = [
            (key(n), n) for n in host.collect_evictable_leaves()
        ]
        heapq.heapify(heap)
        victims: list[TreeNode] = []
        evicted = 0
        while evicted < num_tokens and heap:
            _, node = heapq.heappop(heap)
            if node.lock_ref > 0:
                continue
            parent = node.parent
            evicted += host.delete_leaf(node)
            victims.append(node)
            if parent is not None and parent.evictable:
                heapq.heappush(heap, (key(parent), parent))
        return victims


class PersistentHeapEvictor(Evictor):
    """A heap kept up to date across calls: SGLang PR #6907's idea, with its review defects fixed.

    Every time a node becomes evictable, or its sort key changes while evictable, an entry
    ``(*key, version, node)`` (flat, one indirection less per compare) is pushed and
    ``node.heap_version`` is bumped; entries whose version
    is not the node's current one, or whose node is no longer evictable (locked, got a child,
    evicted), are stale and dropped when popped. So only evictable leaves are ever evicted (PR
    #6907 popped internal nodes), sizes are the cache's exact counters (it mis-accounted
    ``evictable_size_``), and the heap is rebuilt from live entries once stale ones outnumber them
    (it kept stale entries forever). ``evict(k)`` costs O((k + s) log H) for s stale pops.
    """

    name = "persistent-heap"

    def __init__(self, policy: EvictionPolicy) -> None:
        super().__init__(policy)
        self.heap: list[tuple] = []  # (*sort_key, version, node)

    def on_change(self, node: TreeNode) -> None:
        node.heap_version += 1
        if node.evictable:
            heapq.heappush(self.heap, (*self.policy.key(node), node.heap_version, node))

    def _compact(self, live: int) -> None:
        if len(self.heap) > 2 * live + 64:
            self.heap = [e for e in self.heap if e[-1].evictable and e[-2] == e[-1].heap_version]
            heapq.heapify(self.heap)

    def evict(self, host: EvictionHost, num_tokens: int) -> list[TreeNode]:
        heap = self.heap
        victims: list[TreeNode] = []
        evicted = 0
        while evicted < num_tokens and heap:
            *_, version, node = heapq.heappop(heap)
            if version != node.heap_version or not node.evictable:
                continue  # stale entry
            # delete_leaf refreshes the parent, which pushes it here if it became evictable.
            evicted += host.delete_leaf(node)
            victims.append(node)
        self._compact(host.num_evictable_leaves)
        return victims

    def members(self, host: EvictionHost) -> set[int]:
        return {e[-1].id for e in self.heap if e[-1].evictable and e[-2] == e[-1].heap_version}

    def reset(self) -> None:
        self.heap = []


class LRUListEvictor(PersistentHeapEvictor):
    """An intrusive doubly linked list of evictable leaves, after vLLM's
    ``FreeKVCacheBlockQueue``, with a side heap for the leaves that arrive out of order.

    Exact eviction order: the same as every other evictor — ascending policy key, ties by node
    id — i.e. for LRU ascending ``(last_access_time, id)``. How it is kept, for LRU:

    * The list holds leaves sorted by key. A leaf that becomes evictable or is touched
      (``match_prefix`` / ``insert`` set ``last_access_time`` to the newest clock tick) has a key
      greater than the tail's, so it is unlinked (O(1)) and appended at the tail (O(1)): this is
      the common path.
    * A leaf that becomes evictable *without* being touched — a parent whose last child was just
      evicted, or a path unlocked by ``dec_lock_ref`` — carries an old access time, older than the
      tail's. It is not walked into place (that would cost O(list length)); it is pushed on a
      version-stamped side heap (the persistent heap's machinery), O(log s) for s such nodes.
    * ``evict`` pops the smaller of the list head (O(1)) and the side heap's top (stale entries
      dropped lazily), so the victims come in exactly the global key order.

    Non-monotone policies (``monotone_on_touch`` false: LFU, FIFO, MRU, FILO, Priority, SLRU),
    whose keys do not grow with each touch, cannot keep the list sorted by tail appends: for them
    this evictor falls back explicitly to the persistent heap (every node goes to the side heap,
    the list stays empty), so it behaves — and costs — exactly as ``persistent-heap``.
    """

    name = "lru-list"

    def __init__(self, policy: EvictionPolicy) -> None:
        super().__init__(policy)
        self.use_list = policy.monotone_on_touch
        self.reset()

    def reset(self) -> None:
        super().reset()
        self.head: TreeNode | None = None
        self.tail: TreeNode | None = None
        self.list_len = 0

    def _unlink(self, node: TreeNode) -> None:
        prev, nxt = node.prev, node.next
        if prev is None:
            self.head = nxt
        else:
            prev.next = nxt
        if nxt is None:
            self.tail = prev
        else:
            nxt.prev = prev
        node.prev = node.next = None
        self.list_len -= 1

    def _in_list(self, node: TreeNode) -> bool:
        return node.prev is not None or self.head is node

    def on_change(self, node: TreeNode) -> None:
        node.heap_version += 1  # invalidates any side-heap entry
        if self._in_list(node):
            self._unlink(node)
        if not node.evictable:
            return
        tail = self.tail
        key = self.policy.key
        if self.use_list and (tail is None or key(node) > key(tail)):
            node.prev, node.next = tail, None
            if tail is None:
                self.head = node
            else:
                tail.next = node
            self.tail = node
            self.list_len += 1
        else:
            heapq.heappush(self.heap, (*key(node), node.heap_version, node))

    def evict(self, host: EvictionHost, num_tokens: int) -> list[TreeNode]:
        heap = self.heap
        key = self.policy.key
        victims: list[TreeNode] = []
        evicted = 0
        while evicted < num_tokens:
            while heap and (heap[0][-2] != heap[0][-1].heap_version or not heap[0][-1].evictable):
                heapq.heappop(heap)  # stale side-heap entry
            head = self.head
            if head is None and not heap:
                break
            if head is not None and (not heap or key(head) < heap[0][:-2]):
                node = head  # delete_leaf -> on_change unlinks it
            else:
                node = heapq.heappop(heap)[-1]
            evicted += host.delete_leaf(node)
            victims.append(node)
        self._compact(host.num_evictable_leaves - self.list_len)
        return victims

    def members(self, host: EvictionHost) -> set[int]:
        ids = super().members(host)
        node = self.head
        while node is not None:
            ids.add(node.id)
            node = node.next
        return ids


EVICTORS: dict[str, type[Evictor]] = {
    cls.name: cls for cls in (HeapifyEvictor, PersistentHeapEvictor, LRUListEvictor)
}


def make_evictor(name: str, policy: EvictionPolicy) -> Evictor:
    """Instantiate an evictor by name; raises ``ValueError`` naming the known ones."""
    try:
        return EVICTORS[name](policy)
    except KeyError:
        raise ValueError(f"unknown evictor {name!r}; known: {', '.join(EVICTORS)}") from None
