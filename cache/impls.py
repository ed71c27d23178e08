"""The built-in cache implementations, registered in :mod:`radixbench.cache.registry`.

* ``radixbench`` — radixbench's own :class:`~radixbench.cache.radix_cache.RadixCache`, the one
  implementation that takes the ``evictor`` and ``matcher`` axes from the variant.
* ``sglang`` — SGLang's real ``RadixCache`` of the installed sglang 0.5.23, behind
  :class:`~radixbench.cache.sglang_adapter.SGLangCache`; ``sglang:PATH`` a checkout's
  ``python/`` folder, ``sglang:FILE.py:CLASS`` a user's subclass (``sglang_loader``). Its
  evictor and matcher are SGLang's own: 0.5.23 heapifies every evictable leaf per ``evict``
  (radixbench's ``heapify``) and compares keys with ``RadixKey.match_at``'s galloping loop
  (radixbench's ``galloping``), its like-for-like partner among radixbench's variants.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path
from typing import Any

from radixbench.cache.interface import ImplInfo
from radixbench.cache.registry import ImplEntry, register_impl

__all__ = ["RADIXBENCH", "SGLANG_REFERENCE", "radixbench_info"]

#: The spec of radixbench's own cache (the default implementation).
RADIXBENCH = "radixbench"

#: What sglang 0.5.23's ``RadixCache`` runs, as radixbench's axis values: ``evict`` heapifies
#: every evictable leaf per call (``radix_cache.py: RadixCache.evict``) and ``match_at``
#: gallops (``radix_cache.py: RadixKey.match_at``).
SGLANG_REFERENCE = {"evictor": "heapify", "matcher": "galloping"}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def radixbench_info() -> ImplInfo:
    """What radixbench's cache runs: the installed radixbench's version, the folder of
    ``radixbench.cache`` and the sha256 of every module of it but the SGLang loader and
    adapter and the implementation registry."""
    import radixbench.cache as pkg

    folder = Path(pkg.__file__ or "").parent
    skip = {"sglang_adapter.py", "sglang_loader.py", "impls.py", "registry.py", "interface.py"}
    files = {
        f"radixbench/cache/{p.name}": _sha256(p)
        for p in sorted(folder.glob("*.py"))
        if p.name not in skip
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
    from radixbench.cache.radix_cache import RadixCache

    return RadixCache(pool, allocator, config)


def _load_sglang(spec: str, arg: str | None) -> tuple[str, Any, ImplInfo]:
    from radixbench.cache.sglang_adapter import sglang_info
    from radixbench.cache.sglang_loader import load_sglang

    loaded = load_sglang(spec)
    return loaded.label, loaded, sglang_info(loaded)


def _make_sglang(loaded: Any, pool: Any, allocator: Any, config: Any) -> Any:
    from radixbench.cache.sglang_adapter import SGLangCache

    return SGLangCache(pool, allocator, config, loaded)


register_impl(
    ImplEntry(
        name=RADIXBENCH,
        load=_load_radixbench,
        factory=_make_radixbench,
        axes=frozenset({"evictor", "matcher"}),
        help="radixbench's cache (the default; takes --evictors and --matchers)",
    ),
    replace=True,
)
register_impl(
    ImplEntry(
        name="sglang",
        load=_load_sglang,
        factory=_make_sglang,
        reference=SGLANG_REFERENCE,
        policies=("lru", "lfu", "fifo", "mru", "filo", "priority", "slru"),
        takes_arg=True,
        help="SGLang's RadixCache: sglang (installed 0.5.23), sglang:PATH (a checkout's "
        "python/ folder), sglang:FILE.py:CLASS (a RadixCache subclass)",
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
    """The label ``load_sglang`` gives ``spec``, derived from the text alone: ``radixbench``,
    ``sglang``, ``sglang@<checkout folder>`` for ``sglang:PATH`` (PATH or its ``python/``
    folder), ``sglang:<CLASS>`` for ``sglang:FILE.py:CLASS``. Never contains ``/``."""
    check_spec(spec)
    _, sep, rest = spec.partition(":")
    if not sep:
        return spec
    if ".py:" in rest:
        return f"sglang:{rest.rpartition(':')[2]}"
    base = Path(rest).expanduser().resolve()
    top = base.parent if base.name == "python" else base
    return f"sglang@{top.name or 'root'}"


def make_cache(spec: str, req_to_token_pool: Any, allocator: Any, config: Any) -> Any:
    """``radixbench.cache.registry.make_cache``."""
    from radixbench.cache.registry import make_cache as make

    return make(spec, req_to_token_pool, allocator, config)
