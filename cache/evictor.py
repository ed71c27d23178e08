"""Evictors: data structures that serve evictable leaves in a policy's order, registered by name.

An evictor never decides *what* is evictable — ``RadixCache`` keeps ``node.evictable`` exact and
calls ``on_change(node)`` whenever a node enters or leaves the evictable set, or its sort key may
have changed while in it. Every evictor must produce the same victims in the same order for the
same operation stream; the differential tests check this.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import ClassVar, Protocol

from radixbench.cache.node import TreeNode
from radixbench.cache.policy import FIELD_BITS, EvictionPolicy, SortKey


class EvictionHost(Protocol):
    """What an evictor may use of the cache."""

    num_evictable_leaves: int

    def collect_evictable_leaves(self) -> list[TreeNode]:
        """All unlocked leaves, by a full DFS of the tree (SGLang ``_collect_leaves``)."""
        ...

    def delete_leaf(self, node: TreeNode) -> int:
        """Free the leaf's KV slots and unlink it; returns tokens freed. Refreshes its parent.

        0 when the leaf could not be evicted and stays as it was (HiCache ``write_back``: no
        host room and the subtree drop declined); the evictor then skips it for the rest of
        the call and serves it again in the next one, as sglang does."""
        ...


class Evictor(ABC):
    """Serves victims for ``RadixCache.evict``."""

    name: ClassVar[str]

    def __init__(self, policy: EvictionPolicy) -> None:
        self.policy = policy

    def on_change(self, node: TreeNode) -> None:  # noqa: B027 - optional hook
        """``node.evictable`` flipped, or its sort key may have changed while evictable."""

    @abstractmethod
    def evict(self, host: EvictionHost, num_tokens: int) -> tuple[list[TreeNode], int]:
        """Evict leaves until ``num_tokens`` tokens are freed or nothing is evictable.

        Mutates the tree through ``host.delete_leaf``. Returns the victims in eviction order and
        the tokens they held. A parent whose last child was evicted and that is unlocked becomes
        a candidate at once. A leaf ``delete_leaf`` declines (frees 0 tokens) is no victim: it
        is not served again in this call and stays a candidate for the next one (sglang 0.5.23
        pops it from the heap built for the call and goes on, ``unified_radix_cache.py:
        1024-1056``, ``components/full.py:209-238``).
        """

    def members(self, host: EvictionHost) -> set[int]:
        """Ids of the nodes this evictor would consider now (for ``check_integrity``)."""
        return {n.id for n in host.collect_evictable_leaves()}

    def reset(self) -> None:  # noqa: B027 - optional hook
        """Forget all state (the tree was reset)."""


def _heapify_evict(
    key: Callable[[TreeNode], SortKey],
    leaves: Iterable[TreeNode],
    host: EvictionHost,
    num_tokens: int,
) -> tuple[list[TreeNode], int]:
    """Heapify ``leaves`` by ``key``, pop until ``num_tokens`` are freed, pushing each parent
    that becomes an evictable leaf (the loop of SGLang ``RadixCache.evict``). A declined leaf
    (0 tokens freed) is popped and not pushed back: the heap lives for this call only."""
    heap: list[tuple[SortKey, TreeNode]] = [(key(n), n) for n in leaves]
    heapq.heapify(heap)
    victims: list[TreeNode] = []
    evicted = 0
    while evicted < num_tokens and heap:
        _, node = heapq.heappop(heap)
        parent = node.parent
        freed = host.delete_leaf(node)
        if freed == 0:
            continue
        evicted += freed
        victims.append(node)
        if parent is not None and parent.evictable:
            heapq.heappush(heap, (key(parent), parent))
    return victims, evicted


class HeapifyEvictor(Evictor):
    """Current SGLang (sglang 0.5.23 ``RadixCache.evict``, since PR #14339): the cache keeps the
    set of evictable leaves up to date (``evictable_leaves``, via ``_update_leaf_status``); every
    call heapifies that set by sort key and pops, pushing a parent once it becomes an unlocked
    leaf. O(E) per call in the number E of evictable leaves, however few tokens are asked for.
    The set is kept here as an insertion-ordered dict ``id -> node`` (SGLang: a ``set`` of nodes,
    iterated in hash order; the order cannot matter because sort keys never tie).
    """

    name = "heapify"

    def __init__(self, policy: EvictionPolicy) -> None:
        super().__init__(policy)
        self.leaves: dict[int, TreeNode] = {}

    def on_change(self, node: TreeNode) -> None:
        if node.evictable:
            self.leaves[node.id] = node
        else:
            self.leaves.pop(node.id, None)

    def evict(self, host: EvictionHost, num_tokens: int) -> tuple[list[TreeNode], int]:
        return _heapify_evict(self.policy.key, list(self.leaves.values()), host, num_tokens)

    def members(self, host: EvictionHost) -> set[int]:
        return set(self.leaves)

    def reset(self) -> None:
        self.leaves = {}


class HeapifyWalkEvictor(Evictor):
    """SGLang before PR #14339 (the baseline SGLang PR #6907 measured against): every call walks
    the whole tree to collect the unlocked leaves (``_collect_leaves``), heapifies them and pops,
    pushing a parent once it becomes an unlocked leaf. O(N) per call in the number N of tree
    nodes, however few tokens are asked for.
    """

    name = "heapify-walk"

    def evict(self, host: EvictionHost, num_tokens: int) -> tuple[list[TreeNode], int]:
        return _heapify_evict(self.policy.key, host.collect_evictable_leaves(), host, num_tokens)


_LOW = FIELD_BITS
_LOW_MASK = (1 << FIELD_BITS) - 1


class PersistentHeapEvictor(Evictor):
    """A heap kept up to date across calls: SGLang PR #6907's idea, with its review defects fixed.

    Every time a node becomes evictable, or its sort key changes while evictable,
    ``node.heap_version`` is bumped and one int entry is pushed: the policy's packed key
    (``EvictionPolicy.packed``, same order as the key tuple, node id in its low 64 bits) shifted
    left 64 bits, or-ed with the version. Ints compare in one step, so a pop's ~log2(H) sift
    levels touch one object each instead of a tuple and its fields. ``live`` maps the id of each
    node that may have a current entry to the node. An entry is stale, and dropped when popped,
    when its node is not in ``live`` or its version is not the node's current one (the node was
    locked, got a child, was evicted or re-keyed since): so only evictable leaves are ever evicted
    (PR #6907 popped internal nodes), sizes are the cache's exact counters (it mis-accounted
    ``evictable_size_``), and the heap is rebuilt from live entries once stale ones outnumber
    them (it kept stale entries forever). ``evict(k)`` costs O((k + s) log H) for s stale pops.
    Eviction order: ascending policy key, ties impossible (keys end with the node id).
    """

    name = "persistent-heap"

    def __init__(self, policy: EvictionPolicy) -> None:
        super().__init__(policy)
        self.heap: list[int] = []  # (packed key << 64) | version
        self.live: dict[int, TreeNode] = {}

    def _push(self, node: TreeNode) -> None:
        heapq.heappush(self.heap, (self.policy.packed(node) << _LOW) | node.heap_version)
        self.live[node.id] = node

    def on_change(self, node: TreeNode) -> None:
        node.heap_version += 1
        if node.evictable:
            self._push(node)
        else:
            self.live.pop(node.id, None)

    def entry_node(self, entry: int) -> TreeNode | None:
        """The node of a heap entry if the entry is current, else ``None`` (stale)."""
        node = self.live.get((entry >> _LOW) & _LOW_MASK)
        if node is None or node.heap_version != entry & _LOW_MASK:
            return None
        return node

    def _compact(self, live: int) -> None:
        if len(self.heap) > 2 * live + 64:
            current = self.entry_node
            self.heap = [e for e in self.heap if current(e) is not None]
            heapq.heapify(self.heap)

    def evict(self, host: EvictionHost, num_tokens: int) -> tuple[list[TreeNode], int]:
        heap, current, pop = self.heap, self.entry_node, heapq.heappop
        victims: list[TreeNode] = []
        declined: list[int] = []
        evicted = 0
        while evicted < num_tokens and heap:
            entry = pop(heap)
            node = current(entry)
            if node is None:
                continue  # stale entry
            # delete_leaf refreshes the parent, which pushes it here if it became evictable.
            freed = host.delete_leaf(node)
            if freed == 0:
                declined.append(entry)  # still an evictable leaf: served again next call
                continue
            evicted += freed
            victims.append(node)
        self._restore(declined)
        self._compact(host.num_evictable_leaves)
        return victims, evicted

    def _restore(self, declined: list[int]) -> None:
        """Push back the popped entries of leaves ``delete_leaf`` declined, those still current
        (a leaf whose state changed since has a fresh entry or none)."""
        current = self.entry_node
        for entry in declined:
            if current(entry) is not None:
                heapq.heappush(self.heap, entry)

    def members(self, host: EvictionHost) -> set[int]:
        current = self.entry_node
        return {n.id for n in map(current, self.heap) if n is not None}

    def reset(self) -> None:
        self.heap = []
        self.live = {}


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
            self.live.pop(node.id, None)
            return
        tail = self.tail
        packed = self.policy.packed
        if self.use_list and (tail is None or packed(node) > packed(tail)):
            node.prev, node.next = tail, None
            if tail is None:
                self.head = node
            else:
                tail.next = node
            self.tail = node
            self.list_len += 1
        else:
            self._push(node)

    def evict(self, host: EvictionHost, num_tokens: int) -> tuple[list[TreeNode], int]:
        heap, current = self.heap, self.entry_node
        packed = self.policy.packed
        victims: list[TreeNode] = []
        declined: list[int] = []  # side-heap entries of declined leaves
        skipped: dict[int, int] = {}  # list leaves declined this call: id -> heap_version
        after: TreeNode | None = None  # the last of them: every list node before it is one
        evicted = 0
        while evicted < num_tokens:
            top = None
            while heap and (top := current(heap[0])) is None:
                heapq.heappop(heap)  # stale side-heap entry
            if not skipped:
                head = self.head
            elif after is not None and skipped.get(after.id) == after.heap_version:
                head = after.next  # still in the list (any change bumps its version)
            else:  # the last skipped leaf changed: walk past the skipped prefix again
                head, after = self.head, None
                while head is not None and skipped.get(head.id) == head.heap_version:
                    head, after = head.next, head
            entry: int | None = None
            if head is not None and (top is None or packed(head) < heap[0] >> _LOW):
                node = head  # delete_leaf -> on_change unlinks it
            elif top is not None:
                node = top
                entry = heapq.heappop(heap)
            else:
                break
            freed = host.delete_leaf(node)
            if freed == 0:  # declined: left in place, not served again in this call
                if entry is None:
                    skipped[node.id] = node.heap_version
                    after = node
                else:
                    declined.append(entry)
                continue
            evicted += freed
            victims.append(node)
        self._restore(declined)
        self._compact(host.num_evictable_leaves - self.list_len)
        return victims, evicted

    def members(self, host: EvictionHost) -> set[int]:
        ids = super().members(host)
        node = self.head
        while node is not None:
            ids.add(node.id)
            node = node.next
        return ids


EVICTORS: dict[str, type[Evictor]] = {
    cls.name: cls
    for cls in (HeapifyEvictor, HeapifyWalkEvictor, PersistentHeapEvictor, LRUListEvictor)
}


def make_evictor(name: str, policy: EvictionPolicy) -> Evictor:
    """Instantiate an evictor by name; raises ``ValueError`` naming the known ones."""
    try:
        return EVICTORS[name](policy)
    except KeyError:
        raise ValueError(f"unknown evictor {name!r}; known: {', '.join(EVICTORS)}") from None
