"""Eviction policies: the order in which evictable leaves are evicted, registered by name.

Each policy maps a node to a sort key; the smallest key is evicted first. Every key ends with the
node id so that orders are total and runs are reproducible across evictors (SGLang breaks ties by
heap position, which differs between evictors). Meanings follow SGLang ``evict_policy.py``
@ a7ec6b97.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from radixbench.cache.node import TreeNode

SortKey = tuple[int, ...]

#: Bits per field of a packed key, and the bias that makes signed fields sort as unsigned ones.
FIELD_BITS = 64
_BIAS = 1 << (FIELD_BITS - 1)
_FIELD_MAX = (1 << FIELD_BITS) - 1


def pack_key(key: SortKey) -> int:
    """Pack a sort key into one non-negative int with the same order: ``a < b`` exactly when
    ``pack_key(a) < pack_key(b)``, for keys of one policy (same length).

    Every field but the last is biased by ``2**63`` and takes 64 bits, most significant first;
    the last (the node id, >= 0) takes the low 64 bits, so ``packed & (2**64 - 1)`` is the id.
    One int compares in one step where a tuple compares field by field through more objects,
    which is what the persistent heap's sift loops spend their time on. Raises ``OverflowError``
    for a field outside ``[-2**63, 2**63)`` (an id outside ``[0, 2**64)``).
    """
    out = 0
    for f in key[:-1]:
        f += _BIAS
        if not 0 <= f <= _FIELD_MAX:
            raise OverflowError(f"sort key field {f - _BIAS} does not fit in {FIELD_BITS} bits")
        out = (out << FIELD_BITS) | f
    last = key[-1]
    if not 0 <= last <= _FIELD_MAX:
        raise OverflowError(f"node id {last} does not fit in {FIELD_BITS} bits")
    return (out << FIELD_BITS) | last


class EvictionPolicy(ABC):
    """Maps a node to its eviction sort key (smallest first)."""

    name: ClassVar[str]
    #: True when a touched node's key exceeds every other key (so "append at the tail on touch"
    #: keeps a list sorted). Only LRU: the touch sets the newest clock tick. The ``lru-list``
    #: evictor serves only such policies from its list and falls back to its heap otherwise.
    monotone_on_touch: ClassVar[bool] = False

    @abstractmethod
    def key(self, node: TreeNode) -> SortKey:
        """Sort key of ``node``; pure, reads the node only."""

    def packed(self, node: TreeNode) -> int:
        """``pack_key(self.key(node))``: the key as one int, for heaps of ints. Hot policies
        override it with the same arithmetic inlined."""
        return pack_key(self.key(node))


class LRU(EvictionPolicy):
    """Least recently used first: key ``(last_access_time, id)`` (SGLang LRUStrategy)."""

    name = "lru"
    monotone_on_touch = True

    def key(self, node: TreeNode) -> SortKey:
        return (node.last_access_time, node.id)

    def packed(self, node: TreeNode) -> int:
        # pack_key inlined: the clock and ids are far inside their 64-bit fields.
        return ((node.last_access_time + _BIAS) << FIELD_BITS) | node.id


class LFU(EvictionPolicy):
    """Least frequently used first, LRU among equals: ``(hit_count, last_access_time, id)``
    (SGLang LFUStrategy: ``(node.hit_count, node.last_access_time)``)."""

    name = "lfu"

    def key(self, node: TreeNode) -> SortKey:
        return (node.hit_count, node.last_access_time, node.id)


class FIFO(EvictionPolicy):
    """Oldest created first: ``(creation_time, id)`` (SGLang FIFOStrategy)."""

    name = "fifo"

    def key(self, node: TreeNode) -> SortKey:
        return (node.creation_time, node.id)


class MRU(EvictionPolicy):
    """Most recently used first: ``(-last_access_time, id)`` (SGLang MRUStrategy)."""

    name = "mru"

    def key(self, node: TreeNode) -> SortKey:
        return (-node.last_access_time, node.id)


class FILO(EvictionPolicy):
    """Newest created first: ``(-creation_time, id)`` (SGLang FILOStrategy)."""

    name = "filo"

    def key(self, node: TreeNode) -> SortKey:
        return (-node.creation_time, node.id)


class Priority(EvictionPolicy):
    """Lowest request priority first, LRU among equals: ``(priority, last_access_time, id)``
    (SGLang PriorityStrategy: ``(node.priority, node.last_access_time)``; a node's priority is the
    max over the inserts that walked through it)."""

    name = "priority"

    def key(self, node: TreeNode) -> SortKey:
        return (node.priority, node.last_access_time, node.id)


class SLRU(EvictionPolicy):
    """Segmented LRU: probationary nodes (``hit_count < 2``) before protected ones, LRU within
    each segment: ``(hit_count >= 2, last_access_time, id)`` (SGLang SLRUStrategy, threshold 2).
    """

    name = "slru"
    protected_threshold: ClassVar[int] = 2

    def key(self, node: TreeNode) -> SortKey:
        return (int(node.hit_count >= self.protected_threshold), node.last_access_time, node.id)


POLICIES: dict[str, type[EvictionPolicy]] = {
    cls.name: cls for cls in (LRU, LFU, FIFO, MRU, FILO, Priority, SLRU)
}


def make_policy(name: str) -> EvictionPolicy:
    """Instantiate a policy by name; raises ``ValueError`` naming the known ones."""
    try:
        return POLICIES[name]()
    except KeyError:
        known = ", ".join(POLICIES)
        raise ValueError(f"unknown eviction policy {name!r}; known: {known}") from None
