"""sglang 0.5.23's ``UnifiedRadixCache`` with HiCache on, its tree logic real, its I/O simulated.

``--impl sglang --enable-hierarchical-cache`` (and ``sglang-python``) builds the served cache as
sglang's scheduler does — ``UnifiedRadixCache(params)``, then its own ``init_hicache(server_args,
params)`` (``mem_cache/unified_radix_cache.py:455-590``) — and drives it through the adapter of
:mod:`radixbench.cache.sglang_served` plus the scheduler's HiCache entry points
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

This runs on a load of sglang's files of its own (``sglang_unified``'s loader, a second
time), whose module globals the stand-ins replace; the plain served cache's load is untouched.
"""

from __future__ import annotations

import ast
import atexit
import importlib.util
import json
import logging
import os
from array import array
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar, Optional

import torch

from radixbench.cache.hicache.config import HiCacheConfig
from radixbench.cache.hicache.controller import SimController
from radixbench.cache.hicache.host import HostPool
from radixbench.cache.hicache.storage import SimStorage
from radixbench.cache.hicache.tree import TierMatch
from radixbench.cache.interface import CacheAction, OpTimer
from radixbench.cache.key import RadixKey
from radixbench.cache.sglang_served import ServedSGLangCache
from radixbench.cache.sglang_unified import LoadedUnified, _load_package, load_unified

__all__ = ["HostGroup", "ServedHiCache", "load_hicache"]

_ASSEMBLER = "sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler"
_EXT_LOADER = "sglang.srt.utils.cpp_extension_loader"
_LOADS: dict[tuple[str, str], LoadedUnified] = {}


class _Pending:
    """What the stand-ins read while one cache's ``init_hicache`` runs, and the clock."""

    bags: ClassVar[dict[str, Any]] = {}
    attach: Any = None
    now = 0.0


class HostGroup(HostPool):
    """sglang's ``HostPoolGroup`` as the tree and controller use it, over radixbench's host
    free-list (no buffers): ``free(indices, pool=...)``, ``get_pool``, ``anchor_entry``."""

    def __init__(self, size: int, page_size: int) -> None:
        super().__init__(size, page_size)
        self.anchor_entry = SimpleNamespace(
            host_pool=SimpleNamespace(shared_allocation_domain=None), host_evict_fn=None
        )
        self.entries: list[Any] = []
        self.entry_map: dict[Any, Any] = {}
        self.layout = "page_first"

    @property
    def logical_size(self) -> int:
        return self.size

    def free(self, slots: torch.Tensor, pool: Any = None) -> int:
        return super().free(slots)

    def get_pool(self, name: Any) -> HostGroup:
        return self

    def release_transfers(self, transfers: Any) -> None:
        pass

    def destroy(self) -> None:
        pass


def _class_method(path: Path, cls: str, name: str) -> Any:
    """Method ``name`` of class ``cls`` in ``path``, compiled alone (sglang's own code)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == name:
                    fn.decorator_list = []
                    ns: dict[str, Any] = {"json": json, "os": os, "Optional": Optional}
                    mod = ast.Module(body=[fn], type_ignores=[])
                    exec(compile(mod, str(path), "exec"), ns)
                    return ns[name]
    raise ImportError(f"{path} defines no {cls}.{name}")


def _attach(cache: Any, params: Any, server_args: Any, **kw: Any) -> None:
    """The stand-in ``attach_hybrid_pool_to_unified_cache`` (module docstring)."""
    _Pending.attach(cache, kw)


def _patch(loaded: LoadedUnified) -> None:
    """Install the stand-ins into ``loaded``'s modules (a load of its own)."""
    mods = loaded.modules
    pkg = Path(loaded.origin)
    parse = _class_method(
        pkg / "srt/mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController",
        "parse_storage_backend_extra_config",
    )
    ctrl_cls = type(
        "HybridCacheController", (), {"parse_storage_backend_extra_config": staticmethod(parse)}
    )
    assembler = ModuleType(_ASSEMBLER)
    assembler.attach_hybrid_pool_to_unified_cache = _attach  # type: ignore[attr-defined]
    mods[_ASSEMBLER] = assembler
    spec = importlib.util.spec_from_file_location(
        _EXT_LOADER, pkg / "srt/utils/cpp_extension_loader.py"
    )
    assert spec is not None and spec.loader is not None
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    mods[_EXT_LOADER] = ext
    urc = loaded.m["urc"]
    for name in ("get_memory", "get_model", "get_observability", "get_disagg"):
        bag = name[4:]
        setattr(urc, name, lambda bag=bag: _Pending.bags[bag])
    urc.HybridCacheController = ctrl_cls
    mods["sglang.srt.mem_cache.unified_cache.storage_attachment"].HybridCacheController = ctrl_cls
    mods["sglang.srt.utils.poll_timer"].time = SimpleNamespace(perf_counter=lambda: _Pending.now)
    native = mods["sglang.srt.mem_cache.cpp_utils.native_hash"]
    with loaded.activate():  # build (first use: ~10 s) and cache sglang's native page hash
        native._load_native_hash_module()


def load_hicache(spec: str, core: str = "auto", path: str | None = None) -> LoadedUnified:
    """A load of sglang's ``UnifiedRadixCache`` (as ``load_unified``) with the HiCache stand-ins
    installed; cached per package folder and core."""
    base = load_unified(spec, core, path)
    # its write_back drop / prefetch logs would flood a run's output (the run records counts)
    logging.getLogger("sglang").setLevel(logging.ERROR)
    key = (base.origin, core)
    if key not in _LOADS:
        loaded = _load_package(spec, Path(base.origin), base.label, core)
        _patch(loaded)
        _LOADS[key] = loaded
    from dataclasses import replace

    return replace(_LOADS[key], spec=base.spec, label=base.label)


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

    def __init__(self, pool: Any, allocator: Any, config: Any, loaded: LoadedUnified) -> None:
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
        _Pending.bags = {
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
        _Pending.attach = self._attach
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

    def match_prefix(self, key: RadixKey) -> TierMatch:
        """``UnifiedRadixCache.match_prefix`` with its host part: ``host_hit_length`` and
        ``best_match_node``."""
        params = self._Match(key=self._key(key))
        with self._state:
            self.tree.sync()
            r, indices = self._call["match_prefix"](params)
        self.tree.on_node(r.last_device_node)
        return TierMatch(
            indices.to(torch.int64),
            r.last_device_node,
            int(r.device_prefix_len),
            int(r.host_hit_length),
            r.best_match_node,
        )

    def insert(
        self,
        key: RadixKey,
        value: torch.Tensor | None = None,
        priority: int = 0,
        inserted_len: int = 0,
    ) -> int:
        """``ServedSGLangCache.insert`` asking for the adopted ranges
        (``InsertParams.track_adopted_ranges``): the slots of a walked host-only node become
        the tree's (``_unevict_node_on_insert``); ``adopted`` lists those ranges within the
        returned prefix, which the caller must not free."""
        k = self._key(key, copy=True).page_aligned(self.page_size)
        params = self._Insert(
            key=k,
            value=None if value is None else value[: len(k)],
            prev_prefix_len=len(k),
            priority=priority,
            inserted_len=inserted_len,
            track_adopted_ranges=True,
        )
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

    def load_back(self, match: TierMatch) -> tuple[int, Any, torch.Tensor]:
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

    def prefetch(self, rid: Any, match: TierMatch, tokens: Any, namespace: Any) -> None:
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
        _Pending.now = now
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
