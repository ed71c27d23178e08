"""SGLang's served cache, ``UnifiedRadixCache`` (Rust or Python tree core), as a ``PrefixCache``.

``ServedSGLangCache`` builds the class of a ``LoadedUnified`` (``sglang_unified.load_unified``)
as ``create_unified_radix_cache`` does for a full-attention model (``mem_cache/registry.py:149``:
``tree_components = (FULL,)``, no HiCache, no metrics; KV events only when ``config.kv_events``
asks, :mod:`radixbench.cache.sglang_events`) with the load's tree core
(``CacheInitParams.tree_core_backend``), and drives it as sglang 0.5.23's scheduler does:

* ``match_prefix``: ``UnifiedRadixCache.match_prefix(MatchPrefixParams(key))``; the slots are
  ``path_device_indices(last node)[:prefix_len]`` (its ``MatchResult`` carries none);
* ``insert``: ``UnifiedRadixCache.insert(InsertParams(key, value, prev_prefix_len=len(key),
  ...))``. The unified insert frees the duplicates ``value[prev_prefix_len:prefix_len]`` itself
  (``unified_tree_core.py:1351``); ``prev_prefix_len = len(key)`` frees none, so the caller frees
  them as ``PrefixCache.insert`` says (radixbench's and the legacy class's contract);
* ``checkpoint``: ``UnifiedRadixCache.checkpoint(req, up_to=...)`` on a request proxy
  (``unified_radix_cache.py:1159-1336``; its inserts free the duplicates themselves, with
  ``prev_prefix_len = cache_protected_len``), as ``checkpoint_kv_cache`` calls it
  (``mem_cache/common.py:271``);
* ``release``: the steps of ``release_kv_cache`` (``mem_cache/common.py:400-444``) for a FULL
  tree: with ``checkpoint`` the request's final ``checkpoint`` (``req.finished()`` true), free
  the row's ``[cache_protected_len, owned_len)`` (a copy, as ``free_kv_row`` frees through
  the allocator), ``unlock``, free the row. Run here rather than by calling SGLang's function:
  its ``free_kv_row`` imports ``common`` at run time and the rest needs a whole ``Req``;
* ``evict(n)``: ``UnifiedRadixCache.evict_for_alloc(EvictParams(num_tokens=n))``, what
  ``BaseTokenToKVPoolAllocator.evict_to_free_tokens`` (``allocator/base.py:155``) calls for a
  shortfall of ``n``: it evicts until the allocator has ``n`` more free slots;
* ``lock`` / ``unlock`` / ``inc_lock_ref`` / ``dec_lock_ref``: the cache's own, with the receipt
  each ``inc_lock_ref`` returned (a node handle alone cannot release a unified lock). One
  release too many raises ``RuntimeError`` here instead of reaching the core: the Rust core
  panics and every later call on that instance fails.

Determinism: the Python core keeps process-wide state — the access clock
(``components/base.py:161``, a float counter), node ids (``UnifiedTreeNode.counter``) and lock
uuids (``next_component_uuid``). Each adapter keeps its own copies and swaps them in for every
call (``_swap``), so caches of one process do not perturb each other, as the legacy adapter shims
``time.monotonic``. Node ids are reported renumbered as radixbench's (root 0, tree nodes from 1
in creation order). With the Rust core, tree shape and counts come from a ``TreeShadow``.
Adapters of one load may be interleaved in one thread, not across threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import torch

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig, EvictResult, MatchResult
from radixbench.cache.interface import CacheAction, ImplInfo, OpTimer, TreeStats, time_standard_ops
from radixbench.cache.key import RadixKey
from radixbench.cache.sglang_adapter import _AllocatorShim, _ReqToTokenShim
from radixbench.cache.sglang_tree_shadow import TreeShadow
from radixbench.cache.sglang_unified import LoadedUnified

#: ``get_eviction_strategy`` of sglang 0.5.23 (``mem_cache/utils.py``): all run on both cores.
SERVED_POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru", "tlru")


class _ServedAllocatorShim(_AllocatorShim):
    """The allocator ``UnifiedRadixCache`` sees: frees go to radixbench's allocator (copies);
    no Mamba donor (``evict_for_alloc``). ``group()`` collects the frees of a block and frees
    them in one call at its end, as sglang 0.5.23's free group (``free_group_begin`` /
    ``free_group_end``, ``allocator/base.py:213-220``: one ``free(torch.cat(pending))``), which
    its scheduler opens around every batch's result processing, checkpoints included
    (``batch_result_processor.py:264,501``). The unified insert frees duplicates node by node
    (``unified_tree_core.py:1351-1362``); a paged ``free`` sorts its pages (``torch.unique``), so
    without the group the free list's page order (not the set) would depend on the tree's
    node boundaries."""

    _pending: list[torch.Tensor] | None = None

    def free(self, indices: torch.Tensor) -> None:
        if self._pending is None:
            super().free(indices)
        elif indices.numel():
            self._pending.append(indices.to(torch.int64, copy=True))

    def free_segment(self, indices: torch.Tensor, start_pos: int = 0) -> None:
        self.free(indices)

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        self._pending = []
        try:
            yield
        finally:
            pending, self._pending = self._pending, None
            if pending:
                self.allocator.free(torch.cat(pending))

    def mamba_full_cache_donor(self) -> None:
        return None


class _ReqProxy:
    """What ``checkpoint_into_tree`` (``unified_radix_cache.py:1164``) reads and writes of a
    ``Req``: ``full_untruncated_fill_ids``, ``origin_input_ids`` (their tokens: the prompt key
    splits the leaf), ``kv`` (row, protected / inserted lengths), namespace, priority, lock,
    ``last_node``, ``finished()``; no streaming session, rotation base or session id."""

    def __init__(self, req: Any, finished: bool) -> None:
        tokens = req.token_ids()
        self.full_untruncated_fill_ids = tokens
        self.origin_input_ids = tokens[: req.origin_input_len]
        self.kv = SimpleNamespace(
            req_pool_idx=req.req_pool_idx,
            cache_protected_len=req.cache_protected_len,
            cache_inserted_len=req.cache_inserted_len,
        )
        self.extra_key = req.extra_key
        self.cache_salt = getattr(req, "cache_salt", None)
        self.priority = req.priority
        self.session = self.session_id = self.kv_rotation_base = None
        self.lock = req.lock
        self.last_node = req.last_node
        self._finished = finished

    def finished(self) -> bool:
        return self._finished


def served_info(loaded: LoadedUnified) -> ImplInfo:
    """The report's description: label, spec, version, origin, class, tree core and why, files."""
    cls = loaded.cache_class
    return ImplInfo(
        label=loaded.label,
        spec=loaded.spec,
        version=loaded.version,
        origin=loaded.origin,
        cls=f"{cls.__module__}.{cls.__qualname__}",
        tree_core=loaded.core,
        tree_core_reason=loaded.core_reason,
        files=dict(loaded.files),
    )


class ServedSGLangCache:
    """sglang 0.5.23's ``UnifiedRadixCache`` (or a user's subclass) as a ``PrefixCache``.

    ``req_to_token_pool`` / ``token_to_kv_pool_allocator``: radixbench's (SGLang sees shims).
    ``config``: ``page_size``, ``policy`` (any of :data:`SERVED_POLICIES`) and
    ``policy_config`` (``eviction_policy_config``); ``evictor`` / ``matcher`` are SGLang's own.
    ``shadow``: keep the tree's shape in a :class:`TreeShadow` (default: for the Rust core only;
    the Python core's nodes are read directly). Raises ``ValueError`` (one line) for another
    policy. Sizes are in tokens; KV slots int64 tensors on the allocator's device."""

    def __init__(
        self,
        req_to_token_pool: ReqToTokenPool | None,
        token_to_kv_pool_allocator: TokenToKVPoolAllocator,
        config: CacheConfig,
        loaded: LoadedUnified,
        shadow: bool | None = None,
    ) -> None:
        if config.policy not in SERVED_POLICIES:
            raise ValueError(
                f"{loaded.label}: eviction policy {config.policy!r} is not supported by "
                f"UnifiedRadixCache (supported: {', '.join(SERVED_POLICIES)})"
            )
        self.loaded, self.config = loaded, config
        self.page_size = config.page_size
        self.allocator = token_to_kv_pool_allocator
        self.req_to_token_pool = req_to_token_pool
        self.device = torch.device(token_to_kv_pool_allocator.device)
        m = loaded.m
        self._RadixKey, bpc = m["radix"].RadixKey, m["bpc"]
        self._Match, self._Insert, self._Evict = (
            bpc.MatchPrefixParams,
            bpc.InsertParams,
            bpc.EvictParams,
        )
        self._cbase, self._node_cls = m["cbase"], m["utc"].UnifiedTreeNode
        cb = self._cbase
        self._clock, self._ids = 1.0, 0  # the values at import (``components/base.py:53``)
        self._uuids = {  # ``components/base.py:62``
            ct: (i + 1) * cb._COMPONENT_UUID_RANGE_SIZE
            for ct, i in cb._COMPONENT_UUID_RANGE_INDEX.items()
        }
        self._alloc_shim = _ServedAllocatorShim(token_to_kv_pool_allocator, self.page_size)
        events: dict[str, Any] = {}
        if config.kv_events is not None:
            from radixbench.cache.sglang_events import enable_native_hash, event_params

            if loaded.core == "python":
                enable_native_hash(loaded)
            events = event_params(loaded, config.kv_events)
        self.kv_events = bool(events)
        params = m["cip"].CacheInitParams(
            disable=False,
            req_to_token_pool=_ReqToTokenShim(req_to_token_pool) if req_to_token_pool else None,
            token_to_kv_pool_allocator=self._alloc_shim,
            page_size=self.page_size,
            eviction_policy=config.policy,
            eviction_policy_config=dict(config.policy_config) or None,
            tree_components=(m["ct"].ComponentType.FULL,),
            tree_core_backend=loaded.core,
            **events,
        )
        with loaded.activate(), self._swap():  # the registry imports its core at run time
            self.sgl = loaded.cache_class(params)
        self.core = self.sgl.tree_core
        self.rust = loaded.core == "rust"
        self._receipts: dict[int, list[Any]] = {}
        self._victims: list[int] = []
        self._raw = {
            op: getattr(self.sgl, op)
            for op in ("insert", "match_prefix", "inc_lock_ref", "dec_lock_ref")
        }
        self._inner: dict[str, Callable[..., Any]] = dict(self._raw)
        use_shadow = self.rust if shadow is None else shadow
        self._after_reset()
        self.shadow = (
            TreeShadow(self.core, m["ct"].ComponentType.FULL, self._root) if use_shadow else None
        )
        for op in self._raw:
            setattr(self.sgl, op, self._logged(op))
        evict_leaf = self.sgl._evict_device_leaf

        def _evict_device_leaf(node_id: int, tracker: Any) -> Any:
            self._victims.append(node_id)
            if self.shadow is not None:
                self.shadow.on_evict(node_id)
            return evict_leaf(node_id, tracker)

        self.sgl._evict_device_leaf = _evict_device_leaf

    # ------------------------------------------------------------------ plumbing
    def _swap(self) -> Any:
        return _Swap(self)

    def _after_reset(self) -> None:
        self._root = int(self.core.root_node_handle(None))
        # the first id a tree node gets: the Rust core mints root + 1; the Python core's LRU
        # sentinels take ids after the root's
        self._base = self._root + 1 if self.rust else self._ids
        self._receipts.clear()

    def _logged(self, op: str) -> Callable[..., Any]:
        """SGLang's ``op`` as the cache calls it on itself: events for the shadow, receipts."""
        shadow = self.shadow
        inner = self._inner

        def call(*args: Any, **kwargs: Any) -> Any:
            if shadow is not None:
                shadow.sync()
            if kwargs:  # the timer passes positional arguments only; SGLang's keyword
                args = (*args, *kwargs.values())  # arguments here are the trailing ones
            r = inner[op](*args)
            if shadow is not None:
                if op == "insert" or op == "match_prefix":
                    shadow.on_node(int(r.last_device_node))
                else:
                    shadow.on_lock(int(args[0]), 1 if op == "inc_lock_ref" else -1)
            return r

        return call

    def _key(self, key: RadixKey, copy: bool = False) -> Any:
        if key.is_bigram:
            raise ValueError(f"{self.loaded.label}: bigram (EAGLE) keys are not supported")
        ids, n = key.token_ids, len(key)
        if n < len(ids) and not copy:
            return self._RadixKey(ids, key.extra_key, cache_salt=key.cache_salt, limit=n)
        ids = ids[:n] if n < len(ids) else (ids[:] if copy else ids)
        return self._RadixKey(ids, key.extra_key, cache_salt=key.cache_salt)

    def info(self) -> ImplInfo:
        return served_info(self.loaded)

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """``UnifiedRadixCache.reset``: drop the tree (KV slots are not freed); ids restart."""
        with self._swap():
            self._ids = 0
            self.sgl.reset()
        self._after_reset()
        if self.shadow is not None:
            self.shadow.reset(self._root)

    def evictable_size(self) -> int:
        return int(self.sgl.evictable_size())

    def protected_size(self) -> int:
        return int(self.sgl.protected_size())

    def total_size(self) -> int:
        return int(self.sgl.evictable_size() + self.sgl.protected_size())

    @property
    def num_nodes(self) -> int:
        return self.tree_stats()[0]

    @property
    def num_evictable_leaves(self) -> int:
        return self.tree_stats()[2]

    def tree_stats(self) -> TreeStats:
        """``(nodes, tokens, evictable leaves)``, O(1): the Python core's node arena and
        ``evictable_device_leaves``, or the shadow's counts."""
        sgl = self.sgl
        tokens = int(sgl.evictable_size() + sgl.protected_size())
        if self.shadow is not None:
            nodes, leaves = self.shadow.stats()
            return nodes, tokens, leaves
        core = self.core
        return len(core._node_arena) - 1, tokens, len(core.evictable_device_leaves)

    def node_id(self, node: Any) -> int:
        """radixbench's numbering: root 0, tree nodes 1, 2, ... in creation order."""
        node = int(node)
        return 0 if node == self._root else node - self._base + 1

    def walk(self) -> Iterator[tuple[int, int]]:
        """``(node id, parent id)`` depth first; children in the Python core's dict order (the
        shadow keeps the same order for the Rust core)."""
        if self.shadow is not None:
            yield from self.shadow.walk(self.node_id)
            return
        stack = list(reversed(self.core.root_node.children.values()))
        while stack:
            node = stack.pop()
            yield self.node_id(node.id), self.node_id(node.parent.id)
            if node.children:
                stack.extend(reversed(node.children.values()))

    def held_slots(self) -> torch.Tensor:
        """int64: every FULL device value of the tree (``all_values_flatten``)."""
        return self.core.all_values_flatten().to(torch.int64)

    def node_handle(self, node_id: int) -> int:
        """The core's handle of radixbench-numbered ``node_id`` (inverse of ``node_id``)."""
        return self._root if node_id == 0 else node_id + self._base - 1

    def node_value(self, node_id: int) -> torch.Tensor:
        """The KV slots of node ``node_id`` (radixbench numbering; tests)."""
        full = self.loaded.m["ct"].ComponentType.FULL
        return self.core.get_component_device_value(self.node_handle(node_id), full)

    def lock_ref(self, node: Any) -> int:
        """The FULL lock count of ``node`` (tests)."""
        if self.shadow is not None:
            return self.shadow.lock_count(int(node))
        ct = self.loaded.m["ct"].ComponentType.FULL
        return int(self.core.node_by_id(int(node)).component_data[ct].lock_ref)

    def take_actions(self) -> list[CacheAction]:
        """The real recorder's events since the last call (``UnifiedRadixCache.take_events``,
        as sglang's publisher drains them), as radixbench's dataclasses
        (``sglang_events.from_sglang``); ``[]`` with events off (``config.kv_events`` None:
        ``enable_kv_cache_events=False``). The first drain holds the ``AllBlocksCleared`` of
        construction."""
        if not self.kv_events:
            return []
        from radixbench.cache.sglang_events import from_sglang

        return [from_sglang(e) for e in self.sgl.take_events()]

    def instrument(self, timer: OpTimer) -> None:
        """``time_standard_ops`` around the adapter's operations, and the timer around SGLang's
        own ``insert`` / ``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref`` as its
        ``checkpoint`` / ``lock`` / ``unlock`` call them (one row per logical operation, as
        ``SGLangCache.instrument``). Mutates this adapter and the SGLang instance."""
        time_standard_ops(self, timer)
        stats = self.tree_stats

        def params_len(params: Any, *_: Any) -> int:
            return len(params.key)

        def no_key(*_: Any) -> int:
            return 0

        inner = {
            "insert": (params_len, lambda r, *_: int(r.prefix_len)),
            "match_prefix": (params_len, lambda r, *_: int(r.device_prefix_len)),
            "inc_lock_ref": (no_key, lambda r, *_: int(r.delta or 0)),
            "dec_lock_ref": (no_key, lambda r, *_: int(r.delta or 0)),
        }
        for op, (key_len, result) in inner.items():
            self._inner[op] = timer.timed(op, self._raw[op], stats, key_len, result)

    # ------------------------------------------------------------------ tree
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """``UnifiedRadixCache.match_prefix``; ``device_indices`` = int64
        ``path_device_indices(last node)[:prefix_len]``. Mutates access times; may split one
        node. Raises ``ValueError`` for bigram keys."""
        params = self._Match(key=self._key(key))
        with self._swap():
            if self.shadow is not None:
                self.shadow.sync()
            r = self._raw["match_prefix"](params)
            node, n = r.last_device_node, r.device_prefix_len
            if self.shadow is not None:
                self.shadow.on_node(int(node))
            indices = self.sgl.path_device_indices(node)[:n]
        return MatchResult(indices.to(torch.int64), node, int(n))

    def insert(
        self,
        key: RadixKey,
        value: torch.Tensor | None = None,
        priority: int = 0,
        inserted_len: int = 0,
    ) -> int:
        """``UnifiedRadixCache.insert`` of the page-aligned key, ``prev_prefix_len = len(key)``
        (no duplicate freed: the caller frees ``value[:returned]``); returns the tokens already
        cached. Mutates the tree and sizes."""
        k = self._key(key, copy=True).page_aligned(self.page_size)
        params = self._Insert(
            key=k,
            value=None if value is None else value[: len(k)],
            prev_prefix_len=len(k),
            priority=priority,
            inserted_len=inserted_len,
        )
        with self._swap():
            if self.shadow is not None:
                self.shadow.sync()
            r = self._raw["insert"](params)
            if self.shadow is not None:
                self.shadow.on_node(int(r.last_device_node))
        return int(r.prefix_len)

    def evict(self, num_tokens: int) -> EvictResult:
        """``evict_for_alloc(EvictParams(num_tokens))``: evicts until the allocator has
        ``num_tokens`` more free slots (or nothing evictable is left); victims' ids in order."""
        victims: list[int] = []
        self._victims = victims
        with self._swap():
            if self.shadow is not None:
                self.shadow.sync()
            r = self.sgl.evict_for_alloc(self._Evict(num_tokens=num_tokens))
        return EvictResult(int(r.num_tokens_evicted), [self.node_id(v) for v in victims])

    def inc_lock_ref(self, node: Any) -> int:
        """``UnifiedRadixCache.inc_lock_ref``; keeps the receipt. Change of evictable size."""
        before = self.sgl.evictable_size()
        with self._swap():
            if self.shadow is not None:
                self.shadow.sync()
            r = self._raw["inc_lock_ref"](node)
        if self.shadow is not None:
            self.shadow.on_lock(int(node), 1)
        self._receipts.setdefault(int(node), []).append(r.to_dec_params())
        return int(self.sgl.evictable_size() - before)

    def dec_lock_ref(self, node: Any) -> int:
        """``UnifiedRadixCache.dec_lock_ref`` with the latest receipt of ``node``; raises
        ``RuntimeError`` when ``node`` holds none (an unbalanced release)."""
        receipts = self._receipts.get(int(node))
        if not receipts:
            raise RuntimeError(f"dec_lock_ref: node {self.node_id(node)} is not locked here")
        before = self.sgl.evictable_size()
        with self._swap():
            if self.shadow is not None:
                self.shadow.sync()
            self._raw["dec_lock_ref"](node, receipts.pop())
        if self.shadow is not None:
            self.shadow.on_lock(int(node), -1)
        return int(self.sgl.evictable_size() - before)

    def lock(self, node: Any) -> Any:
        """``UnifiedRadixCache.lock``: a ``TreeLock``."""
        with self._swap():
            return self.sgl.lock(node)

    def unlock(self, handle: Any) -> None:
        """``UnifiedRadixCache.unlock``; ``None`` is a no-op; a handle released twice raises
        ``RuntimeError``."""
        if handle is None:
            return
        if getattr(handle, "_radixbench_released", False):
            raise RuntimeError("unlock: this lock was already released")
        with self._swap():
            self.sgl.unlock(handle)
        handle._radixbench_released = True

    def path_device_indices(self, node: Any) -> torch.Tensor:
        return self.sgl.path_device_indices(node)

    # ------------------------------------------------------------------ requests
    def _checkpoint(self, req: Any, up_to: int, finished: bool) -> None:
        proxy = _ReqProxy(req, finished)
        with self._swap(), self._alloc_shim.group():
            if self.shadow is not None:
                self.shadow.sync()
            self.sgl.checkpoint(proxy, up_to=up_to)
        if req.lock is not None and req.lock is not proxy.lock:
            req.lock._radixbench_released = True
        req.cache_protected_len = proxy.kv.cache_protected_len
        req.cache_inserted_len = proxy.kv.cache_inserted_len
        req.lock = proxy.lock
        req.last_node = proxy.last_node

    def checkpoint(self, req: Any, up_to: int) -> None:
        """``UnifiedRadixCache.checkpoint(req, up_to=up_to)`` of an unfinished request, as
        ``checkpoint_kv_cache`` (``common.py:271``); copies ``cache_protected_len``,
        ``cache_inserted_len``, ``lock`` and ``last_node`` back onto ``req``. Mutates the tree,
        the allocator (duplicates freed by the unified insert) and ``req``'s row."""
        self._checkpoint(req, up_to, finished=False)

    def release(self, req: Any, owned_len: int, checkpoint: bool) -> None:
        """``release_kv_cache`` (``common.py:400``) for a FULL tree: with ``checkpoint`` the
        final checkpoint (finished request, untimed here as radixbench's helper); free a copy
        of ``req_to_token[row, cache_protected_len:owned_len]``; unlock; free the row. Raises
        ``RuntimeError`` without a ``ReqToTokenPool``."""
        pool = self.req_to_token_pool
        if pool is None:
            raise RuntimeError("release needs a ReqToTokenPool")
        if checkpoint:
            self._checkpoint(req, owned_len, finished=True)
        start = req.cache_protected_len
        if owned_len > start:
            row = pool.req_to_token[req.req_pool_idx, start:owned_len]
            self.allocator.free(row.to(torch.int64, copy=True))
        ServedSGLangCache.unlock(self, req.lock)
        req.lock = None
        req.last_node = None
        pool.free(req.req_pool_idx)


class _Swap:
    """Context manager: the adapter's Python-core clock, node counter and lock uuids are the
    process-wide ones for the block (``components/base.py:53,161,168``)."""

    __slots__ = ("c",)

    def __init__(self, cache: ServedSGLangCache) -> None:
        self.c = cache

    def __enter__(self) -> None:
        c = self.c
        c._cbase._LAST_ACCESS_TIME_COUNTER_FLOAT = c._cbase.float64(c._clock)
        c._cbase._COMPONENT_UUID_COUNTERS = c._uuids
        c._node_cls.counter = c._ids

    def __exit__(self, *exc: Any) -> None:
        c = self.c
        c._clock = float(c._cbase._LAST_ACCESS_TIME_COUNTER_FLOAT)
        c._ids = c._node_cls.counter
