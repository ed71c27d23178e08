"""SGLang's served cache, ``UnifiedRadixCache`` (Rust or Python tree core), as a ``PrefixCache``.

``ServedSGLangCache`` builds the class of a ``Loaded`` (``unified_load.load_unified``)
as ``create_unified_radix_cache`` does for a full-attention model (``mem_cache/registry.py:149``:
``tree_components = (FULL,)``, no HiCache, no metrics; KV events only when ``config.kv_events``
asks, :mod:`radixbench.cache.sglang.events`) with the load's tree core
(``CacheInitParams.tree_core_backend``), and drives it as sglang 0.5.23's scheduler does (each
method says which call it makes): inserts that free no duplicates (the caller frees them, as
``PrefixCache.insert`` says), checkpoints and releases as ``checkpoint_kv_cache`` /
``release_kv_cache`` (``mem_cache/common.py:271,400``), eviction through ``evict_for_alloc`` as
the allocator's ``evict_to_free_tokens`` (``allocator/base.py:155``), lock releases with the
receipt each ``inc_lock_ref`` returned (a node handle alone cannot release a unified lock).
What SGLang sees of radixbench's pools and requests: :mod:`radixbench.cache.sglang.shims`.

Determinism: the Python core keeps process-wide state (access clock, node ids, lock uuids);
each adapter keeps its own copies and swaps them in for every call (``ServedState``,
:mod:`radixbench.cache.sglang.process_state`), so caches of one process do not perturb each
other. Node ids are reported renumbered as radixbench's (root 0, tree nodes from 1 in creation
order), and with the Rust core tree shape and counts come from a ``TreeShadow``
(``ServedTree``, :mod:`radixbench.cache.sglang.served_tree`). Adapters of one load may be
interleaved in one thread, not across threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig
from radixbench.cache.interface import (
    CacheAction,
    EvictResult,
    MatchResult,
    OpTimer,
    TreeStats,
)
from radixbench.cache.key import RadixKey
from radixbench.cache.sglang.adapter import SGLangAdapter
from radixbench.cache.sglang.loader import Loaded
from radixbench.cache.sglang.process_state import ServedState
from radixbench.cache.sglang.report import (
    INNER_OPS,
    copy_back,
    core_calls,
    timed_core_calls,
    timed_inner_ops,
)
from radixbench.cache.sglang.served_tree import ServedTree
from radixbench.cache.sglang.shims import (
    ReqToTokenShim,
    ServedAllocatorShim,
    ServedReqProxy,
    sglang_key,
    write_back,
)
from radixbench.cache.sglang.tree_core import built_core

#: ``get_eviction_strategy`` of sglang 0.5.23 (``mem_cache/utils.py``): all run on both cores.
SERVED_POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru", "tlru")


class ServedSGLangCache(SGLangAdapter):
    """sglang 0.5.23's ``UnifiedRadixCache`` (or a user's subclass) as a ``PrefixCache``.

    ``req_to_token_pool`` / ``token_to_kv_pool_allocator``: radixbench's (SGLang sees shims).
    ``config``: ``page_size``, ``policy`` (any of :data:`SERVED_POLICIES`) and
    ``policy_config`` (``eviction_policy_config``); ``evictor`` / ``matcher`` are SGLang's own.
    ``shadow``: keep the tree's shape in a ``TreeShadow`` (default: for the Rust core only;
    the Python core's nodes are read directly). ``tree``: the tree as radixbench reads it
    (``ServedTree``: numbering, counts, walk, a node's slots and lock count). Raises
    ``ValueError`` (one line) for another policy. Sizes are in tokens; KV slots int64 tensors on
    the allocator's device."""

    def __init__(
        self,
        req_to_token_pool: ReqToTokenPool | None,
        token_to_kv_pool_allocator: TokenToKVPoolAllocator,
        config: CacheConfig,
        loaded: Loaded,
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
        self._state = ServedState(m["cbase"], m["utc"].UnifiedTreeNode)
        self._alloc_shim = ServedAllocatorShim(token_to_kv_pool_allocator, self.page_size)
        events: dict[str, Any] = {}
        if config.kv_events is not None:
            from radixbench.cache.sglang.events import enable_native_hash, event_params

            if loaded.core == "python":
                enable_native_hash(loaded)
            events = event_params(loaded, config.kv_events)
        self.kv_events = bool(events)
        params = m["cip"].CacheInitParams(
            disable=False,
            req_to_token_pool=ReqToTokenShim(req_to_token_pool) if req_to_token_pool else None,
            token_to_kv_pool_allocator=self._alloc_shim,
            page_size=self.page_size,
            eviction_policy=config.policy,
            eviction_policy_config=dict(config.policy_config) or None,
            tree_components=(m["ct"].ComponentType.FULL,),
            tree_core_backend=loaded.core,
            **events,
        )
        self._params = params  # a HiCache subclass passes them on to ``init_hicache``
        with loaded.activate(), self._state:  # the registry imports its core at run time
            self.sgl = loaded.cache_class(params)
        self.core = self.sgl.tree_core
        #: the core this instance built and why (a subclass may build another than its load's)
        self.core_name, self.core_reason = built_core(loaded, self.sgl, params, m)
        self.rust = self.core_name == "rust"
        #: node -> the receipts of its ``inc_lock_ref`` calls (a unified lock is released with
        #: its receipt, not the node alone)
        self._receipts: dict[int, list[Any]] = {}
        #: SGLang's own methods, unwrapped (what the adapter's methods call; the cache's
        #: calls on itself go through the tree's hooks, timed once instrumented)
        self._raw = {op: getattr(self.sgl, op) for op in INNER_OPS}
        use_shadow = self.rust if shadow is None else shadow
        full = m["ct"].ComponentType.FULL
        tiered = config.hicache is not None
        self.tree = ServedTree(self.sgl, full, self.rust, self._state, use_shadow, tiered)
        self.tree.hook(self._raw)
        #: SGLang's calls alone, by op (what ``instrument`` times: the adapter's key and
        #: result conversions, shadow and state swaps run around them, untimed)
        self._sgl_calls = core_calls(self.sgl, self._raw, self._alloc_shim, req_to_token_pool)
        self._call: dict[str, Callable[..., Any]] = dict(self._sgl_calls)
        #: what a row of ``insert`` / a lock call records besides SGLang's arguments (the
        #: key's length, the evictable size before), set before the call
        self._arg = [0]

    # ------------------------------------------------------------------ plumbing
    def _key(self, key: RadixKey, copy: bool = False) -> Any:
        return sglang_key(self._RadixKey, key, self.loaded.label, copy, takes_limit=True)

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """``UnifiedRadixCache.reset``: drop the tree (KV slots are not freed); ids restart."""
        with self._state:
            self._state.ids = 0
            self.sgl.reset()
        self._receipts.clear()
        self.tree.reset()

    @property
    def num_nodes(self) -> int:
        return self.tree.counts()[0]

    @property
    def num_evictable_leaves(self) -> int:
        return self.tree.counts()[1]

    def tree_stats(self) -> TreeStats:
        """``(nodes, tokens, evictable leaves)``, O(1) (``ServedTree.counts``)."""
        nodes, leaves = self.tree.counts()
        return nodes, int(self.sgl.evictable_size() + self.sgl.protected_size()), leaves

    def node_id(self, node: Any) -> int:
        """radixbench's numbering: root 0, tree nodes 1, 2, ... in creation order."""
        return self.tree.node_id(node)

    def walk(self) -> Iterator[tuple[int, int]]:
        """``(node id, parent id)`` depth first (``ServedTree.walk``)."""
        return self.tree.walk()

    def held_slots(self) -> torch.Tensor:
        """int64: every FULL device value of the tree (``all_values_flatten``)."""
        return self.core.all_values_flatten().to(torch.int64)

    def take_actions(self) -> list[CacheAction]:
        """The real recorder's events since the last call (``UnifiedRadixCache.take_events``,
        as sglang's publisher drains them), as radixbench's dataclasses
        (``events.from_sglang``); ``[]`` with events off (``config.kv_events`` None:
        ``enable_kv_cache_events=False``). The first drain holds the ``AllBlocksCleared`` of
        construction."""
        if not self.kv_events:
            return []
        from radixbench.cache.sglang.events import from_sglang

        return [from_sglang(e) for e in self.sgl.take_events()]

    def instrument(self, timer: OpTimer) -> None:
        """Put ``timer`` around SGLang's calls alone (``report.timed_core_calls``: the
        adapter's conversions, shadow, checks and state swaps stay outside) and around SGLang's
        own ``insert`` / ``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref`` as the cache
        calls them on itself (one row per logical operation:
        :mod:`radixbench.cache.sglang.report`), installed on the instance as SGLang's code
        calls them (``ServedTree.install``: the shadow is fed in the timer's stats and result
        reads, outside every timed ns). What stays inside a timed call and is not SGLang's:
        the timer's own frame around each nested call (less its calibrated cost,
        ``OpRecorder.nested_ns``), ``dec_lock_ref``'s keyword shim and one frame per eviction
        victim (the victim hook), measured by ``bench served``'s adapter case. Mutates this
        adapter (its ``_call`` table) and the SGLang instance."""
        self._call = timed_core_calls(
            timer, self._sgl_calls, self.tree_stats, self.sgl.evictable_size, self._arg
        )
        self.tree.install(timed_inner_ops(timer, self._raw, self.tree_stats, self.tree.feed))

    # ------------------------------------------------------------------ tree
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """``UnifiedRadixCache.match_prefix(MatchPrefixParams(key))``; ``device_indices`` =
        int64 ``path_device_indices(last node)[:prefix_len]`` (SGLang's ``MatchResult`` carries
        none). Mutates access times; may split one node. Raises ``ValueError`` for bigram
        keys."""
        params = self._Match(key=self._key(key))
        with self._state:
            self.tree.sync()
            r, indices = self._call["match_prefix"](params)
            node = r.last_device_node
            self.tree.on_node(node)
        return MatchResult(indices.to(torch.int64), node, int(r.device_prefix_len))

    def insert(
        self, key: RadixKey, value: Tensor | None = None, priority: int = 0, inserted_len: int = 0
    ) -> int:
        """``UnifiedRadixCache.insert`` of the page-aligned key with ``prev_prefix_len =
        len(key)``; returns the tokens already cached. The unified insert frees the duplicates
        ``value[prev_prefix_len:prefix_len]`` itself (``unified_tree_core.py:1351``); this one
        frees none, so the caller frees ``value[:returned]`` (radixbench's and the legacy
        class's contract). Mutates the tree and sizes. Raises ``ValueError`` for bigram keys."""
        params = self._insert_params(key, value, priority, inserted_len)
        with self._state:
            self.tree.sync()
            self._arg[0] = len(key)
            r = self._call["insert"](params)
            self.tree.on_node(r.last_device_node)
        return int(r.prefix_len)

    def _insert_params(
        self, key: RadixKey, value: Tensor | None, priority: int, inserted_len: int, **extra: Any
    ) -> Any:
        """``InsertParams`` of the page-aligned key (token ids copied), ``prev_prefix_len =
        len(key)`` so that the unified insert frees no duplicates; ``extra``: more fields."""
        k = self._key(key, copy=True).page_aligned(self.page_size)
        value = None if value is None else value[: len(k)]
        return self._Insert(
            key=k, value=value, prev_prefix_len=len(k), priority=priority,
            inserted_len=inserted_len, **extra,
        )  # fmt: skip

    def evict(self, num_tokens: int) -> EvictResult:
        """``UnifiedRadixCache.evict_for_alloc(EvictParams(num_tokens))``, what the allocator's
        ``evict_to_free_tokens`` (``allocator/base.py:155``) calls for a shortfall: evicts until
        the allocator has ``num_tokens`` more free slots (or nothing evictable is left), freeing
        the victims' slots through it; returns the tokens evicted and the victims' ids (radixbench
        numbering) in order."""
        params = self._Evict(num_tokens=num_tokens)
        self.tree.victims.clear()
        with self._state:
            self.tree.sync()
            r = self._call["evict"](params)
        victims = self.tree.take_victims()
        return EvictResult(int(r.num_tokens_evicted), [self.tree.node_id(v) for v in victims])

    def inc_lock_ref(self, node: Any) -> int:
        """``UnifiedRadixCache.inc_lock_ref``; keeps the receipt for ``dec_lock_ref``. Change of
        the evictable size."""
        before = self._arg[0] = self.sgl.evictable_size()
        with self._state:
            self.tree.sync()
            r = self._call["inc_lock_ref"](node)
        self.tree.on_lock(node, 1)
        self._receipts.setdefault(int(node), []).append(r.to_dec_params())
        return int(self.sgl.evictable_size() - before)

    def dec_lock_ref(self, node: Any) -> int:
        """``UnifiedRadixCache.dec_lock_ref`` with the latest receipt of ``node``; change of the
        evictable size. Raises ``RuntimeError`` when ``node`` holds none (an unbalanced release,
        kept from the core: the Rust core panics and every later call on it fails)."""
        receipts = self._receipts.get(int(node))
        if not receipts:
            raise RuntimeError(f"dec_lock_ref: node {self.node_id(node)} is not locked here")
        before = self._arg[0] = self.sgl.evictable_size()
        with self._state:
            self.tree.sync()
            self._call["dec_lock_ref"](node, receipts.pop())
        self.tree.on_lock(node, -1)
        return int(self.sgl.evictable_size() - before)

    def lock(self, node: Any) -> Any:
        """``UnifiedRadixCache.lock``: a ``TreeLock``."""
        with self._state:
            return self.sgl.lock(node)

    def unlock(self, handle: Any) -> None:
        """``UnifiedRadixCache.unlock``; ``None`` is a no-op; a handle released twice raises
        ``RuntimeError`` (kept from the core, as in ``dec_lock_ref``)."""
        if handle is None:
            return
        if getattr(handle, "_radixbench_released", False):
            raise RuntimeError("unlock: this lock was already released")
        with self._state:
            self.sgl.unlock(handle)
        handle._radixbench_released = True

    # ------------------------------------------------------------------ requests
    def checkpoint(self, req: Any, up_to: int) -> None:
        """``UnifiedRadixCache.checkpoint(req, up_to=up_to)`` (``unified_radix_cache.py:
        1159-1336``) of an unfinished request on a ``ServedReqProxy``, as ``checkpoint_kv_cache``
        (``common.py:271``) calls it; copies ``cache_protected_len``, ``cache_inserted_len``,
        ``lock`` and ``last_node`` back onto ``req``. Mutates the tree, the allocator (its
        inserts free the duplicates themselves, ``prev_prefix_len = cache_protected_len``, in
        one free group) and ``req``'s row."""
        proxy = ServedReqProxy(req, False)
        with self._state:
            self.tree.sync()
            self._call["checkpoint"](proxy, up_to)
        copy_back(proxy, req)

    def release(self, req: Any, owned_len: int, checkpoint: bool) -> None:
        """``release_kv_cache`` (``common.py:400-444``) for a FULL tree
        (:func:`~radixbench.cache.sglang.shims.release_kv_cache`): with ``checkpoint`` the final
        checkpoint (``req.finished()`` true; not a row of its own, as radixbench's helper);
        free a copy of ``req_to_token[row, cache_protected_len:owned_len]``; SGLang's
        ``unlock``; free the row. The request's proxy and the lock's check are made before the
        timed call; afterwards the lock ``req`` held is marked released (the adapter's
        ``unlock`` refuses it). Raises ``RuntimeError`` without a ``ReqToTokenPool``, or when
        ``req``'s lock was released already (nothing is changed then)."""
        lock = req.lock
        if getattr(lock, "_radixbench_released", False):
            raise RuntimeError("release: the request's lock was already released")
        final = None
        if checkpoint:
            proxy, ckpt = ServedReqProxy(req, True), self._sgl_calls["checkpoint"]

            def final() -> None:  # the request's last checkpoint, its changes written back
                ckpt(proxy, owned_len)
                write_back(proxy, req)

        with self._state:
            self.tree.sync()
            self._call["release"](req, owned_len, final, self.sgl.unlock)
        if lock is not None:
            lock._radixbench_released = True
