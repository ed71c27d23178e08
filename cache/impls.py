"""The built-in cache implementations, registered in :mod:`radixbench.cache.registry`.

* ``radixbench`` — radixbench's own :class:`~radixbench.cache.radix_cache.RadixCache`, the one
  implementation that takes the ``evictor`` and ``matcher`` axes from the variant.
* ``sglang`` — what an sglang 0.5.23 server builds by default: ``UnifiedRadixCache``
  (``default_radix_cache_factory`` -> ``create_unified_radix_cache``, ``mem_cache/registry.py:83,
  149``) with the tree core SGLang's own ``select_tree_core_backend`` picks
  (``unified_cache/tree_core_registry.py:124``: Rust by default, the Python core when
  ``resolve_tree_core_backend`` falls back or the extension does not load; the reason is in
  ``ImplInfo.tree_core_reason``), behind :class:`~radixbench.cache.sglang.served.
  ServedSGLangCache` (loaded by :mod:`~radixbench.cache.sglang.unified_load`).
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
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path
from typing import Any

from radixbench.cache.interface import ImplInfo
from radixbench.cache.registry import ImplEntry, register_impl

__all__ = [
    "RADIXBENCH",
    "SGLANG_IMPLS",
    "SGLANG_REFERENCE",
    "SGLANG_RUST_REFERENCE",
    "radixbench_info",
]

#: The spec of radixbench's own cache (the default implementation).
RADIXBENCH = "radixbench"

#: What sglang 0.5.23's ``RadixCache`` and the unified Python core run, as radixbench's axis
#: values: ``evict`` heapifies every evictable leaf per call and ``match_at`` gallops.
SGLANG_REFERENCE = {"evictor": "heapify", "matcher": "galloping"}
#: What the unified cache's Rust core runs: a heap over every evictable leaf per ``evict``, an
#: in-place compiled compare (module docstring).
SGLANG_RUST_REFERENCE = {"evictor": "heapify", "matcher": "memview"}
#: The implementations of SGLang: name -> tree core (``auto``, ``python``) or ``legacy``.
SGLANG_IMPLS = {"sglang": "auto", "sglang-python": "python", "sglang-legacy": "legacy"}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def radixbench_info() -> ImplInfo:
    """What radixbench's cache runs: the installed radixbench's version, the folder of
    ``radixbench.cache`` and the sha256 of every module of it but the SGLang loaders and
    adapters (``sglang_*.py``), the implementation registry and the interface."""
    import radixbench.cache as pkg

    folder = Path(pkg.__file__ or "").parent
    skip = {"impls.py", "registry.py", "interface.py"}
    files = {
        f"radixbench/cache/{p.name}": _sha256(p)
        for p in sorted(folder.glob("*.py"))
        if p.name not in skip and not p.name.startswith("sglang_")
    }
    try:
        version = importlib.metadata.version("radixbench")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return ImplInfo(
        label=RADIXBENCH,
        spec=RADIXBENCH,
        version=version,
        origin=str(folder),
        cls="radixbench.cache.radix_cache.RadixCache",
        files=files,
    )


def _load_radixbench(spec: str, arg: str | None) -> tuple[str, Any, ImplInfo]:
    return RADIXBENCH, None, radixbench_info()


def _make_radixbench(handle: Any, pool: Any, allocator: Any, config: Any) -> Any:
    if config.hicache is not None:
        from radixbench.cache.hicache import TieredRadixCache

        return TieredRadixCache(
            pool, allocator, config, config.hicache, config.hicache.bytes_per_token
        )
    from radixbench.cache.radix_cache import RadixCache

    return RadixCache(pool, allocator, config)


def _parse(spec: str, arg: str | None) -> tuple[str, str | None, str | None]:
    """``(name, PATH or None, FILE.py:CLASS or None)`` of an SGLang spec."""
    name = spec.partition(":")[0]
    if arg is None:
        return name, None, None
    if ".py:" in arg or arg.endswith(".py"):
        return name, None, arg
    return name, arg, None


def _load_sglang(spec: str, arg: str | None) -> tuple[str, Any, ImplInfo]:
    """Load an SGLang spec: ``(label, (adapter kind, load), info)``. Raises ``ValueError`` (one
    line naming the spec) for a missing package, path, core or class, an unsupported version,
    an import failure, or a CLASS that subclasses neither SGLang cache class."""
    from radixbench.cache.sglang.loader import SGLangLoadError

    name, path, user = _parse(spec, arg)
    core = SGLANG_IMPLS[name]
    label = default_label(spec)
    if core == "legacy":
        legacy = _load_legacy(spec, label, arg)
        return label, ("legacy", legacy), _info("legacy", legacy)
    from radixbench.cache.sglang.unified_load import load_unified, load_user_class, with_class

    loaded = load_unified(spec, core, path)
    if user is None:
        loaded = with_class(loaded, spec, label, loaded.cache_class)
        return label, ("served", loaded), _info("served", loaded)
    file, _, class_name = user.rpartition(":") if ".py:" in user else (user, "", "")
    if not class_name.isidentifier():
        raise SGLangLoadError(f"{spec}: give the class as {name}:FILE.py:CLASS")
    cls, module, digest = load_user_class(spec, loaded, file, class_name)
    if issubclass(cls, loaded.cache_class):
        served = with_class(loaded, spec, label, cls, module, digest)
        return label, ("served", served), _info("served", served)
    if issubclass(cls, loaded.m["radix"].RadixCache):
        legacy = _legacy_from_unified(spec, label, loaded, cls, module, digest)
        return label, ("legacy", legacy), _info("legacy", legacy)
    raise SGLangLoadError(
        f"{spec}: {class_name} subclasses neither UnifiedRadixCache nor sglang's RadixCache"
    )


def _load_legacy(spec: str, label: str, arg: str | None) -> Any:
    from dataclasses import replace

    from radixbench.cache.sglang.legacy_load import SGLangLoadError, load_sglang

    inner = "sglang" if arg is None else f"sglang:{arg}"
    try:
        loaded = load_sglang(inner)
    except SGLangLoadError as e:  # name the spec as given, once
        msg = str(e)
        raise SGLangLoadError(spec + msg[len(inner) :] if msg.startswith(inner) else msg) from None
    return replace(loaded, spec=spec, label=label)


def _legacy_from_unified(
    spec: str, label: str, loaded: Any, cls: type, module: Any, digest: str
) -> Any:
    """A ``LoadedSGLang`` (legacy adapter) over the unified load's ``radix_cache`` modules, for
    a user's ``RadixCache`` subclass executed against that load."""
    from radixbench.cache.sglang.legacy_load import LoadedSGLang

    files = {**loaded.files, str(Path(module.__file__ or "")): digest}
    m = loaded.m
    return LoadedSGLang(
        spec, label, loaded.version, loaded.origin, m["radix"], cls, m["bpc"], m["cip"],
        files, loaded.modules, module,
    )  # fmt: skip


def _info(kind: str, loaded: Any) -> ImplInfo:
    from radixbench.cache.sglang.report import impl_info

    if kind == "served":
        return impl_info(loaded, loaded.core, loaded.core_reason)
    return impl_info(loaded)


def _policy_error(handle: Any, policy: str) -> str | None:
    """Why a loaded SGLang spec cannot run ``policy``: the unified cores run all eight; the
    legacy ``RadixCache`` all but ``tlru`` (a user's class may add it: ``keeps_tlru_lengths``)."""
    kind, loaded = handle
    known = ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru")
    if kind == "served" or policy in known:
        return None
    if policy == "tlru" and getattr(loaded.cache_class, "keeps_tlru_lengths", False):
        return None
    return f"supported: {', '.join(known)}"


def _make_sglang(handle: Any, pool: Any, allocator: Any, config: Any) -> Any:
    kind, loaded = handle
    if config.hicache is not None:
        return _make_hicache(kind, loaded, pool, allocator, config)
    if kind == "served":
        from radixbench.cache.sglang.served import ServedSGLangCache

        return ServedSGLangCache(pool, allocator, config, loaded)
    from radixbench.cache.sglang.legacy import SGLangCache

    return SGLangCache(pool, allocator, config, loaded)


def _make_hicache(kind: str, loaded: Any, pool: Any, allocator: Any, config: Any) -> Any:
    """The served cache with HiCache on (``radixbench.cache.sglang.hicache``): sglang's own
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


register_impl(
    ImplEntry(
        name=RADIXBENCH,
        load=_load_radixbench,
        factory=_make_radixbench,
        axes=frozenset({"evictor", "matcher"}),
        hicache=True,
        help="radixbench's cache (the default; takes --evictors and --matchers)",
    ),
    replace=True,
)
_SGLANG_HELP = {
    "sglang": "sglang 0.5.23 as served: UnifiedRadixCache, tree core by SGLang's rules (Rust "
    "by default)",
    "sglang-python": "UnifiedRadixCache with the Python tree core",
    "sglang-legacy": "the classic RadixCache (PR #6907's class, the waiting-queue tree)",
}
for _name, _core in SGLANG_IMPLS.items():
    register_impl(
        ImplEntry(
            name=_name,
            load=_load_sglang,
            factory=_make_sglang,
            reference=SGLANG_RUST_REFERENCE if _core == "auto" else SGLANG_REFERENCE,
            policy_error=_policy_error,
            takes_arg=True,
            hicache=_core != "legacy",
            help=f"{_SGLANG_HELP[_name]}; {_name}:PATH (a checkout's python/ folder), "
            f"{_name}:FILE.py:CLASS (a subclass)",
        ),
        replace=True,
    )


# ---------------------------------------------------------------- transitional API
# (the simulator and harness move to radixbench.cache.registry; these keep them working)


def check_spec(spec: str) -> None:
    """Check ``spec``'s syntax against the registered implementations (nothing is loaded).
    Raises ``ValueError`` (one line naming the spec)."""
    from radixbench.cache.registry import ImplError, entries, known_specs

    name, sep, arg = spec.partition(":")
    entry = entries().get(name)
    if entry is None or (sep and (not arg or not entry.takes_arg)):
        raise ImplError(f"unknown impl {spec!r}; known: {known_specs()}")


def default_label(spec: str) -> str:
    """The label of ``spec``, derived from the text alone: the name (``radixbench``,
    ``sglang``, ``sglang-python``, ``sglang-legacy``), ``NAME@<checkout folder>`` for
    ``NAME:PATH`` (PATH or its ``python/`` folder), ``NAME:<CLASS>`` for
    ``NAME:FILE.py:CLASS``. Never contains ``/``."""
    check_spec(spec)
    name, sep, rest = spec.partition(":")
    if not sep:
        return spec
    if ".py:" in rest:
        return f"{name}:{rest.rpartition(':')[2]}"
    base = Path(rest).expanduser().resolve()
    top = base.parent if base.name == "python" else base
    return f"{name}@{top.name or 'root'}"


def make_cache(spec: str, req_to_token_pool: Any, allocator: Any, config: Any) -> Any:
    """``radixbench.cache.registry.make_cache``."""
    from radixbench.cache.registry import make_cache as make

    return make(spec, req_to_token_pool, allocator, config)
