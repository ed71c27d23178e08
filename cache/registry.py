"""Cache implementations registered by name: what ``--impl`` accepts.

Modelled on sglang 0.5.23's ``register_radix_cache_backend`` (``mem_cache/registry.py``) and
``register_tree_core_backend`` (``unified_cache/tree_core_registry.py``): an implementation is
one :class:`ImplEntry` — a name, a factory that builds a fresh :class:`~radixbench.cache.
interface.PrefixCache` over the simulator's pool and allocator, the variant axes it takes from
the variant (radixbench's cache takes ``evictor`` and ``matcher``; SGLang's caches evict and
match with their own code and take none), the algorithms its own code runs (its like-for-like
partner among radixbench's variants) and a loader that checks a spec before any work starts.

A spec is ``NAME`` or ``NAME:ARG`` (``sglang:PATH``, ``sglang:FILE.py:CLASS``): the entry
``NAME`` gets ``ARG``. Built-in entries are registered by :mod:`radixbench.cache.impls`
(radixbench's own cache) and :mod:`radixbench.cache.sglang` (SGLang's); others with
:func:`register_impl` from code, or from an installed package's entry point in the group
``radixbench.impls`` (a callable registering its entries, run on first lookup). Resolving a
spec (:func:`resolve`) loads it once per process and caches the result, so SGLang is loaded
once however many places ask.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
    from radixbench.cache.config import CacheConfig
    from radixbench.cache.interface import ImplInfo, PrefixCache

__all__ = [
    "ENTRY_POINT_GROUP",
    "ImplEntry",
    "ImplError",
    "Resolved",
    "check_policy",
    "check_spec",
    "default_label",
    "entries",
    "make_cache",
    "register_impl",
    "resolve",
    "spec_of",
    "unregister_impl",
]

#: Entry-point group of plug-in implementations: each entry point names a callable that
#: registers its implementations with :func:`register_impl`.
ENTRY_POINT_GROUP = "radixbench.impls"

#: ``factory(handle, req_to_token_pool, allocator, config)``: a fresh, empty cache. Typed so
#: that mypy checks every built-in implementation against :class:`PrefixCache`.
Factory = Callable[
    [Any, "ReqToTokenPool | None", "TokenToKVPoolAllocator", "CacheConfig"], "PrefixCache"
]


class ImplError(ValueError):
    """A spec cannot be used (unknown name, bad argument, load failure, unsupported policy);
    the message is one line naming the spec."""


@dataclass(frozen=True)
class Resolved:
    """A loaded spec: ``label`` (its name in variant names), what ``make`` needs (``handle``:
    whatever the entry's loader returned) and ``info`` (for reports: version, origin, files)."""

    spec: str
    entry: ImplEntry
    label: str
    handle: Any
    info: ImplInfo


@dataclass(frozen=True)
class ImplEntry:
    """One registered implementation.

    ``name``: the spec's head (``radixbench``, ``sglang``...). ``load(spec, arg)`` -> ``(label,
    handle, info)``: checks and loads the spec (``arg`` is what follows ``NAME:``, ``None``
    for a bare name); raises ``ValueError`` with a one-line message. ``factory(handle, pool,
    allocator, config)``: a fresh, empty cache. ``axes``: the variant axes it takes from the
    variant (the others are the implementation's own and left empty in its variants).
    ``reference``: axis -> the value of radixbench's axis that the implementation's own code
    runs (its like-for-like partner, e.g. sglang 0.5.23 evicts as ``heapify`` and matches as
    ``galloping``). ``policies``: eviction policies it supports (``None``: all);
    ``policy_error(handle, policy)``: when given, decides instead (a one-line reason, or
    ``None`` when the loaded spec runs ``policy``).
    ``takes_arg``: whether ``NAME:ARG`` is accepted; ``help``: one line for ``--impl``'s help.
    ``hicache``: whether the factory builds the cache with HiCache tiers when
    ``CacheConfig.hicache`` is set (``--enable-hierarchical-cache`` is refused otherwise).
    """

    name: str
    load: Callable[[str, str | None], tuple[str, Any, ImplInfo]]
    factory: Factory
    axes: frozenset[str] = frozenset()
    reference: Mapping[str, str] = field(default_factory=dict)
    policies: tuple[str, ...] | None = None
    policy_error: Callable[[Any, str], str | None] | None = None
    takes_arg: bool = False
    help: str = ""
    hicache: bool = False


_ENTRIES: dict[str, ImplEntry] = {}
_RESOLVED: dict[str, Resolved] = {}
_loaded_plugins = False
#: cache -> the spec :func:`make_cache` built it for (what an error inside it is blamed on)
_BUILT: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def register_impl(entry: ImplEntry, *, replace: bool = False) -> ImplEntry:
    """Add ``entry`` under ``entry.name``; ``ValueError`` if the name is taken (unless
    ``replace``) or is not a plain name (no ``:``, ``,`` or whitespace)."""
    name = entry.name
    if not name or any(c in name for c in ":, \t\n"):
        raise ValueError(f"impl name {name!r}: must be non-empty, without ':', ',' or spaces")
    if name in _ENTRIES and not replace:
        raise ValueError(f"impl {name!r} is already registered")
    _ENTRIES[name] = entry
    for key in [k for k in _RESOLVED if _RESOLVED[k].entry.name == name]:
        del _RESOLVED[key]
    return entry


def unregister_impl(name: str) -> None:
    """Remove ``name`` (and its cached loads); no error if absent."""
    _ENTRIES.pop(name, None)
    for key in [k for k in _RESOLVED if _RESOLVED[k].entry.name == name]:
        del _RESOLVED[key]


def _load_builtins() -> None:
    global _loaded_plugins
    import radixbench.cache.impls
    import radixbench.cache.sglang  # noqa: F401  (registers SGLang's caches)

    if _loaded_plugins:
        return
    _loaded_plugins = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()()
        except Exception as e:  # a broken plug-in must not break the built-in impls
            msg = " ".join(str(e).split()) or type(e).__name__
            raise ImplError(f"entry point {ep.name} ({ep.value}): {msg}") from None


def entries() -> dict[str, ImplEntry]:
    """The registered implementations by name (built-ins and plug-ins loaded)."""
    _load_builtins()
    return dict(_ENTRIES)


def known_specs() -> str:
    """``radixbench, sglang, sglang:ARG, ...``: the spec forms, for error messages."""
    return ", ".join(f"{n}, {n}:ARG" if e.takes_arg else n for n, e in entries().items())


def check_spec(spec: str) -> None:
    """Check ``spec``'s syntax against the registered implementations (nothing is loaded).
    Raises :class:`ImplError` (one line naming the spec)."""
    name, sep, arg = spec.partition(":")
    entry = entries().get(name)
    if entry is None or (sep and (not arg or not entry.takes_arg)):
        raise ImplError(f"unknown impl {spec!r}; known: {known_specs()}")


def default_label(spec: str) -> str:
    """The label of ``spec``, derived from the text alone: the name (``radixbench``,
    ``sglang``, ``sglang-python``, ``sglang-legacy``), ``NAME@<checkout folder>`` for
    ``NAME:PATH`` (PATH or its ``python/`` folder), ``NAME:<CLASS>`` for
    ``NAME:FILE.py:CLASS``. Never contains ``/``. Raises :class:`ImplError` as
    :func:`check_spec`."""
    check_spec(spec)
    name, sep, rest = spec.partition(":")
    if not sep:
        return spec
    if ".py:" in rest:
        return f"{name}:{rest.rpartition(':')[2]}"
    base = Path(rest).expanduser().resolve()
    top = base.parent if base.name == "python" else base
    return f"{name}@{top.name or 'root'}"


def resolve(spec: str) -> Resolved:
    """Check and load ``spec`` (cached per spec string). Raises :class:`ImplError` (one line
    naming the spec) for an unknown name, an argument where none is taken, or a load failure
    (missing package or path, unsupported version...)."""
    if spec in _RESOLVED:
        return _RESOLVED[spec]
    name, sep, arg = spec.partition(":")
    entry = entries().get(name)
    if entry is None or (sep and not arg):
        raise ImplError(f"unknown impl {spec!r}; known: {known_specs()}")
    if sep and not entry.takes_arg:
        raise ImplError(f"impl {name!r} takes no argument, got {spec!r}")
    try:
        label, handle, info = entry.load(spec, arg if sep else None)
    except ImplError:
        raise
    except ValueError as e:
        msg = " ".join(str(e).split())
        raise ImplError(msg if msg.startswith(spec) else f"{spec}: {msg}") from None
    resolved = Resolved(spec, entry, label, handle, info)
    _RESOLVED[spec] = resolved
    return resolved


def check_policy(spec: str, policy: str) -> None:
    """Raise :class:`ImplError` (one line naming the spec) if ``spec``'s implementation cannot
    run eviction ``policy`` (the entry's ``policy_error``, else its ``policies``)."""
    r = resolve(spec)
    if r.entry.policy_error is not None:
        reason = r.entry.policy_error(r.handle, policy)
    elif r.entry.policies is not None and policy not in r.entry.policies:
        reason = f"supported: {', '.join(r.entry.policies)}"
    else:
        reason = None
    if reason is not None:
        raise ImplError(
            f"{spec}: eviction policy {policy!r} is not supported by {r.info.cls} ({reason})"
        )


def make_cache(
    spec: str,
    req_to_token_pool: ReqToTokenPool | None,
    token_to_kv_pool_allocator: TokenToKVPoolAllocator,
    config: CacheConfig,
) -> PrefixCache:
    """A fresh, empty cache of implementation ``spec`` over the given pool and allocator
    (``config.evictor`` / ``matcher`` are used only by implementations that take those axes).
    Raises :class:`ImplError` as :func:`resolve`, or ``ValueError`` (one line) when the
    implementation cannot run ``config`` (e.g. an eviction policy it lacks)."""
    r = resolve(spec)
    cache: PrefixCache = r.entry.factory(
        r.handle, req_to_token_pool, token_to_kv_pool_allocator, config
    )
    with contextlib.suppress(TypeError):  # not weakly referenceable: errors name no spec
        _BUILT[cache] = spec
    return cache


def spec_of(cache: object) -> str | None:
    """The spec :func:`make_cache` built ``cache`` for (None for another object)."""
    try:
        return _BUILT.get(cache)
    except TypeError:  # unhashable or not weakly referenceable
        return None
