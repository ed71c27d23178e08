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
* capabilities are declared, never probed: ``take_actions()`` is the outlet for what a cache
  asks of the world around it — KV events (``BlockStored`` / ``BlockRemoved`` /
  ``AllBlocksCleared``, :mod:`radixbench.cache.kv_events`, when the cache's
  ``CacheConfig.kv_events`` turns them on; ``[]`` otherwise) and tier transfers (HiCache
  backup, load-back, prefetch); ``tiers`` is the cache's HiCache entry points
  (:class:`TierOps`) or ``None`` for a one-tier cache;
* ``instrument(timer)`` lets the implementation put the timer around its own operations, once,
  where only it knows them (SGLang's ``checkpoint`` calls its own ``insert`` directly); the
  usual body is :func:`radixbench.cache.timing.time_standard_ops`.

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
    from torch import Tensor

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
    "TierOps",
    "TreeStats",
]

#: A tree node as its implementation represents it (a ``TreeNode``, an SGLang node, an int id):
#: held and handed back by the simulator, never inspected.
NodeHandle: TypeAlias = Any
#: What ``PrefixCache.lock`` returns (the node itself, SGLang's ``TreeLock``...).
LockHandle: TypeAlias = Any
#: ``(nodes excluding the root, tokens held, evictable leaves)``: a plain tuple, read before
#: every timed operation (a named tuple costs more than the operation's bookkeeping).
TreeStats: TypeAlias = tuple[int, int, int]

#: Reads the condition an op row records, before the call (``PrefixCache.tree_stats``).
StatsFn: TypeAlias = Callable[[], TreeStats]
#: A call's recorded number, from its arguments (``key_len``) or its result (``result``).
CountFn: TypeAlias = Callable[..., int]

R = TypeVar("R")


class MatchResult(NamedTuple):
    """``device_indices``: int64 ``[prefix_len]`` KV slots of the matched prefix on the device;
    ``last_node``: handle of the deepest matched node holding its KV on the device (the root
    when nothing matched); ``prefix_len``: matched tokens (whole pages). A cache with tiers
    (``PrefixCache.tiers``) adds its host part, as sglang 0.5.23's ``MatchResult``
    (``mem_cache/base_prefix_cache.py``): ``host_hit_length``, tokens matched past
    ``prefix_len`` whose KV is on the host only, and ``best_node``, the deepest matched node on
    either tier (``None`` for a one-tier cache)."""

    device_indices: torch.Tensor
    last_node: NodeHandle
    prefix_len: int
    host_hit_length: int = 0
    best_node: NodeHandle = None


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
    ``release_kv_cache`` use, flattened: ``checkpoint`` / ``release`` set the four attributes
    and only read the four properties. ``lock`` is the handle the cache's ``lock`` returned
    (``None`` when nothing is locked); ``last_node`` the node handle it locks."""

    cache_protected_len: int
    cache_inserted_len: int
    lock: LockHandle
    last_node: NodeHandle

    @property
    def req_pool_idx(self) -> int:
        """The request's row of the ``ReqToTokenPool`` (read only)."""
        ...

    @property
    def extra_key(self) -> str | None:
        """The key's namespace (LoRA id...; read only)."""
        ...

    @property
    def priority(self) -> int:
        """Its scheduling priority (read only)."""
        ...

    @property
    def origin_input_len(self) -> int:
        """Prompt tokens (read only)."""
        ...

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
        self, op: str, fn: Callable[..., R], stats: StatsFn, key_len: CountFn, result: CountFn
    ) -> Callable[..., R]: ...

    def timed_with_inner(
        self,
        op: str,
        fn: Callable[..., R],
        stats: StatsFn,
        key_len: CountFn,
        result: CountFn,
        inner_op: str,
        inner_fn: Callable[..., Any],
    ) -> tuple[Callable[..., R], Callable[..., Any]]: ...

    def untimed(self, fn: Callable[..., R], *args: Any) -> R: ...


class TierOps(Protocol):
    """The HiCache entry points of a cache with host (and storage) tiers, as sglang 0.5.23's
    scheduler calls them on its ``UnifiedRadixCache`` (``managers/scheduler.py``,
    ``schedule_policy.py``); driven by ``radixbench.sim.tiers.TierDriver``. ``rid``: a
    request id; ``match``: this cache's ``match_prefix`` result; times in simulated seconds.
    Implementations: ``radixbench.cache.hicache.TieredRadixCache`` and SGLang's served cache
    with HiCache on (``--impl sglang --enable-hierarchical-cache``)."""

    def check_events(self) -> None:
        """Apply the transfers completed so far (``check_hicache_events``). Mutates the tree."""
        ...

    def load_back(self, match: MatchResult) -> tuple[int, NodeHandle, torch.Tensor]:
        """Load ``match``'s host part back to the device (``init_load_back``): ``(device prefix
        tokens, last device node, their int64 KV slots)``, the match's own when nothing was
        loaded. Mutates the tree and the allocator."""
        ...

    def start_loading(self) -> int:
        """Start the loads queued by this batch's ``load_back`` calls as one operation
        (``ready_to_load_host_cache``); returns its id."""
        ...

    def prefetch(self, rid: Any, match: MatchResult, tokens: Any, namespace: Any) -> None:
        """Prefetch the part of ``tokens`` past ``match`` from storage (``_prefetch_kvcache``);
        a no-op without storage."""
        ...

    def prefetch_ready(self, rid: Any, now: float) -> bool:
        """Whether ``rid``'s prefetch may be cut now (``check_prefetch_progress``)."""
        ...

    def prefetch_deadline(self, rid: Any) -> float | None:
        """When ``rid``'s prefetch times out (``None``: none in flight)."""
        ...

    def pop_prefetch_loaded(self, rid: Any) -> int:
        """Tokens ``rid``'s prefetch brought from storage (``pop_prefetch_loaded_tokens``)."""
        ...

    def tier_stats(self) -> dict[str, int]:
        """O(1): ``host_capacity_tokens``, ``host_used_tokens``, ``host_evictable_leaves``,
        ``prefetches`` in flight."""
        ...


@runtime_checkable
class PrefixCache(Protocol):
    """A radix prefix cache as the simulator drives it (sizes in tokens; see the module
    docstring for handles). Mutations are listed per method; every method may read the
    implementation's clock. Implementations: what :mod:`radixbench.cache.registry` holds
    (``radixbench.cache.radix_cache.RadixCache``, ``radixbench.cache.hicache.TieredRadixCache``
    and SGLang's caches behind the adapters of ``radixbench.cache.sglang``)."""

    page_size: int
    device: torch.device
    allocator: TokenToKVPoolAllocator
    req_to_token_pool: ReqToTokenPool | None
    #: the HiCache entry points the scheduler drives; ``None``: one tier (no HiCache)
    tiers: TierOps | None

    def reset(self) -> None:
        """Drop the whole tree (KV slots are not freed: the caller clears the allocator)."""
        ...

    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Longest cached prefix of ``key`` in whole pages. Mutates access times; may split
        one node. Never changes sizes or locks."""
        ...

    def insert(
        self, key: RadixKey, value: Tensor | None = None, priority: int = 0, inserted_len: int = 0
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
