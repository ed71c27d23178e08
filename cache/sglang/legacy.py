"""Run SGLang's real ``RadixCache`` behind radixbench's cache API.

``SGLangCache`` wraps an instance of the ``cache_class`` of a ``Loaded``
(``legacy_load.load_sglang``), built as the scheduler of sglang 0.5.23 builds it:
``RadixCache(CacheInitParams(disable=False, req_to_token_pool=..., token_to_kv_pool_allocator=
..., page_size=..., eviction_policy=..., eviction_policy_config=...))``, and presents the API of
``radixbench.cache.radix_cache.RadixCache`` so the simulator drives both alike. Every tree
operation is SGLang's own code; the adapter only converts keys and results, and adds:

* per-adapter copies of SGLang's process-wide state (``LegacyState``,
  :mod:`radixbench.cache.sglang.process_state`): the clock ``time.monotonic()`` returns (the
  loaded module's ``time`` global is a ``TimeShim``) and the node ids of ``TreeNode.counter``, so
  ids start at 0 (the root) in each adapter, as in radixbench's cache, and ``num_nodes`` is kept
  in O(1); adapters of one load may be interleaved in one thread, not across threads;
* eviction victims: the instance's ``_delete_leaf`` is wrapped to record node ids in order.

What SGLang sees of radixbench's keys, pools and requests: :mod:`radixbench.cache.sglang.shims`.

Not supported: bigram (EAGLE) keys (``ValueError``: SGLang turns the whole tree into bigram
mode with ``is_eagle``, radixbench packs bigrams per key), policy ``tlru``
(``SGLangLoadError``: 0.5.23's ``RadixCache`` keeps no T-LRU lengths; only ``UnifiedRadixCache``
does) unless the ``cache_class`` declares ``keeps_tlru_lengths = True`` (a subclass that adds
the unified tree's bookkeeping, as tests/cache/sglang/test_legacy_fidelity.py builds), KV events and
metrics (their modules are stubbed by the loader).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig
from radixbench.cache.interface import (
    EvictResult,
    MatchResult,
    OpTimer,
    TreeStats,
)
from radixbench.cache.key import RadixKey
from radixbench.cache.sglang.adapter import SGLangAdapter
from radixbench.cache.sglang.loader import Loaded, SGLangLoadError
from radixbench.cache.sglang.process_state import LegacyState, install_time_shim
from radixbench.cache.sglang.report import INNER_OPS, timed_inner_ops
from radixbench.cache.sglang.shims import (
    AllocatorShim,
    LegacyReqProxy,
    ReqToTokenShim,
    release_kv_cache,
    sglang_key,
    write_back,
)
from radixbench.cache.timing import time_standard_ops

#: Eviction policies of 0.5.23's ``get_eviction_strategy`` that its ``RadixCache`` supports.
SGLANG_POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru")


class SGLangCache(SGLangAdapter):
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
        loaded: Loaded,
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
        mod = loaded.m["radix"]
        self._RadixKey = mod.RadixKey
        # sglang 0.5.23's RadixKey takes ``limit`` (a cap without a copy); older ones do not.
        self._limit = "limit" in inspect.signature(mod.RadixKey).parameters
        bpc = loaded.m["bpc"]
        self._Match, self._Insert, self._Evict = (
            bpc.MatchPrefixParams,
            bpc.InsertParams,
            bpc.EvictParams,
        )
        shims = (install_time_shim(m) for m in (mod, loaded.user_module) if m is not None)
        self._state = LegacyState(mod.TreeNode, [s for s in shims if s is not None], self._clock)
        policy_config = dict(getattr(config, "policy_config", ()) or ()) or None
        params = loaded.m["cip"].CacheInitParams(
            disable=False,
            req_to_token_pool=ReqToTokenShim(req_to_token_pool)
            if req_to_token_pool is not None
            else None,
            token_to_kv_pool_allocator=AllocatorShim(token_to_kv_pool_allocator, self.page_size),
            page_size=self.page_size,
            eviction_policy=config.policy,
            eviction_policy_config=policy_config,
        )
        with self._state:
            self.sgl = loaded.cache_class(params)
        self._state.num_nodes = 0  # tree nodes excluding the root
        #: SGLang's own methods, unwrapped: what the adapter's methods call (``instrument``
        #: wraps the instance's attributes, which SGLang's own code calls)
        self._raw = {op: getattr(self.sgl, op) for op in INNER_OPS}
        self._victims: list[int] = []
        delete_leaf = self.sgl._delete_leaf

        def _delete_leaf(node: Any) -> Any:
            self._victims.append(node.id)
            self._state.num_nodes -= 1
            return delete_leaf(node)

        self.sgl._delete_leaf = _delete_leaf

    # ------------------------------------------------------------------ plumbing
    def _clock(self) -> Callable[[], float]:
        return self.clock

    def _key(self, key: RadixKey, copy: bool = False) -> Any:
        return sglang_key(self._RadixKey, key, self.loaded.label, copy, self._limit)

    # ------------------------------------------------------------------ state
    @property
    def root(self) -> Any:
        """SGLang's root ``TreeNode`` (``children``, ``value``, ``id``, ``parent``...)."""
        return self.sgl.root_node

    @property
    def num_nodes(self) -> int:
        """Tree nodes without the root, O(1) (as of the last call into SGLang)."""
        return self._state.num_nodes

    @property
    def num_evictable_leaves(self) -> int:
        """Unlocked leaves (``len(evictable_leaves)``), O(1)."""
        return len(self.sgl.evictable_leaves)

    def reset(self) -> None:
        """Drop the whole tree (KV slots are not freed); ids restart at 0. ``RadixCache.reset``."""
        self._state.next_id = 0
        with self._state:
            self.sgl.reset()
        self._state.num_nodes = 0

    def tree_stats(self) -> TreeStats:
        """``(nodes, tokens, evictable leaves)`` in O(1). While SGLang runs (inside one of
        the adapter's calls: its ``checkpoint`` calls its own ``insert`` / ``match_prefix``,
        which are timed), the nodes SGLang created so far (``TreeNode.counter`` past the
        adapter's next id) are counted too."""
        sgl = self.sgl
        return (
            self._state.live_nodes(),
            int(sgl.evictable_size() + sgl.protected_size()),
            len(sgl.evictable_leaves),
        )

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

    def instrument(self, timer: OpTimer) -> None:
        """Put ``timer`` around the adapter's operations and around SGLang's own ``insert`` /
        ``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref`` on its instance (one row per
        logical operation: :mod:`radixbench.cache.sglang.report`). Mutates this adapter and
        the SGLang instance (those four attributes)."""
        time_standard_ops(self, timer)
        for op, timed in timed_inner_ops(timer, self._raw, self.tree_stats).items():
            setattr(self.sgl, op, timed)

    # ------------------------------------------------------------------ tree
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """``RadixCache.match_prefix(MatchPrefixParams(key=...))``: the longest cached prefix in
        whole pages; ``device_indices`` = int64 ``path_device_indices(last_node)[:prefix_len]``.
        Mutates access times (clock) and may split one node. Raises ``ValueError`` for bigram
        keys."""
        params = self._Match(key=self._key(key))
        with self._state:
            r = self._raw["match_prefix"](params)
        node, n = r.last_device_node, r.device_prefix_len
        indices = self.sgl.path_device_indices(node)[:n]
        return MatchResult(indices.to(torch.int64), node, n)

    def insert(
        self, key: RadixKey, value: Tensor | None = None, priority: int = 0, inserted_len: int = 0
    ) -> int:
        """``RadixCache.insert(InsertParams(...))`` of the page-aligned key (token ids copied);
        returns the already-cached prefix length (tokens), whose slots in ``value`` the caller
        frees. Mutates the tree and sizes. Raises ``ValueError`` for bigram keys."""
        params = self._Insert(
            key=self._key(key, copy=True), value=value, priority=priority, inserted_len=inserted_len
        )
        with self._state:
            r = self._raw["insert"](params)
        return int(r.prefix_len)

    def evict(self, num_tokens: int) -> EvictResult:
        """``RadixCache.evict(EvictParams(num_tokens=...))``: frees the victims' slots through
        the allocator; returns tokens evicted and the victims' node ids in eviction order."""
        victims: list[int] = []
        self._victims = victims
        with self._state:
            r = self.sgl.evict(self._Evict(num_tokens=num_tokens))
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

    # ------------------------------------------------------------------ requests
    def checkpoint(self, req: Any, up_to: int) -> None:
        """Drives ``RadixCache.checkpoint(req, up_to=up_to)`` of sglang 0.5.23
        (``radix_cache.py:510``) on a ``LegacyReqProxy`` of ``req`` (a ``CacheReq``), then copies
        ``cache_protected_len``, ``cache_inserted_len``, ``lock`` and ``last_node`` back onto
        ``req``. Mutates the tree, the allocator (duplicate slots freed) and
        ``req_to_token[req.req_pool_idx]``."""
        proxy = LegacyReqProxy(req)
        with self._state:
            self.sgl.checkpoint(proxy, up_to=up_to)
        write_back(proxy, req)

    def release(self, req: Any, owned_len: int, checkpoint: bool) -> None:
        """``release_kv_cache`` of sglang 0.5.23 (``mem_cache/common.py:400``) for a
        ``RadixCache`` (:func:`~radixbench.cache.sglang.shims.release_kv_cache`): with
        ``checkpoint`` the class's (untimed) ``checkpoint(req, owned_len)``; free
        ``req_to_token[row, cache_protected_len:owned_len]``; ``RadixCache.unlock(req.lock)``;
        free the row. Raises ``RuntimeError`` without a ``ReqToTokenPool``."""
        final = (lambda: SGLangCache.checkpoint(self, req, owned_len)) if checkpoint else None
        pool = self.req_to_token_pool
        release_kv_cache(pool, self.allocator, req, owned_len, final, self.sgl.unlock)
