"""Cache implementations by spec: radixbench's own ``RadixCache`` or SGLang's real one.

A spec is ``"radixbench"`` (:data:`RADIXBENCH`, radixbench's cache with the configured evictor
and matcher) or an SGLang spec understood by :func:`radixbench.cache.sglang_loader.load_sglang`
(``"sglang"``, ``"sglang:PATH"``, ``"sglang:FILE.py:CLASS"``), run through
:class:`radixbench.cache.sglang_adapter.SGLangCache`. The simulator builds its cache with
:func:`make_cache`; choosing specs, labelling them and describing them in reports is the
harness's business (``radixbench.harness.impl``).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig
from radixbench.cache.radix_cache import RadixCache

__all__ = ["RADIXBENCH", "check_spec", "default_label", "make_cache"]

#: The spec of radixbench's own cache (the default implementation).
RADIXBENCH = "radixbench"


def check_spec(spec: str) -> None:
    """Check ``spec``'s syntax (nothing is loaded): ``radixbench``, ``sglang`` or
    ``sglang:<rest>``. Raises ``ValueError`` (one line naming the spec)."""
    head, sep, rest = spec.partition(":")
    if spec == RADIXBENCH or (head == "sglang" and (not sep or rest)):
        return
    raise ValueError(
        f"unknown impl {spec!r}; known: radixbench, sglang, sglang:PATH, sglang:FILE.py:CLASS"
    )


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


def make_cache(
    spec: str,
    req_to_token_pool: ReqToTokenPool,
    token_to_kv_pool_allocator: TokenToKVPoolAllocator,
    config: CacheConfig,
) -> RadixCache:
    """A fresh, empty cache of implementation ``spec`` over the given pool and allocator.

    ``radixbench``: ``RadixCache(pool, allocator, config)``. An SGLang spec: the (cached) load
    of ``spec`` wrapped in an ``SGLangCache`` (``config.evictor`` / ``config.matcher`` are
    ignored: SGLang's are its own); it presents ``RadixCache``'s public API, so it is typed as
    one here for the simulator, which uses nothing else. Raises ``ValueError`` for a bad spec,
    ``SGLangLoadError`` (a ``ValueError``, one line) when SGLang cannot be loaded or does not
    support ``config.policy``.
    """
    check_spec(spec)
    if spec == RADIXBENCH:
        return RadixCache(req_to_token_pool, token_to_kv_pool_allocator, config)
    from radixbench.cache.sglang_adapter import SGLangCache
    from radixbench.cache.sglang_loader import load_sglang

    cache = SGLangCache(req_to_token_pool, token_to_kv_pool_allocator, config, load_sglang(spec))
    return cast(RadixCache, cache)
