"""SGLang's caches as registered implementations: what ``--impl sglang*`` loads and builds.

* ``sglang`` — what an sglang 0.5.23 server builds by default: ``UnifiedRadixCache``
  (``default_radix_cache_factory`` -> ``create_unified_radix_cache``, ``mem_cache/registry.py:83,
  149``) with the tree core SGLang's own ``select_tree_core_backend`` picks
  (``unified_cache/tree_core_registry.py:124``: Rust by default, the Python core when
  ``resolve_tree_core_backend`` falls back or the extension does not load; the reason is in
  ``ImplInfo.tree_core_reason``), behind :class:`~radixbench.cache.sglang.served.
  ServedSGLangCache` (loaded by :mod:`~radixbench.cache.sglang.unified_load`); with
  ``CacheConfig.hicache`` set, behind :class:`~radixbench.cache.sglang.hicache.ServedHiCache`.
* ``sglang-python`` — the same with the Python tree core forced.
* ``sglang-legacy`` — the classic ``RadixCache`` (``mem_cache/radix_cache.py``): the class SGLang
  PR #6907 changed and the scheduler's ``waiting_queue_radix_tree``
  (``RadixCache.create_simulated()``), behind :class:`~radixbench.cache.sglang.legacy.SGLangCache`.

Each takes ``NAME:PATH`` (a checkout's ``python/`` folder, with its own built Rust extension
when present) and ``NAME:FILE.py:CLASS`` (a subclass, on the installed package): for ``sglang``
and ``sglang-python`` a subclass of ``UnifiedRadixCache`` runs behind the served adapter and a
subclass of ``RadixCache`` behind the legacy one (picked by ``issubclass``).

Like-for-like partners among radixbench's variants (``ImplEntry.reference``): every SGLang cache
evicts full KV by heapifying all evictable leaves per ``evict`` — radixbench's ``heapify``
(legacy: ``RadixCache.evict``, ``radix_cache.py``; Python core: ``FullComponent.
_evict_device_start`` heapifies ``evictable_device_leaves``, ``unified_cache/components/full.py:
209-217``; Rust core: the same per-walk heap over its evictable-leaf set). Key compares: the
legacy class and the Python core call ``RadixKey.match`` / ``match_at`` (``radix_cache.py:178,
182``: galloping slice compares; the Python core's match walk passes an offset instead of a copy,
``unified_tree_core.py:957``) — radixbench's ``galloping``; the Rust core compares in place from
an offset, token by token in compiled code, stopping at the first difference
(``ChildKeyType::match_len``, ``rust/sglang-radix-tree/src/node.rs``; nothing of the query is
copied) — radixbench's ``memview`` (an in-place compare of the overlap in C, no copy).
``sglang``'s partner is the Rust core's; when it falls back to the Python core, read
``galloping``.

Nothing here imports SGLang: a spec is loaded when first resolved (``registry.resolve``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from radixbench.cache.registry import ImplEntry, default_label, register_impl

if TYPE_CHECKING:
    from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
    from radixbench.cache.config import CacheConfig
    from radixbench.cache.interface import ImplInfo, PrefixCache
    from radixbench.cache.sglang.loader import Loaded

__all__ = ["SGLANG_IMPLS", "SGLANG_REFERENCE", "SGLANG_RUST_REFERENCE", "register"]

#: What sglang 0.5.23's ``RadixCache`` and the unified Python core run, as radixbench's axis
#: values: ``evict`` heapifies every evictable leaf per call and ``match_at`` gallops.
SGLANG_REFERENCE = {"evictor": "heapify", "matcher": "galloping"}
#: What the unified cache's Rust core runs: a heap over every evictable leaf per ``evict``, an
#: in-place compiled compare (module docstring).
SGLANG_RUST_REFERENCE = {"evictor": "heapify", "matcher": "memview"}
#: The implementations of SGLang: name -> tree core (``auto``, ``python``) or ``legacy``.
SGLANG_IMPLS = {"sglang": "auto", "sglang-python": "python", "sglang-legacy": "legacy"}

#: The handle a load gives the factory: ``("served" | "legacy", the load)``.
Handle = tuple[str, "Loaded"]


def _parse(spec: str, arg: str | None) -> tuple[str, str | None, str | None]:
    """``(name, PATH or None, FILE.py:CLASS or None)`` of an SGLang spec."""
    name = spec.partition(":")[0]
    if arg is None:
        return name, None, None
    if ".py:" in arg or arg.endswith(".py"):
        return name, None, arg
    return name, arg, None


def _load(spec: str, arg: str | None) -> tuple[str, Handle, ImplInfo]:
    """Load an SGLang spec: ``(label, (adapter kind, load), info)``. Raises ``ValueError`` (one
    line naming the spec) for a missing package, path, core or class, an unsupported version,
    an import failure, or a CLASS that subclasses neither SGLang cache class."""
    from radixbench.cache.sglang.loader import SGLangLoadError
    from radixbench.cache.sglang.unified_load import load_unified, load_user_class

    name, path, user = _parse(spec, arg)
    core = SGLANG_IMPLS[name]
    label = default_label(spec)
    if core == "legacy":
        legacy = _load_legacy(spec, label, arg)
        return label, ("legacy", legacy), _info(legacy)
    loaded = load_unified(spec, core, path)
    if user is None:
        loaded = loaded.with_class(spec, label, loaded.cache_class)
        return label, ("served", loaded), _info(loaded)
    file, _, class_name = user.rpartition(":") if ".py:" in user else (user, "", "")
    if not class_name.isidentifier():
        raise SGLangLoadError(f"{spec}: give the class as {name}:FILE.py:CLASS")
    cls, module, digest = load_user_class(spec, loaded, file, class_name)
    if issubclass(cls, loaded.cache_class):
        served = loaded.with_class(spec, label, cls, module, digest)
        return label, ("served", served), _info(served)
    if issubclass(cls, loaded.m["radix"].RadixCache):
        # the legacy adapter over the unified load's radix_cache modules (no tree core)
        legacy = loaded.with_class(spec, label, cls, module, digest)
        legacy = replace(legacy, core="", core_reason="")
        return label, ("legacy", legacy), _info(legacy)
    raise SGLangLoadError(
        f"{spec}: {class_name} subclasses neither UnifiedRadixCache nor sglang's RadixCache"
    )


def _load_legacy(spec: str, label: str, arg: str | None) -> Loaded:
    from radixbench.cache.sglang.legacy_load import load_sglang
    from radixbench.cache.sglang.loader import SGLangLoadError

    inner = "sglang" if arg is None else f"sglang:{arg}"
    try:
        loaded = load_sglang(inner)
    except SGLangLoadError as e:  # name the spec as given, once
        msg = str(e)
        raise SGLangLoadError(spec + msg[len(inner) :] if msg.startswith(inner) else msg) from None
    return replace(loaded, spec=spec, label=label)


def _info(loaded: Loaded) -> ImplInfo:
    from radixbench.cache.sglang.report import impl_info

    return impl_info(loaded, loaded.core, loaded.core_reason)


def _policy_error(handle: Handle, policy: str) -> str | None:
    """Why a loaded SGLang spec cannot run ``policy``: the unified cores run all eight; the
    legacy ``RadixCache`` all but ``tlru`` (a user's class may add it: ``keeps_tlru_lengths``)."""
    kind, loaded = handle
    known = ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru")
    if kind == "served" or policy in known:
        return None
    if policy == "tlru" and getattr(loaded.cache_class, "keeps_tlru_lengths", False):
        return None
    return f"supported: {', '.join(known)}"


def _make(
    handle: Handle,
    pool: ReqToTokenPool | None,
    allocator: TokenToKVPoolAllocator,
    config: CacheConfig,
) -> PrefixCache:
    kind, loaded = handle
    if config.hicache is not None:
        return _make_hicache(kind, loaded, pool, allocator, config)
    if kind == "served":
        from radixbench.cache.sglang.served import ServedSGLangCache

        return ServedSGLangCache(pool, allocator, config, loaded)
    from radixbench.cache.sglang.legacy import SGLangCache

    return SGLangCache(pool, allocator, config, loaded)


def _make_hicache(
    kind: str,
    loaded: Loaded,
    pool: ReqToTokenPool | None,
    allocator: TokenToKVPoolAllocator,
    config: CacheConfig,
) -> PrefixCache:
    """The served cache with HiCache on (:mod:`radixbench.cache.sglang.hicache`): sglang's own
    ``UnifiedRadixCache`` of the spec's package and core. Raises ``ValueError`` for the legacy
    class and a user's subclass (neither is driven with HiCache)."""
    from radixbench.cache.sglang.hicache import ServedHiCache, load_hicache

    name, path, user = _parse(loaded.spec, loaded.spec.partition(":")[2] or None)
    if kind != "served" or user is not None:
        raise ValueError(
            f"--enable-hierarchical-cache: {loaded.spec} is not driven with HiCache "
            "(sglang's UnifiedRadixCache is: sglang, sglang-python, NAME:PATH)"
        )
    return ServedHiCache(
        pool, allocator, config, load_hicache(loaded.spec, SGLANG_IMPLS[name], path)
    )


_HELP = {
    "sglang": "sglang 0.5.23 as served: UnifiedRadixCache, tree core by SGLang's rules (Rust "
    "by default)",
    "sglang-python": "UnifiedRadixCache with the Python tree core",
    "sglang-legacy": "the classic RadixCache (PR #6907's class, the waiting-queue tree)",
}


def register() -> None:
    """Register ``sglang``, ``sglang-python`` and ``sglang-legacy`` (replacing earlier
    entries of those names). Loads nothing."""
    for name, core in SGLANG_IMPLS.items():
        register_impl(
            ImplEntry(
                name=name,
                load=_load,
                factory=_make,
                reference=SGLANG_RUST_REFERENCE if core == "auto" else SGLANG_REFERENCE,
                policy_error=_policy_error,
                takes_arg=True,
                hicache=core != "legacy",
                help=f"{_HELP[name]}; {name}:PATH (a checkout's python/ folder), "
                f"{name}:FILE.py:CLASS (a subclass)",
            ),
            replace=True,
        )
