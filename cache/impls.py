"""radixbench's own cache as a registered implementation (:mod:`radixbench.cache.registry`).

``radixbench`` — :class:`~radixbench.cache.radix_cache.RadixCache`, the one implementation that
takes the ``evictor`` and ``matcher`` axes from the variant; with ``CacheConfig.hicache`` set,
:class:`~radixbench.cache.hicache.TieredRadixCache` (host and storage tiers). SGLang's caches
register themselves in :mod:`radixbench.cache.sglang`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radixbench.cache.interface import ImplInfo
from radixbench.cache.registry import ImplEntry, register_impl

if TYPE_CHECKING:
    from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
    from radixbench.cache.config import CacheConfig
    from radixbench.cache.interface import PrefixCache

__all__ = ["RADIXBENCH", "radixbench_info"]

#: The spec of radixbench's own cache (the default implementation).
RADIXBENCH = "radixbench"

#: Modules of ``radixbench.cache`` that are not radixbench's cache: the implementation registry,
#: the interface, this module, and the package of SGLang's caches (``sglang/``).
_NOT_THE_CACHE = ("impls.py", "registry.py", "interface.py")
_SGLANG_PACKAGE = "sglang"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def radixbench_info() -> ImplInfo:
    """What radixbench's cache runs: the installed radixbench's version, the folder of
    ``radixbench.cache`` and the sha256 of every module of the package and its subpackages
    (``hicache/``) but the package of SGLang's caches (``radixbench.cache.sglang``), the
    implementation registry and the interface, by path (``radixbench/cache/...``)."""
    import radixbench.cache as pkg

    folder = Path(pkg.__file__ or "").parent
    files = {
        f"radixbench/cache/{p.relative_to(folder).as_posix()}": _sha256(p)
        for p in sorted(folder.rglob("*.py"))
        if p.relative_to(folder).parts[0] != _SGLANG_PACKAGE and p.name not in _NOT_THE_CACHE
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


def _make_radixbench(
    handle: Any,
    pool: ReqToTokenPool | None,
    allocator: TokenToKVPoolAllocator,
    config: CacheConfig,
) -> PrefixCache:
    if config.hicache is not None:
        from radixbench.cache.hicache import TieredRadixCache

        return TieredRadixCache(
            pool, allocator, config, config.hicache, config.hicache.bytes_per_token
        )
    from radixbench.cache.radix_cache import RadixCache

    return RadixCache(pool, allocator, config)


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
