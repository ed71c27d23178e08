"""A shadow of a unified tree core's shape, for a core without node objects (the Rust core).

sglang 0.5.23's Rust tree core (``mem_cache/rust_tree_core/adapter.py``) hands out integer node
ids only: ``root_node`` and ``node_by_id`` raise (``adapter.py:524-531``), and nothing reports the
node count or the evictable-leaf count, which radixbench records before every timed operation
(``PrefixCache.tree_stats``), nor the children of a node (``PrefixCache.walk``). ``TreeShadow``
keeps them from what the core does report, through the backend-neutral interface:

* new nodes: after an ``insert`` / ``match_prefix`` whose resulting node is new, one
  ``collect_path_info([node])`` (``unified_tree_core_interface.py``; each ``TreePathNodeInfo``
  gives a path node's id, parent and child count). A new node without children is a new leaf:
  the upper half of a split always has one, its lower half (a split keeps the child's id for
  the lower half and copies its lock, ``unified_tree_core.py:_split_node``). A new node with
  children is the upper half of a split of the existing child ``X`` of its parent that is now
  its child, if there is one, else a new leaf. ``X`` is looked for among the parent's children
  whose first KV slot is not read yet, by one ``collect_path_info`` of them (where each is now;
  those still under the parent get their first slot read then,
  ``get_component_device_value(node, FULL)``), then among the others by the new node's first
  slot, which the split took from ``X``. A child's first slot is read at most once (until it is
  split) and only when a split under its parent needs it: a new leaf costs one call into the
  core and no tensor read. With HiCache (``tiered``) every new node's first slot is read when
  it joins and tells every split (a node may leave the device before a later read);
* locks: every ``inc_lock_ref`` / ``dec_lock_ref`` adds +1 / -1 to the node's own count (a
  node's ``lock_ref`` in the core is the sum over its subtree, and a leaf's subtree is itself:
  an evictable leaf is one with no locks of its own, O(1) per lock; :meth:`lock_count` sums
  the subtree); with HiCache (``tiered``) along its root path, as the core counts (a locked
  node may not be on the device yet);
* evictions: every victim leaves its parent (found by wrapping the cache's
  ``_evict_device_leaf``, ``unified_radix_cache.py:918``).

With HiCache (``tiered``) the shadow is the tree's device-resident part, the nodes whose FULL
device value is present (a device leaf there is a leaf of ``evictable_device_leaves``'s
kind, ``_is_device_leaf``): a victim leaves it only once it is deleted or host-only after the
call (``is_full_device_evicted``; a write-back victim whose backup found no host room stays),
and a load back's node (``on_node``) brings its path back.

Events are queued (O(1) each) and applied by ``sync()``, which the adapter calls before every
SGLang call and in ``stats()``, so a new node is always looked up in the state right after the
operation that made it. ``stats()`` is then O(1) (node count, evictable-leaf count); a node is
an evictable leaf when unlocked, childless and not the root, as ``evictable_device_leaves``
(``unified_tree_core.py:1595``). Children are walked in the order they appeared, a split's
upper half in its lower half's place (``order``): the Python core's dict order (the Rust core
keeps children in a randomly seeded hash map, ``rust/sglang-radix-tree/src/node.rs``, so it
has no order to follow).
Cost: one call into the core per new leaf; a split adds the first slots it needs; nothing else
queries it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any


class TreeShadow:
    """Parent links, children (by first KV slot, or ``~child`` while its slot is not read),
    their order, lock counts and the evictable-leaf set of a tree core, keyed by the core's
    node ids. ``core``: the tree core
    (``collect_path_info``, ``get_component_device_value``); ``full``: ``ComponentType.FULL``."""

    #: the most children with unread first slots a split under their parent leaves unread
    UNREAD = 8

    def __init__(self, core: Any, full: Any, root: int, tiered: bool = False) -> None:
        self.core = core
        self.full = full
        self.paths = path_reader(core)
        #: HiCache: the shadow keeps the device-resident nodes only; a victim of
        #: ``_evict_device_leaf`` may stay (a write-back whose backup found no room) or stay as
        #: a host-only node, and ``on_node`` after a load back brings nodes back
        self.tiered = tiered
        self.reset(root)

    def reset(self, root: int) -> None:
        """Forget everything: an empty tree under ``root``."""
        self.root = root
        self.parent: dict[int, int] = {}
        #: node -> {its child's first KV slot, or ``~child`` while not read: child}
        self.kids: dict[int, dict[int, int]] = {root: {}}
        #: node -> its key in its parent's ``kids``
        self.first: dict[int, int] = {}
        #: node -> the children whose first slot is not read yet (only nodes that have some)
        self.unread: dict[int, set[int]] = {}
        #: node -> its place among its siblings (``walk``: the order children appeared in)
        self.order: dict[int, int] = {}
        self.seq = 0
        self.lock: dict[int, int] = {root: 1}
        self.evictable: set[int] = set()
        #: events not applied yet; one list for the shadow's life (cleared, never rebound: the
        #: eviction hook holds its ``append``)
        self.queue: list[tuple[str, int, int]] = getattr(self, "queue", [])
        self.queue.clear()
        #: HiCache: locks of nodes not on the device yet (a load back), until they join
        self.pending_lock: dict[int, int] = {}
        #: the first node id :meth:`discover` probes
        self.probe = root + 1

    # ------------------------------------------------------------------ events
    def on_node(self, node: int) -> None:
        """An insert / match ended on ``node`` (maybe a new one)."""
        if node not in self.kids:
            self.queue.append(("node", node, 0))

    def on_lock(self, node: int, delta: int) -> None:
        self.queue.append(("lock", node, delta))

    def on_evict(self, node: int) -> None:
        self.queue.append(("evict", node, 0))

    def sync(self) -> None:
        """Apply the queued events in order (queries the core for new nodes)."""
        if not self.queue:
            return
        queue = self.queue[:]
        self.queue.clear()
        for kind, node, delta in queue:
            if kind == "node":
                self._add_path(node)
            elif kind == "lock":
                self._lock(node, delta)
            else:
                self._evict(node)

    # ------------------------------------------------------------------ state
    def _first_slot(self, node: int) -> int:
        return int(self.core.get_component_device_value(node, self.full)[0])

    def _refresh(self, node: int) -> None:
        if node != self.root and self.lock[node] == 0 and not self.kids[node]:
            self.evictable.add(node)
        else:
            self.evictable.discard(node)

    def _moved(self, parent: int, new: int) -> int | None:
        """The child of ``parent`` whose first slot is not read yet that a split moved under
        ``new`` (the split's lower half), or None. One ``collect_path_info`` of them all tells
        where each is; when there are more than :attr:`UNREAD` of them, those still under
        ``parent`` are keyed by their first slots now (each child's read once): a split looks
        at most ``UNREAD`` paths up, or reads each slot once."""
        unread = self.unread[parent]
        children = list(unread)
        moved, key = None, len(children) > self.UNREAD
        for child, path in zip(children, self.paths(children), strict=True):
            now = path[-1][1]
            if now == new:
                moved = child
            elif key and now == parent:
                slot = self._first_slot(child)
                self._leave(child)
                self._join(child, parent, slot, self.order[child])
        return moved

    def _join(self, node: int, parent: int, key: int, order: int) -> None:
        self.parent[node] = parent
        self.first[node] = key
        self.kids[parent][key] = node
        self.order[node] = order
        if key < 0:
            self.unread.setdefault(parent, set()).add(node)

    def _add_path(self, end: int) -> None:
        if end in self.kids:
            return
        (path,) = self.paths([end])
        new = 0  # where the new nodes start: the path's tail after the last node known here
        if not self.tiered:  # (unless a node above it has moved: a split the walk must see)
            new = len(path)
            while new and path[new - 1][0] not in self.kids:
                new -= 1
            if new and self.parent[path[new - 1][0]] != path[new - 1][1]:
                new = 0
        for node, parent, _, _, _, children in path[new:]:
            if node in self.kids:
                continue
            self.seq += 1
            if not self.tiered and not children:  # a new leaf (module docstring)
                self._join(node, parent, ~node, self.seq)
                self._new_leaf(node, parent)
                continue
            old = self._moved(parent, node) if parent in self.unread else None
            key = ~node  # the place of an unread lower half, or a slot
            if old is None:
                value = self.core.get_component_device_value(node, self.full)
                if value is None:  # HiCache: host-only (a load back not yet committed) from here
                    return
                key = int(value[0])
                old = self.kids[parent].get(key)
            if old is None:  # a new leaf (locks taken while it was not on the device)
                self._join(node, parent, key, self.seq)
                self._new_leaf(node, parent)
                continue
            # the upper half of a split of ``old``, in its place (its own locks: none;
            # tiered: old's); ``old``'s first slot moved
            self._leave(old)
            self._join(node, parent, key, self.order[old])
            self.kids[node] = {}
            self._join(old, node, self._first_slot(old) if self.tiered else ~old, self.order[old])
            self.lock[node] = self.lock[old] if self.tiered else 0
            self._refresh(node)

    def _leave(self, node: int) -> None:
        """Take ``node`` out of its parent's children (its other links stay)."""
        parent, key = self.parent[node], self.first[node]
        del self.kids[parent][key]
        if key < 0:
            unread = self.unread[parent]
            unread.discard(node)
            if not unread:
                del self.unread[parent]

    def _new_leaf(self, node: int, parent: int) -> None:
        self.kids[node] = {}
        self.lock[node] = self.pending_lock.pop(node, 0)
        self._refresh(parent)
        self._refresh(node)

    def _lock(self, node: int, delta: int) -> None:
        if node not in self.lock:  # locked inside the call that made it (a HiCache backup)
            self._add_path(node)
        if not self.tiered:  # the node's own count (module docstring)
            self.lock[node] += delta
            if self.lock[node] < 0:
                raise RuntimeError(f"shadow: lock count of node {node} went negative")
            self._refresh(node)
            return
        if node not in self.lock:  # HiCache: a node being loaded back, not on the device yet
            (path,) = self.core.collect_path_info([node])
            node = self.root  # the path lists the root's descendants only
            for info in reversed(path):
                n = int(info.node_id)
                if n in self.lock:
                    node = n
                    break
                self.pending_lock[n] = self.pending_lock.get(n, 0) + delta
        while True:
            self.lock[node] += delta
            if delta < 0 and self.lock[node] < 0:
                raise RuntimeError(f"shadow: lock count of node {node} went negative")
            self._refresh(node)
            if node == self.root:
                return
            node = self.parent[node]

    def discover(self, window: int = 8) -> None:
        """HiCache: add the device-resident nodes made without an event (a storage prefetch's
        host insert that splits a device node, inside ``check_hicache_events``): the Rust core
        mints node ids in order, so the ids after the newest one seen are probed until
        ``window`` in a row do not exist."""
        self.sync()
        nid, misses = self.probe, 0
        while misses < window:
            try:
                self.core.collect_path_info([nid])
            except KeyError:
                misses += 1
            else:
                misses = 0
                self._add_path(nid)
                self.probe = nid + 1
            nid += 1

    def exists(self, node: int) -> bool:
        """Whether the core still has ``node`` (``collect_path_info`` raises ``KeyError`` for
        a deleted one)."""
        try:
            self.core.collect_path_info([node])
        except KeyError:
            return False
        return True

    def _on_device(self, node: int) -> bool:
        """Whether ``node`` still holds its FULL device value (HiCache): not when it was
        deleted or is host-only now."""
        return self.exists(node) and not self.core.is_full_device_evicted(node)

    def _evict(self, node: int) -> None:
        if node not in self.parent or (self.tiered and self._on_device(node)):
            return  # already gone from the device, or kept (a declined write-back)
        self._leave(node)
        parent = self.parent.pop(node)
        del self.first[node], self.kids[node], self.lock[node], self.order[node]
        self.evictable.discard(node)
        self._refresh(parent)

    # ------------------------------------------------------------------ reads
    def stats(self) -> tuple[int, int]:
        """``(nodes excluding the root, evictable leaves)`` after ``sync()``; O(1)."""
        self.sync()
        return len(self.parent), len(self.evictable)

    def lock_count(self, node: int) -> int:
        """The core's ``lock_ref`` of ``node``: the locks of its subtree (tiered: kept per
        node). O(subtree)."""
        self.sync()
        if self.tiered:
            return self.lock[node]
        total, stack = 0, [node]
        while stack:
            n = stack.pop()
            total += self.lock[n]
            stack.extend(self.kids[n].values())
        return total

    def walk(self, node_id: Callable[[int], int]) -> Iterator[tuple[int, int]]:
        """``(id, parent id)`` depth first, children in order, ids mapped by ``node_id``."""
        self.sync()
        place = self.order.__getitem__
        stack = sorted(self.kids[self.root].values(), key=place, reverse=True)
        while stack:
            node = stack.pop()
            yield node_id(node), node_id(self.parent[node])
            kids = self.kids[node]
            if kids:
                stack.extend(sorted(kids.values(), key=place, reverse=True))


#: A path node as :func:`path_reader` gives it (``TreePathNodeInfo``'s fields, in order).
PathNode = tuple[int, int, int, int, int | None, int]


def path_reader(core: Any) -> Callable[[list[int]], Sequence[Sequence[PathNode]]]:
    """``core.collect_path_info`` with each path node as a :data:`PathNode` tuple: for sglang
    0.5.23's Rust core, its binding's own call, whose tuples the adapter wraps field by field
    (``TreePathNodeInfo(*node)``, ``rust_tree_core/adapter.py:1224-1228``): half the cost per
    path node; for any other core (or a subclass overriding the call), its tuples made from the
    ``TreePathNodeInfo`` objects. Raises ``KeyError`` for a node the core does not have."""
    binding = getattr(core, "_binding", None)
    call = getattr(type(core), "collect_path_info", None)
    if binding is not None and getattr(call, "__qualname__", "") == RUST_PATHS:
        return binding.collect_path_info

    def paths(ids: list[int]) -> list[list[PathNode]]:
        return [
            [(int(i.node_id), int(i.parent_id), i.path_start, i.path_end, i.full_value_len,
              i.num_children) for i in path]
            for path in core.collect_path_info(ids)
        ]  # fmt: skip

    return paths


#: The Rust core's call whose binding :func:`path_reader` calls directly.
RUST_PATHS = "RustUnifiedTreeCore.collect_path_info"
