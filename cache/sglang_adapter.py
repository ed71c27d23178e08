"""Run SGLang's real ``RadixCache`` behind radixbench's cache API.

``SGLangCache`` wraps an instance of the ``cache_class`` of a ``LoadedSGLang``
(``sglang_loader.load_sglang``), built as the scheduler of sglang 0.5.23 builds it:
``RadixCache(CacheInitParams(disable=False, req_to_token_pool=..., token_to_kv_pool_allocator=
..., page_size=..., eviction_policy=..., eviction_policy_config=...))``, and presents the API of
``radixbench.cache.radix_cache.RadixCache`` so the simulator drives both alike. Every tree
operation is SGLang's own code; the adapter only converts keys and results, and adds:

* a clock: SGLang reads ``time.monotonic()`` in ``TreeNode.__init__`` (twice: access, then
  creation time), ``_match_prefix_helper`` and ``_insert_helper``. The loaded module's ``time``
  global is replaced by a ``_TimeShim`` whose ``monotonic`` calls the clock of the adapter
  being driven (set on entry of each call) and whose other attributes are the real ``time``'s;
* per-adapter node ids: SGLang numbers nodes with the class-wide ``TreeNode.counter``; the
  adapter sets it to its own next id on entry and reads it back on exit, so ids start at 0
  (the root) in each adapter, as in radixbench's cache, and ``num_nodes`` is kept in O(1) from
  the ids handed out minus the leaves deleted;
* eviction victims: the instance's ``_delete_leaf`` is wrapped to record node ids in order.

Both swaps make adapters of one loaded module safe to interleave in one thread, not across
threads. Not supported: bigram (EAGLE) keys (``ValueError``: SGLang turns the whole tree into
bigram mode with ``is_eagle``, radixbench packs bigrams per key), policy ``tlru``
(``SGLangLoadError``: 0.5.23's ``RadixCache`` keeps no T-LRU lengths; only ``UnifiedRadixCache``
does) unless the ``cache_class`` declares ``keeps_tlru_lengths = True`` (a subclass that adds
the unified tree's bookkeeping, as tests/cache/test_sglang_fidelity.py builds), KV events and
metrics (their modules are stubbed by the loader).
"""

from __future__ import annotations

import inspect
import itertools
import time
from array import array
from collections.abc import Callable, Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig, EvictResult, MatchResult
from radixbench.cache.interface import (
    CacheAction,
    ImplInfo,
    OpTimer,
    TreeStats,
    time_standard_ops,
)
from radixbench.cache.key import RadixKey
from radixbench.cache.sglang_loader import LoadedSGLang, SGLangLoadError

#: Eviction policies of 0.5.23's ``get_eviction_strategy`` that its ``RadixCache`` supports.
SGLANG_POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru")


class _TimeShim:
    """Stands in for the ``time`` module in a loaded SGLang module: ``monotonic()`` returns
    ``clock()``; every other attribute is the real ``time`` module's."""

    def __init__(self, real: ModuleType) -> None:
        self._real = real
        self.clock: Callable[[], float] = real.monotonic

    def monotonic(self) -> float:
        return self.clock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _install_time_shim(module: ModuleType) -> _TimeShim | None:
    """Replace ``module.time`` by a ``_TimeShim`` (once); ``None`` if it has no ``time``."""
    current = getattr(module, "time", None)
    if isinstance(current, _TimeShim):
        return current
    if current is not time:
        return None
    shim = _TimeShim(time)
    module.time = shim  # type: ignore[attr-defined]
    return shim


class _AllocatorShim:
    """The ``token_to_kv_pool_allocator`` SGLang sees: frees go to radixbench's allocator, as
    copies. sglang 0.5.23's allocators never keep the tensor they free (``torch.cat`` into the
    free list, ``allocator/token.py:73``; ``torch.unique`` of its pages, ``paged.py:333``), and
    SGLang frees views of a ``req_to_token`` row it then rewrites (``_insert_cache``), while
    radixbench's allocator keeps what it is given (its class docstring, Ownership)."""

    def __init__(self, allocator: TokenToKVPoolAllocator, page_size: int) -> None:
        self.allocator = allocator
        self.device = allocator.device
        self.page_size = page_size

    def free(self, indices: torch.Tensor) -> None:
        if indices.numel():
            self.allocator.free(indices.to(torch.int64, copy=True))

    def free_segment(self, indices: torch.Tensor, start_pos: int = 0) -> None:
        if indices.numel():
            self.allocator.free(indices.to(torch.int64, copy=True))

    def available_size(self) -> int:
        return self.allocator.available_size()


class _ReqToTokenShim:
    """The ``req_to_token_pool`` SGLang sees: radixbench's int32 ``req_to_token`` table."""

    def __init__(self, pool: ReqToTokenPool) -> None:
        self.req_to_token = pool.req_to_token

    def write(self, indices: tuple[int, slice], values: torch.Tensor) -> None:
        self.req_to_token[indices] = values.to(self.req_to_token.dtype)


class _ReqProxy:
    """What 0.5.23's ``checkpoint`` / ``_insert_cache`` read and write of a ``Req``."""

    def __init__(self, req: Any) -> None:
        self.full_untruncated_fill_ids: array = req.token_ids()
        self.kv = SimpleNamespace(
            req_pool_idx=req.req_pool_idx,
            cache_protected_len=req.cache_protected_len,
            cache_inserted_len=req.cache_inserted_len,
            swa_evict_floor=0,  # no sliding window: ceil_align (stubbed) is never called
        )
        self.extra_key = req.extra_key
        self.cache_salt = getattr(req, "cache_salt", None)
        self.priority = req.priority
        self.origin_input_ids = range(req.origin_input_len)  # only its len is read
        self.lock = req.lock
        self.last_node = req.last_node


def policy_error(loaded: LoadedSGLang, policy: str) -> str | None:
    """Why ``loaded``'s cache class cannot run eviction ``policy`` (one line), or ``None``:
    0.5.23's ``RadixCache`` supports :data:`SGLANG_POLICIES`; ``tlru`` only a class that
    declares ``keeps_tlru_lengths = True``."""
    if policy in SGLANG_POLICIES:
        return None
    if policy == "tlru" and getattr(loaded.cache_class, "keeps_tlru_lengths", False):
        return None
    return (
        f"eviction policy {policy!r} is not supported by {loaded.cache_class.__qualname__} "
        f"(supported: {', '.join(SGLANG_POLICIES)})"
    )


def sglang_info(loaded: LoadedSGLang) -> ImplInfo:
    """The report's description of a load: label, spec, version, origin, class, files."""
    cls = loaded.cache_class
    return ImplInfo(
        label=loaded.label,
        spec=loaded.spec,
        version=loaded.version,
        origin=loaded.origin,
        cls=f"{cls.__module__}.{cls.__qualname__}",
        files=dict(loaded.files),
    )


class SGLangCache:
    """SGLang's ``RadixCache`` (or a user's class) with radixbench's cache API.

    ``req_to_token_pool`` / ``token_to_kv_pool_allocator``: radixbench's
    (``allocator.ReqToTokenPool``, ``TokenToKVPoolAllocator`` or the paged one); SGLang sees
    shims over them. ``config``: ``page_size``, ``policy`` (and ``policy_config`` when the
    config has one, passed as ``eviction_policy_config``) are used; ``evictor`` / ``matcher``
    are SGLang's own and ignored. ``clock``: replaces ``time.monotonic`` (default: a counter
    1, 2, ... so runs are reproducible). Raises ``SGLangLoadError`` (a ``ValueError``, one
    line) for a policy SGLang's ``RadixCache`` does not support (``tlru`` only when
    ``loaded.cache_class.keeps_tlru_lengths`` is true). Sizes are in tokens.
    """

    def __init__(
        self,
        req_to_token_pool: ReqToTokenPool | None,
        token_to_kv_pool_allocator: TokenToKVPoolAllocator,
        config: CacheConfig,
        loaded: LoadedSGLang,
        clock: Callable[[], float] | None = None,
    ) -> None:
        tlru_ok = config.policy == "tlru" and getattr(
            loaded.cache_class, "keeps_tlru_lengths", False
        )
        if config.policy not in SGLANG_POLICIES and not tlru_ok:
            raise SGLangLoadError(
                f"{loaded.label}: eviction policy {config.policy!r} is not supported by sglang "
                f"{loaded.version}'s RadixCache (supported: {', '.join(SGLANG_POLICIES)})"
            )
        if config.kv_events is not None:
            raise SGLangLoadError(
                f"{loaded.label}: KV events are not supported by the legacy RadixCache adapter "
                "(its loader stubs disaggregation/kv_events.py); use the served cache, sglang"
            )
        self.loaded = loaded
        self.config = config
        self.page_size = config.page_size
        self.allocator = token_to_kv_pool_allocator
        self.req_to_token_pool = req_to_token_pool
        self.device = torch.device(token_to_kv_pool_allocator.device)
        self.clock: Callable[[], float] = clock or itertools.count(1).__next__
        mod = loaded.module
        self._RadixKey = mod.RadixKey
        # sglang 0.5.23's RadixKey takes ``limit`` (a cap without a copy); older ones do not.
        self._limit = "limit" in inspect.signature(mod.RadixKey).parameters
        self._node_cls = mod.TreeNode
        bpc = loaded.base_prefix_cache
        self._Match, self._Insert, self._Evict = (
            bpc.MatchPrefixParams,
            bpc.InsertParams,
            bpc.EvictParams,
        )
        shims = (_install_time_shim(m) for m in (mod, loaded.user_module) if m is not None)
        self._shims = [s for s in shims if s is not None]
        policy_config = dict(getattr(config, "policy_config", ()) or ()) or None
        params = loaded.cache_init_params.CacheInitParams(
            disable=False,
            req_to_token_pool=_ReqToTokenShim(req_to_token_pool)
            if req_to_token_pool is not None
            else None,
            token_to_kv_pool_allocator=_AllocatorShim(token_to_kv_pool_allocator, self.page_size),
            page_size=self.page_size,
            eviction_policy=config.policy,
            eviction_policy_config=policy_config,
        )
        self._next_id = 0
        self.num_nodes = 0
        self._window = False  # inside _begin/_end: SGLang may be creating nodes
        self._begin()
        try:
            self.sgl = loaded.cache_class(params)
        finally:
            self._end()
        self.num_nodes = 0  # tree nodes excluding the root
        sgl = self.sgl
        #: SGLang's own methods, unwrapped: what the adapter's methods call (``instrument``
        #: wraps the instance's attributes, which SGLang's own code calls)
        self._raw = {
            op: getattr(sgl, op)
            for op in ("insert", "match_prefix", "inc_lock_ref", "dec_lock_ref")
        }
        self._victims: list[int] = []
        delete_leaf = self.sgl._delete_leaf

        def _delete_leaf(node: Any) -> Any:
            self._victims.append(node.id)
            self.num_nodes -= 1
            return delete_leaf(node)

        self.sgl._delete_leaf = _delete_leaf

    # ------------------------------------------------------------------ plumbing
    def _begin(self) -> None:
        for shim in self._shims:
            shim.clock = self.clock
        self._node_cls.counter = self._next_id
        self._window = True

    def _end(self) -> None:
        counter = self._node_cls.counter
        self.num_nodes += counter - self._next_id
        self._next_id = counter
        self._window = False

    def _key(self, key: RadixKey, copy: bool = False) -> Any:
        if key.is_bigram:
            raise ValueError(
                f"{self.loaded.label}: bigram (EAGLE) keys are not supported by the SGLang "
                "adapter (SGLang keys raw tokens and turns the whole tree bigram with is_eagle)"
            )
        ids, n = key.token_ids, len(key)
        if n < len(ids):  # a limit cuts the key: pass it on where SGLang takes one, else cut
            if self._limit and not copy:
                return self._RadixKey(ids, key.extra_key, cache_salt=key.cache_salt, limit=n)
            return self._RadixKey(key.raw(), key.extra_key, cache_salt=key.cache_salt)
        return self._RadixKey(ids[:] if copy else ids, key.extra_key, cache_salt=key.cache_salt)

    def info(self) -> ImplInfo:
        """``label``, ``spec``, ``version``, ``origin``, class and ``files`` (sha256 by path)
        of the SGLang code this cache runs, for reports."""
        return sglang_info(self.loaded)

    # ------------------------------------------------------------------ state
    @property
    def root(self) -> Any:
        """SGLang's root ``TreeNode`` (``children``, ``value``, ``id``, ``parent``...)."""
        return self.sgl.root_node

    @property
    def num_evictable_leaves(self) -> int:
        """Unlocked leaves (``len(evictable_leaves)``), O(1)."""
        return len(self.sgl.evictable_leaves)

    def reset(self) -> None:
        """Drop the whole tree (KV slots are not freed); ids restart at 0. ``RadixCache.reset``."""
        self._next_id = 0
        self._begin()
        try:
            self.sgl.reset()
        finally:
            self._end()
        self.num_nodes = 0

    def evictable_size(self) -> int:
        return int(self.sgl.evictable_size())

    def protected_size(self) -> int:
        return int(self.sgl.protected_size())

    def total_size(self) -> int:
        """``evictable_size() + protected_size()``: O(1), equal to SGLang's tree walk."""
        return int(self.sgl.evictable_size() + self.sgl.protected_size())

    def tree_stats(self) -> TreeStats:
        """``(nodes, tokens, evictable leaves)`` in O(1). While SGLang runs (inside one of
        the adapter's calls: its ``checkpoint`` calls its own ``insert`` / ``match_prefix``,
        which are timed), the nodes SGLang created so far (``TreeNode.counter`` past the
        adapter's ``_next_id``) are counted too."""
        n = self.num_nodes
        if self._window:
            n += self._node_cls.counter - self._next_id
        sgl = self.sgl
        return n, int(sgl.evictable_size() + sgl.protected_size()), len(sgl.evictable_leaves)

    def node_id(self, node: Any) -> int:
        """SGLang's ``TreeNode.id`` (per adapter, the root's is 0)."""
        return int(node.id)

    def walk(self) -> Iterator[tuple[int, int]]:
        """``(node id, parent id)`` depth first over SGLang's tree, children in its dict
        order (``PrefixCache.walk``)."""
        root = self.sgl.root_node
        stack = list(reversed(root.children.values()))
        while stack:
            node = stack.pop()
            yield int(node.id), int(node.parent.id)
            if node.children:
                stack.extend(reversed(node.children.values()))

    def held_slots(self) -> torch.Tensor:
        """int64: the ``value`` of every node of SGLang's tree. Mutates nothing."""
        values = []
        stack = list(self.sgl.root_node.children.values())
        while stack:
            node = stack.pop()
            values.append(node.value)
            stack.extend(node.children.values())
        if not values:
            return torch.empty(0, dtype=torch.int64, device=self.device)
        return torch.cat(values).to(torch.int64)

    def take_actions(self) -> list[CacheAction]:
        """KV events of SGLang's cache are not driven (its event modules are stubbed): ``[]``."""
        return []

    def instrument(self, timer: OpTimer) -> None:
        """Put ``timer`` around the adapter's operations (:func:`~radixbench.cache.interface.
        time_standard_ops`) and around SGLang's own ``insert`` / ``match_prefix`` /
        ``inc_lock_ref`` / ``dec_lock_ref`` on its instance: SGLang's ``checkpoint`` and
        ``lock`` / ``unlock`` call those directly, where radixbench's cache calls its own
        (timed) methods, so both implementations give one row per logical operation. The
        adapter's own methods call SGLang's unwrapped (``self._raw``): ``match_prefix`` of the
        adapter delegating to SGLang's is one call, recorded once. The adapter's ``release``
        runs the (untimed) checkpoint of the class, as radixbench's ``release`` calls an
        untimed helper: one ``release`` row, the inserts inside it timed. Arguments and
        results of the inner ops are SGLang's (``InsertParams.key``, ``InsertResult.
        prefix_len``, ``MatchResult.device_prefix_len``, ``...LockRefResult.delta``).
        Mutates this adapter and the SGLang instance."""
        time_standard_ops(self, timer)
        stats, sgl = self.tree_stats, self.sgl

        def params_len(params: Any, *_: Any) -> int:
            return len(params.key)

        def no_key(*_: Any) -> int:
            return 0

        inner = {
            "insert": (params_len, lambda r, *_: int(r.prefix_len)),
            "match_prefix": (params_len, lambda r, *_: int(r.device_prefix_len)),
            "inc_lock_ref": (no_key, lambda r, *_: int(r.delta)),
            "dec_lock_ref": (no_key, lambda r, *_: int(r.delta)),
        }
        for op, (key_len, result) in inner.items():
            setattr(sgl, op, timer.timed(op, self._raw[op], stats, key_len, result))

    # ------------------------------------------------------------------ tree
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """``RadixCache.match_prefix(MatchPrefixParams(key=...))``: the longest cached prefix in
        whole pages; ``device_indices`` = int64 ``path_device_indices(last_node)[:prefix_len]``.
        Mutates access times (clock) and may split one node. Raises ``ValueError`` for bigram
        keys."""
        params = self._Match(key=self._key(key))
        self._begin()
        try:
            r = self._raw["match_prefix"](params)
        finally:
            self._end()
        node, n = r.last_device_node, r.device_prefix_len
        indices = self.sgl.path_device_indices(node)[:n]
        return MatchResult(indices.to(torch.int64), node, n)

    def insert(
        self,
        key: RadixKey,
        value: torch.Tensor | None = None,
        priority: int = 0,
        inserted_len: int = 0,
    ) -> int:
        """``RadixCache.insert(InsertParams(...))`` of the page-aligned key (token ids copied);
        returns the already-cached prefix length (tokens), whose slots in ``value`` the caller
        frees. Mutates the tree and sizes. Raises ``ValueError`` for bigram keys."""
        params = self._Insert(
            key=self._key(key, copy=True), value=value, priority=priority, inserted_len=inserted_len
        )
        self._begin()
        try:
            r = self._raw["insert"](params)
        finally:
            self._end()
        return int(r.prefix_len)

    def evict(self, num_tokens: int) -> EvictResult:
        """``RadixCache.evict(EvictParams(num_tokens=...))``: frees the victims' slots through
        the allocator; returns tokens evicted and the victims' node ids in eviction order."""
        victims: list[int] = []
        self._victims = victims
        self._begin()
        try:
            r = self.sgl.evict(self._Evict(num_tokens=num_tokens))
        finally:
            self._end()
        return EvictResult(int(r.num_tokens_evicted), victims)

    def inc_lock_ref(self, node: Any) -> int:
        """``RadixCache.inc_lock_ref``: change of the evictable size (<= 0)."""
        return int(self._raw["inc_lock_ref"](node).delta)

    def dec_lock_ref(self, node: Any) -> int:
        """``RadixCache.dec_lock_ref``: change of the evictable size (>= 0)."""
        return int(self._raw["dec_lock_ref"](node).delta)

    def lock(self, node: Any) -> Any:
        """``BasePrefixCache.lock``: a ``TreeLock`` handle for ``unlock``."""
        return self.sgl.lock(node)

    def unlock(self, handle: Any) -> None:
        """``BasePrefixCache.unlock``; ``None`` is a no-op."""
        self.sgl.unlock(handle)

    def path_device_indices(self, node: Any) -> torch.Tensor:
        """``RadixCache.path_device_indices``: KV slots root..node."""
        return self.sgl.path_device_indices(node)

    # ------------------------------------------------------------------ requests
    def checkpoint(self, req: Any, up_to: int) -> None:
        """Drives ``RadixCache.checkpoint(req, up_to=up_to)`` of sglang 0.5.23 on a proxy of
        ``req`` (a ``CacheReq``: ``full_untruncated_fill_ids`` = ``req.token_ids()``, ``kv``
        with ``swa_evict_floor = 0``), then copies ``cache_protected_len``,
        ``cache_inserted_len``, ``lock`` and ``last_node`` back onto ``req``. Mutates the tree,
        the allocator (duplicate slots freed) and ``req_to_token[req.req_pool_idx]``."""
        proxy = _ReqProxy(req)
        self._begin()
        try:
            self.sgl.checkpoint(proxy, up_to=up_to)
        finally:
            self._end()
        req.cache_protected_len = proxy.kv.cache_protected_len
        req.cache_inserted_len = proxy.kv.cache_inserted_len
        req.lock = proxy.lock
        req.last_node = proxy.last_node

    def release(self, req: Any, owned_len: int, checkpoint: bool) -> None:
        """Mirrors ``release_kv_cache`` of sglang 0.5.23 (``mem_cache/common.py``) for a
        ``RadixCache``: with ``checkpoint``, ``self.checkpoint(req, owned_len)``; free
        ``req_to_token[row, cache_protected_len:owned_len]`` through the allocator; unlock
        ``req.lock``; ``req.lock = req.last_node = None``; free the ``req_to_token`` row. Slots
        allocated beyond ``owned_len`` are the caller's (``_release_overallocated_kv_indices``).
        Raises ``RuntimeError`` without a ``ReqToTokenPool``."""
        pool = self.req_to_token_pool
        if pool is None:
            raise RuntimeError("release needs a ReqToTokenPool")
        if checkpoint:
            SGLangCache.checkpoint(self, req, owned_len)  # untimed, as radixbench's helper
        start = req.cache_protected_len
        if owned_len > start:
            self.allocator.free(  # a copy: the row goes to the next request
                pool.req_to_token[req.req_pool_idx, start:owned_len].to(torch.int64, copy=True)
            )
        self.sgl.unlock(req.lock)
        req.lock = None
        req.last_node = None
        pool.free(req.req_pool_idx)
