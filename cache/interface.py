"""The contract between the simulator and a prefix-cache implementation: :class:`PrefixCache`.

Exactly what ``radixbench.sim`` uses of a cache, nothing more, so that radixbench's own
``RadixCache``, SGLang's caches behind an adapter (legacy ``RadixCache``; ``UnifiedRadixCache``
with a Rust or Python tree core) and a user's toy all run under the same scheduler. Modelled on
SGLang 0.5.23's ``unified_cache/unified_tree_core_interface.py`` (one tree-core interface,
results returned, not side effects) and on ``BasePrefixCache`` (``mem_cache/base_prefix_cache.py``):

* nodes are **opaque handles** (``NodeHandle``): the simulator keeps them (``MatchResult.
  last_node``, ``req.last_node``) and hands them back (``lock``, ``node_id``), never reads their
  attributes — a Rust tree core has no node objects at all;
* lock handles (``LockHandle``) are what ``lock`` returns, given back to ``unlock`` once;
* every size is in tokens; KV-slot indices are int64 torch tensors on the cache's device;
* ``tree_stats()`` is the per-op condition the op table records (nodes, tokens, evictable
  leaves), read before each timed call;
* ``walk()`` gives the tree's shape as node ids (for the ``dfs-weight`` waiting-queue order);
  ``held_slots()`` the KV slots the tree holds (for the KV-pool accounting);
* ``take_actions()`` is the outlet for what a cache asks of the world around it — KV events
  (``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared``, :mod:`radixbench.cache.
  kv_events`, when the cache's ``CacheConfig.kv_events`` turns them on; ``[]`` otherwise) and
  tier transfers (HiCache backup, load-back, prefetch: none yet);
* ``instrument(timer)`` lets the implementation put the timer around its own operations, once,
  where only it knows them (SGLang's ``checkpoint`` calls its own ``insert`` directly).

Implementations are registered by name in :mod:`radixbench.cache.registry`; a conformance
test (tests/cache/test_interface.py) runs every registered implementation through this
protocol, and mypy checks the built-in ones against it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, TypeVar, runtime_checkable

if TYPE_CHECKING:
    import torch

    from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
    from radixbench.cache.key import RadixKey

__all__ = [
    "CacheAction",
    "CacheReq",
    "EvictResult",
    "ImplInfo",
    "LockHandle",
    "MatchResult",
    "NodeHandle",
    "OpTimer",
    "PrefixCache",
    "TreeStats",
    "time_standard_ops",
]

#: A tree node as its implementation represents it (a ``TreeNode``, an SGLang node, an int id):
#: held and handed back by the simulator, never inspected.
NodeHandle: TypeAlias = Any
#: What ``PrefixCache.lock`` returns (the node itself, SGLang's ``TreeLock``...).
LockHandle: TypeAlias = Any
#: ``(nodes excluding the root, tokens held, evictable leaves)``: a plain tuple, read before
#: every timed operation (a named tuple costs more than the operation's bookkeeping).
TreeStats: TypeAlias = tuple[int, int, int]

R = TypeVar("R")


class MatchResult(NamedTuple):
    """``device_indices``: int64 ``[prefix_len]`` KV slots of the matched prefix on the device;
    ``last_node``: handle of the deepest matched node (the root when nothing matched);
    ``prefix_len``: matched tokens (whole pages)."""

    device_indices: torch.Tensor
    last_node: NodeHandle
    prefix_len: int


class EvictResult(NamedTuple):
    """``num_evicted``: tokens freed; ``victims``: evicted node ids in eviction order."""

    num_evicted: int
    victims: list[int]


class CacheAction:
    """Something a cache asks of the world around it, drained by ``take_actions``: a KV event
    or a tier transfer. ``kind`` names it (e.g. ``BlockStored``, ``d2h``); ``fields`` carries
    its data (page hashes, token counts, tiers...). Made directly as ``CacheAction(kind,
    fields)`` (HiCache's transfers, :mod:`radixbench.cache.hicache.controller`) or subclassed as
    a dataclass whose class name is its kind and whose dataclass fields are its fields (the KV
    events ``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared`` of
    :mod:`radixbench.cache.kv_events`)."""

    __slots__ = ("_fields", "_kind")

    def __init__(self, kind: str, fields: dict[str, Any] | None = None) -> None:
        self._kind = kind
        self._fields = {} if fields is None else fields

    @property
    def kind(self) -> str:
        try:
            return self._kind
        except AttributeError:  # a dataclass subclass: its own __init__ sets no _kind
            return type(self).__name__

    @property
    def fields(self) -> dict[str, Any]:
        import dataclasses

        if dataclasses.is_dataclass(self):
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return self._fields

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return (self.kind, self.fields) == (other.kind, other.fields)

    def __hash__(self) -> int:
        return hash((type(self), self.kind))

    def __repr__(self) -> str:
        return f"CacheAction({self._kind!r}, {self._fields!r})"


@dataclass(frozen=True)
class ImplInfo:
    """What a report says about the code a cache ran: ``label`` (the impl's name in variant
    names), ``spec`` (as given to ``--impl``), ``version``, ``origin`` (folder or package it
    was loaded from), ``cls`` (qualified class name), ``tree_core`` (``python`` / ``rust`` /
    ``""`` when the class has no separate core) and ``tree_core_reason`` (why that core was
    chosen), ``files`` (sha256 of every file loaded, by path)."""

    label: str
    spec: str
    version: str
    origin: str
    cls: str
    tree_core: str = ""
    tree_core_reason: str = ""
    files: dict[str, str] = field(default_factory=dict)


class CacheReq(Protocol):
    """What ``checkpoint`` / ``release`` read and write of a request: the fields of sglang
    0.5.23's ``Req`` and its ``req.kv`` record that ``RadixCache.checkpoint`` and
    ``release_kv_cache`` use, flattened. ``lock`` is the handle the cache's ``lock`` returned
    (``None`` when nothing is locked); ``last_node`` the node handle it locks."""

    req_pool_idx: int
    extra_key: str | None
    priority: int
    origin_input_len: int
    cache_protected_len: int
    cache_inserted_len: int
    lock: LockHandle
    last_node: NodeHandle

    def token_ids(self, up_to: int | None = None) -> array:
        """``array('q')``: prompt followed by the output tokens so far (0.5.23
        ``Req.full_untruncated_fill_ids``), cut to the first ``up_to`` tokens when given.
        Not to be mutated: it may be the request's own array."""
        ...


class OpTimer(Protocol):
    """Times and records cache operations (``radixbench.sim.instrument.OpRecorder``).

    ``timed(op, fn, stats, key_len, result)`` returns ``fn`` wrapped: each call reads
    ``stats()`` (before the timer starts), times ``fn(*args)`` alone with ``perf_counter_ns``
    and records one row: ``op``, ns, ``key_len(*args)``, ``result(return value, *args)`` and
    the stats. Calls nested in a timed call are recorded too but charged to the coupled clock
    once, at the top level. ``timed_with_inner(...)`` additionally records, after each call, a
    row ``inner_op`` with the ns spent in ``inner_fn`` (wrapped the same way and returned as the
    second element) during that call. ``untimed(fn, *args)`` calls ``fn`` and leaves its ns out
    of every timed call under way (an adapter's bookkeeping inside the implementation's call);
    a timed call's ns also leave out the stats reads and rows of the timed calls nested in it."""

    def timed(
        self,
        op: str,
        fn: Callable[..., R],
        stats: Callable[[], TreeStats],
        key_len: Callable[..., int],
        result: Callable[..., int],
    ) -> Callable[..., R]: ...

    def timed_with_inner(
        self,
        op: str,
        fn: Callable[..., R],
        stats: Callable[[], TreeStats],
        key_len: Callable[..., int],
        result: Callable[..., int],
        inner_op: str,
        inner_fn: Callable[..., Any],
    ) -> tuple[Callable[..., R], Callable[..., Any]]: ...

    def untimed(self, fn: Callable[..., R], *args: Any) -> R: ...


@runtime_checkable
class PrefixCache(Protocol):
    """A radix prefix cache as the simulator drives it (sizes in tokens; see the module
    docstring for handles). Mutations are listed per method; every method may read the
    implementation's clock. Implementations: ``radixbench.cache.radix_cache.RadixCache``,
    ``radixbench.cache.sglang_adapter.SGLangCache`` and what :mod:`radixbench.cache.registry`
    holds."""

    page_size: int
    device: torch.device
    allocator: TokenToKVPoolAllocator
    req_to_token_pool: ReqToTokenPool | None

    def reset(self) -> None:
        """Drop the whole tree (KV slots are not freed: the caller clears the allocator)."""
        ...

    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Longest cached prefix of ``key`` in whole pages. Mutates access times; may split
        one node. Never changes sizes or locks."""
        ...

    def insert(
        self,
        key: RadixKey,
        value: torch.Tensor | None = None,
        priority: int = 0,
        inserted_len: int = 0,
    ) -> int:
        """Insert ``key`` with KV slots ``value`` (int64 ``[>= len(key)]``); returns the tokens
        already cached. The slots of that prefix in ``value`` are duplicates that the *caller*
        frees (an implementation whose own insert frees them, as 0.5.23's unified cache does,
        is driven so that it does not here). The tree keeps its own copy of the new part."""
        ...

    def evict(self, num_tokens: int) -> EvictResult:
        """Free at least ``num_tokens`` KV slots (fewer if not enough are evictable) by
        evicting unlocked leaves in the implementation's order; frees through ``allocator``."""
        ...

    def lock(self, node: NodeHandle) -> LockHandle:
        """Lock the path root..node for one holder (its tokens move from evictable to
        protected); returns the handle for ``unlock``."""
        ...

    def unlock(self, handle: LockHandle | None) -> None:
        """Release a ``lock`` handle (``None``: no-op). Unlocking twice is an error."""
        ...

    def inc_lock_ref(self, node: NodeHandle) -> int:
        """Lock the path root..node without a handle; returns the change of the evictable
        size (<= 0)."""
        ...

    def dec_lock_ref(self, node: NodeHandle) -> int:
        """Undo one ``inc_lock_ref``; returns the change of the evictable size (>= 0)."""
        ...

    def checkpoint(self, req: CacheReq, up_to: int) -> None:
        """Publish a running request's first ``up_to`` tokens (sglang 0.5.23
        ``checkpoint_kv_cache``): insert, free the row's duplicate slots, point the row at the
        tree's slots, move ``req.lock``. Mutates the tree, the allocator, the request's
        ``req_to_token`` row and ``req``."""
        ...

    def release(self, req: CacheReq, owned_len: int, checkpoint: bool) -> None:
        """Give a request's KV row back (0.5.23 ``release_kv_cache``): on finish
        (``checkpoint=True``) checkpoint first; free the row's own slots ``[cache_protected_len,
        owned_len)``, unlock, free the row."""
        ...

    def evictable_size(self) -> int: ...

    def protected_size(self) -> int: ...

    def total_size(self) -> int: ...

    def tree_stats(self) -> TreeStats:
        """``(nodes excluding the root, tokens held, evictable leaves)``, O(1)."""
        ...

    def node_id(self, node: NodeHandle) -> int:
        """The id of a node handle (unique within this cache; the root's is 0)."""
        ...

    def walk(self) -> Iterator[tuple[int, int]]:
        """``(node id, parent id)`` of every node but the root, depth first from the root,
        a node before its children, children in the order the tree keeps them. Mutates
        nothing."""
        ...

    def held_slots(self) -> torch.Tensor:
        """int64 ``[total_size()]``: the KV slots of every node (any order). Mutates nothing."""
        ...

    def take_actions(self) -> list[CacheAction]:
        """Drain the KV events and tier-transfer actions emitted since the last call, in
        order (``[]`` when the implementation emits none)."""
        ...

    def info(self) -> ImplInfo:
        """What code this cache runs (for the report's Implementations table)."""
        ...

    def instrument(self, timer: OpTimer) -> None:
        """Wrap this cache's operations with ``timer`` once (on the instance): at least
        ``match_prefix``, ``insert``, ``evict``, ``inc_lock_ref``, ``dec_lock_ref``,
        ``checkpoint``, ``release``, under those op names."""
        ...


def _key_len(key: Any, *_: Any) -> int:
    return len(key)


def _no_key(*_: Any) -> int:
    return 0


def _asked(num_tokens: int) -> int:
    return num_tokens


def time_standard_ops(cache: Any, timer: OpTimer, *, kv_free_in_evict: bool = False) -> None:
    """The usual ``PrefixCache.instrument``: wrap the instance's ``match_prefix``, ``insert``,
    ``evict``, ``inc_lock_ref``, ``dec_lock_ref``, ``checkpoint`` and ``release`` with
    ``timer`` (stats from ``cache.tree_stats``). Recorded ``key_len``: the key's tokens
    (``evict``: tokens asked for; ``checkpoint``: ``up_to``; ``release``: ``owned_len``; lock
    ops: 0); ``result``: matched / already-cached / evicted tokens, the size delta of a lock
    op, 0 for ``checkpoint`` / ``release``. ``kv_free_in_evict``: also record after each
    ``evict`` an ``evict_kv_free`` row timing ``cache.allocator.free`` inside it (the
    allocator's ``free`` is wrapped on the instance). Mutates ``cache`` (and its allocator)."""
    stats = cache.tree_stats
    t = timer.timed
    cache.match_prefix = t(
        "match_prefix", cache.match_prefix, stats, _key_len, lambda r, *_: r.prefix_len
    )
    cache.insert = t("insert", cache.insert, stats, _key_len, lambda r, *_: r)
    if kv_free_in_evict:
        evict, free = timer.timed_with_inner(
            "evict",
            cache.evict,
            stats,
            _asked,
            lambda r, *_: r.num_evicted,
            "evict_kv_free",
            cache.allocator.free,
        )
        cache.evict, cache.allocator.free = evict, free
    else:
        cache.evict = t("evict", cache.evict, stats, _asked, lambda r, *_: r.num_evicted)
    cache.inc_lock_ref = t("inc_lock_ref", cache.inc_lock_ref, stats, _no_key, lambda r, *_: r)
    cache.dec_lock_ref = t("dec_lock_ref", cache.dec_lock_ref, stats, _no_key, lambda r, *_: r)
    cache.checkpoint = t(
        "checkpoint", cache.checkpoint, stats, lambda r, up_to: up_to, lambda *_: 0
    )
    cache.release = t("release", cache.release, stats, lambda r, owned, ckpt: owned, lambda *_: 0)
