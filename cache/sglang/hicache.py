"""sglang 0.5.23's ``UnifiedRadixCache`` with HiCache on, its tree logic real, its I/O simulated.

``--impl sglang --enable-hierarchical-cache`` (and ``sglang-python``) builds the served cache as
sglang's scheduler does — ``UnifiedRadixCache(params)``, then its own ``init_hicache(server_args,
params)`` (``mem_cache/unified_radix_cache.py:455-590``) — and drives it through the adapter of
:mod:`radixbench.cache.sglang.served` plus the scheduler's HiCache entry points
(:class:`~radixbench.cache.interface.TierOps`: ``check_hicache_events``, ``init_load_back``,
``ready_to_load_host_cache``, ``prefetch_from_storage``, ``check_prefetch_progress``,
``pop_prefetch_loaded_tokens``). Every line of the tree, the controller's bookkeeping in the
cache (acks, pending marks, host locks, duplicate reclaim, prefetch drains) is sglang's own.
What cannot run on a CPU-only machine without a model is replaced, moving no bytes and
completing at the simulated times — the tree learns completions only through its real
``check_hicache_events()``:

* the host pool stack ``attach_hybrid_pool_to_unified_cache`` (``hybrid_cache/
  hybrid_pool_assembler.py:2525``: needs a device KV pool and pinned host buffers) -> a stand-in
  module whose ``attach_hybrid_pool_to_unified_cache`` sets ``cache_controller`` to
  :class:`~radixbench.cache.hicache.controller.SimController`, ``host_pool_group`` to a
  :class:`HostGroup` (sglang's host free-list, no buffer) and ``FullComponent.
  _full_kv_pool_host`` to it (else host frees are silently skipped, ``components/full.py:
  530-534``), as ``_apply_stack_result`` does (``:2488-2511``);
* the cache controller ``HybridCacheController`` (``hybrid_cache/hybrid_cache_controller.py``:
  CUDA streams and events, storage threads) -> ``SimController`` (queues and acks; its events
  complete when the simulator says); its static ``parse_storage_backend_extra_config`` is
  sglang's own, compiled from its source;
* the storage backend (``mem_cache/storage/sim_storage.py``, sleeping threads) -> a key set
  (:class:`~radixbench.cache.hicache.storage.SimStorage`) timed by the simulator; page keys are
  sglang's (``get_storage_hash_str``, the native SHA-256 of ``cpp_utils/native_hash.py``, built
  on first use with g++ / ninja / OpenSSL headers);
* the runtime context (``get_memory()`` / ``get_model()`` / ``get_observability()`` /
  ``get_disagg()``, ``runtime_context.py:1313-1345``: published server arguments) -> bags with
  the ``--hicache-*`` values of the variant;
* ``PollTimer`` (``utils/poll_timer.py``, ``time.perf_counter``) reads the simulated clock, so
  the ``timeout`` prefetch policy waits simulated seconds.

This runs on a load of sglang's files of its own (``unified_load``'s loader, a second
time), whose module globals the stand-ins replace; the plain served cache's load is untouched.
"""

from __future__ import annotations

import atexit
import json
from array import array
from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor

from radixbench.cache.hicache.config import HiCacheConfig
from radixbench.cache.hicache.controller import SimController
from radixbench.cache.hicache.storage import SimStorage
from radixbench.cache.interface import CacheAction, MatchResult, OpTimer
from radixbench.cache.key import RadixKey
from radixbench.cache.sglang.hicache_standins import HostGroup, Pending, load_hicache
from radixbench.cache.sglang.loader import Loaded
from radixbench.cache.sglang.served import ServedSGLangCache

__all__ = ["ServedHiCache", "load_hicache"]


class _ReqProxy:
    """What ``init_load_back`` reads of a request (``unified_radix_cache.py:3586-3624``, and
    ``req.kv.mamba_pool_idx`` for the Rust core's ``build_load_back_spec``)."""

    def __init__(self, rid: Any, last_node: Any) -> None:
        self.rid = str(rid)
        self.last_node = last_node
        self.kv = SimpleNamespace(mamba_pool_idx=None)
        self.swa_host_hit_length = 0
        self.mamba_host_hit_length = 0


class ServedHiCache(ServedSGLangCache):
    """The served cache with HiCache on (module docstring). ``hicache``: the tiers' settings;
    other arguments as :class:`ServedSGLangCache` (the Rust core's shape shadow keeps its
    device-resident nodes: ``tree_stats``)."""

    def __init__(self, pool: Any, allocator: Any, config: Any, loaded: Loaded) -> None:
        hc: HiCacheConfig = config.hicache
        self.hicache = hc
        super().__init__(pool, allocator, config, loaded)
        st = hc.storage
        page = config.page_size
        utils = loaded.modules["sglang.srt.mem_cache.utils"]

        def hash_pages(key: Any, last_hash: Any) -> list[Any]:
            return list(utils.get_storage_hash_str(key, last_hash, page_size=page))

        self.group = HostGroup(hc.host_tokens, page)
        self.ctrl = SimController(
            allocator.alloc,
            self.group,
            hc.bytes_per_token,
            hc.write_policy,
            SimStorage(st.backend) if st is not None else None,
            hash_pages,
            st.prefetch_threshold if st is not None else 256,
        )
        extra = None
        if st is not None:
            extra = json.dumps(
                {
                    "prefetch_threshold": st.prefetch_threshold,
                    "prefetch_timeout_base": st.timeout_base_s,
                    "prefetch_timeout_per_ki_token": st.timeout_per_ki_token_s,
                }
            )
        Pending.bags = {
            "memory": SimpleNamespace(
                hicache_host_memory_mode="cache",
                hicache_storage_backend=None if st is None else st.backend,
                hicache_storage_backend_extra_config=extra,
                hicache_write_policy=hc.write_policy,
                hicache_storage_prefetch_policy="timeout" if st is None else st.prefetch_policy,
            ),
            "model": SimpleNamespace(context_length=0),
            "observability": SimpleNamespace(extra_metric_labels=None),
            "disagg": SimpleNamespace(disaggregation_mode="null"),
        }
        Pending.attach = self._attach
        full = loaded.m["ct"].ComponentType.FULL
        self._full = full
        with loaded.activate(), self._state:
            self.sgl.init_hicache(SimpleNamespace(file_storage_path=None), self._params)
            if st is not None:
                # apply_runtime_config enabled storage; the controller's flag follows it
                self.ctrl.enable_storage = True
        atexit.unregister(self.sgl.shutdown)
        self._hook_declined_drops()
        self._handles: dict[Any, Any] = {}
        self.tiers = self
        self.storage_on = st is not None

    def _attach(self, cache: Any, kw: dict[str, Any]) -> None:
        if kw.get("storage_backend") is None:
            self.ctrl.enable_storage = False
            self.ctrl.storage_backend = None
        cache.cache_controller = self.ctrl
        cache.host_pool_group = self.group
        cache.full_kv_pool_host = self.group
        cache.components[self._full_ct()]._full_kv_pool_host = self.group

    def _hook_declined_drops(self) -> None:
        """A ``write_back`` leaf whose backup found no host room and whose subtree drop was
        declined (``_evict_components``, ``unified_radix_cache.py:1036-1056``) stays
        device-resident: take it off the victims that ``_evict_device_leaf`` recorded, so
        ``evict`` lists only the leaves it freed (as radixbench's evictors do)."""
        drop = self.sgl._drop_subtree_no_host
        tree = self.tree

        def _drop_subtree_no_host(node_id: Any, tracker: Any) -> bool:
            dropped = bool(drop(node_id, tracker))
            if not dropped and tree.victims and tree.victims[-1] == node_id:
                tree.victims.pop()
            return dropped

        self.sgl._drop_subtree_no_host = _drop_subtree_no_host

    def _full_ct(self) -> Any:
        return self.loaded.m["ct"].ComponentType.FULL

    # ------------------------------------------------------------------ PrefixCache
    def take_actions(self) -> list[CacheAction]:
        return list(self.ctrl.take_actions())

    def tree_stats(self) -> tuple[int, int, int]:
        """``(nodes, device tokens, evictable device leaves)``: the Python core's own node
        arena and ``evictable_device_leaves``; the Rust core's from the shadow of its
        device-resident part (``TreeShadow``, ``tiered``: its nodes are those holding a device
        value, host-only ones are not seen)."""
        sgl = self.sgl
        tokens = int(sgl.evictable_size() + sgl.protected_size())
        if self.rust:
            nodes, leaves = self.tree.counts()
            return nodes, tokens, leaves
        core = self.core
        return len(core._node_arena) - 1, tokens, len(core.evictable_device_leaves)

    def walk(self) -> Any:
        if self.rust:
            raise NotImplementedError("walk: the Rust core with HiCache keeps no shape here")
        return super().walk()

    def match_prefix(self, key: RadixKey) -> MatchResult:
        """``UnifiedRadixCache.match_prefix`` with its host part: ``host_hit_length`` and
        ``best_match_node``."""
        params = self._Match(key=self._key(key))
        with self._state:
            self.tree.sync()
            r, indices = self._call["match_prefix"](params)
        self.tree.on_node(r.last_device_node)
        return MatchResult(
            indices.to(torch.int64),
            r.last_device_node,
            int(r.device_prefix_len),
            int(r.host_hit_length),
            r.best_match_node,
        )

    def insert(
        self, key: RadixKey, value: Tensor | None = None, priority: int = 0, inserted_len: int = 0
    ) -> int:
        """``ServedSGLangCache.insert`` asking for the adopted ranges
        (``InsertParams.track_adopted_ranges``): the slots of a walked host-only node become
        the tree's (``_unevict_node_on_insert``); ``adopted`` lists those ranges within the
        returned prefix, which the caller must not free."""
        params = self._insert_params(key, value, priority, inserted_len, track_adopted_ranges=True)
        with self._state:
            self.tree.sync()
            r = self._call["insert"](params, len(key))
        self.tree.on_node(r.last_device_node)
        n = int(r.prefix_len)
        ranges = (r.adopted_ranges or {}).get(self._full, [])
        self.adopted = [(a, min(b, n)) for a, b in ranges if a < n]
        return n

    def instrument(self, timer: OpTimer) -> None:
        super().instrument(timer)
        self.load_back = timer.timed(  # type: ignore[method-assign]
            "load_back",
            self.load_back,
            self.tree_stats,
            lambda m, *_: m.host_hit_length,
            lambda r, *_: r[0],
        )
        evict_host = self.sgl.evict_host
        self.sgl.evict_host = timer.timed(
            "evict_host", evict_host, self.host_tree_stats, lambda n, *_: n, lambda r, *_: int(r)
        )

    def evict_host(self, num_tokens: int) -> int:
        """``UnifiedRadixCache.evict_host`` (FULL): host slots freed."""
        with self._state:
            return int(self.sgl.evict_host(num_tokens))

    def host_tree_stats(self) -> tuple[int, int, int]:
        leaves = 0 if self.rust else len(self.core.evictable_host_leaves)
        return self.tree_stats()[0], self.group.used(), leaves

    # ------------------------------------------------------------------ TierOps
    def handle(self, rid: Any) -> Any:
        h = self._handles.get(rid)
        if h is None:
            h = self._handles[rid] = self.loaded.m["bpc"].CacheRequestHandle(str(rid), 0)
        return h

    def check_events(self) -> None:
        with self._state:
            self.sgl.check_hicache_events()
        self.tree.settle()

    def load_back(self, match: MatchResult) -> tuple[int, Any, torch.Tensor]:
        """``init_load_back`` as ``PrefillAdder`` calls it for a match with a host hit."""
        if match.host_hit_length <= 0 and not self.core.is_full_device_evicted(match.best_node):
            return match.prefix_len, match.last_node, match.device_indices
        params = self.loaded.m["bpc"].InitLoadBackParams(
            best_match_node=match.best_node,
            host_hit_length=match.host_hit_length,
            req=_ReqProxy(id(match), match.last_node),
        )
        with self._state:
            self.tree.sync()
            loaded, node = self.sgl.init_load_back(params)
        self.tree.loading.add(int(node))  # on the device once the load commits
        if not loaded:
            return match.prefix_len, match.last_node, match.device_indices
        indices = self.sgl.path_device_indices(node).to(torch.int64)
        return match.prefix_len + int(loaded), node, indices

    def start_loading(self) -> int:
        with self._state:
            n = int(self.sgl.ready_to_load_host_cache())
        self.tree.settle()
        return n

    def prefetch(self, rid: Any, match: MatchResult, tokens: Any, namespace: Any) -> None:
        """``Scheduler._prefetch_kvcache`` (``managers/scheduler.py:3342-3392``)."""
        if not self.storage_on:
            return
        sgl, best = self.sgl, match.best_node
        if not (sgl.is_backuped(best) or sgl.is_root(best)):
            return
        start = match.prefix_len + match.host_hit_length
        with self._state:
            sgl.prefetch_from_storage(
                self.handle(rid),
                best,
                array("q", tokens[start:]),
                sgl.get_last_hash_value(best),
                None,
                matched_prefix_tokens=array("q", tokens[:start]),
                extra_key=namespace,
                cache_salt=None,
            )

    def prefetch_ready(self, rid: Any, now: float) -> bool:
        if not self.storage_on:
            return True
        Pending.now = now
        with self._state:
            ready = bool(self.sgl.check_prefetch_progress(self.handle(rid)))
        self.tree.settle()  # a finished prefetch inserts into the tree
        return ready

    def prefetch_deadline(self, rid: Any) -> float | None:
        wait = self.sgl._storage_prefetch_wait.get(self._handles.get(rid))
        if wait is None or wait.timer.started_at is None:
            return None
        return float(wait.timer.started_at + wait.timeout_s)

    def pop_prefetch_loaded(self, rid: Any) -> int:
        h = self._handles.pop(rid, None)
        if h is None:
            return 0
        return int(self.sgl.pop_prefetch_loaded_tokens(h))

    def tier_stats(self) -> dict[str, int]:
        return {
            "host_capacity_tokens": self.group.size,
            "host_used_tokens": self.group.used(),
            "host_evictable_leaves": self.host_tree_stats()[2],
            "prefetches": len(self.sgl.ongoing_prefetch),
        }
