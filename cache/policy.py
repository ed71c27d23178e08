"""Eviction policies: the order in which evictable leaves are evicted, registered by name.

Each policy maps a node to a sort key; the smallest key is evicted first. Every key ends with the
node id so that orders are total and runs are reproducible across evictors (SGLang breaks ties by
heap position, which differs between evictors; under a strictly increasing clock two evictable
leaves never tie on SGLang's part of the key, so the orders agree — the differential tests against
sglang 0.5.23 check it). Meanings follow ``sglang/srt/mem_cache/evict_policy.py`` in sglang 0.5.23
(``LRUStrategy`` … ``SLRUStrategy``, ``TLRUStrategy``); a policy takes the same keyword
configuration as SGLang's ``--radix-eviction-policy-config``.
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
    """Maps a node to its eviction sort key (smallest first). Subclasses that take configuration
    accept it as keyword arguments (SGLang ``get_eviction_strategy(policy, config)``)."""

    name: ClassVar[str]
    #: True when the cache must keep ``tlru_cached_prefix_len`` / ``tlru_history_len`` up to date.
    needs_tlru_lengths: ClassVar[bool] = False
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
    """Segmented LRU: probationary nodes (``hit_count < protected_threshold``, default 2) before
    protected ones, LRU within each segment: ``(hit_count >= threshold, last_access_time, id)``
    (SGLang ``SLRUStrategy``). With 0.5.23's hit counting a node is protected after two inserts.
    """

    name = "slru"

    def __init__(self, protected_threshold: int = 2) -> None:
        self.protected_threshold = protected_threshold

    def key(self, node: TreeNode) -> SortKey:
        return (int(node.hit_count >= self.protected_threshold), node.last_access_time, node.id)


class TLRU(EvictionPolicy):
    """Tail-optimized LRU (Zhang et al., arXiv:2510.15152; SGLang ``TLRUStrategy``, 0.5.23).

    A conversation whose branch reached depth ``L = tlru_history_len`` and whose next prompt adds
    about ``next_prompt_estimate`` tokens keeps its next prefill within the TTFT budget while
    ``L + next_prompt_estimate - threshold`` tokens stay cached; a node whose start lies at or
    beyond that budget is "TEL-safe" and evicted before anything else. Key:
    ``(-1 if TEL-safe else 0, last_access_time, id)``. ``threshold`` and
    ``next_prompt_estimate`` are tokens (the paper states blocks: multiply by the page size).
    Raises ``ValueError`` for negative values, as SGLang's argument check does.
    """

    name = "tlru"
    needs_tlru_lengths = True

    def __init__(self, threshold: int = 0, next_prompt_estimate: int = 0) -> None:
        if threshold < 0 or next_prompt_estimate < 0:
            raise ValueError("tlru: threshold and next_prompt_estimate must be >= 0 (tokens)")
        self.threshold = threshold
        self.next_prompt_estimate = next_prompt_estimate

    def key(self, node: TreeNode) -> SortKey:
        budget = max(node.tlru_history_len + self.next_prompt_estimate - self.threshold, 0)
        tel_safe = node.tlru_cached_prefix_len - len(node.key.token_ids) >= budget
        return (-1 if tel_safe else 0, node.last_access_time, node.id)


POLICIES: dict[str, type[EvictionPolicy]] = {
    cls.name: cls for cls in (LRU, LFU, FIFO, MRU, FILO, Priority, SLRU, TLRU)
}


def make_policy(name: str, config: dict[str, int] | None = None) -> EvictionPolicy:
    """Instantiate a policy by name with its keyword ``config`` (e.g. ``{"threshold": 512}``
    for ``tlru``, ``{"protected_threshold": 4}`` for ``slru``); raises ``ValueError`` naming the
    known policies, or the keys a policy does not take."""
    try:
        cls = POLICIES[name]
    except KeyError:
        known = ", ".join(POLICIES)
        raise ValueError(f"unknown eviction policy {name!r}; known: {known}") from None
    try:
        return cls(**(config or {}))
    except TypeError as e:
        raise ValueError(f"eviction policy {name!r}: bad config {config!r} ({e})") from None
