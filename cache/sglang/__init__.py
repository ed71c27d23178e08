"""radixbench.cache.sglang — sglang 0.5.23's own caches, run from its source files.

Importing this package registers SGLang's caches as implementations
(:mod:`radixbench.cache.registry`): ``sglang`` (the served ``UnifiedRadixCache``, tree core by
SGLang's rules; with HiCache when ``CacheConfig.hicache`` is set), ``sglang-python`` (the same
with the Python tree core) and ``sglang-legacy`` (the classic ``RadixCache``), each also as
``NAME:PATH`` (a checkout) and ``NAME:FILE.py:CLASS`` (a subclass). Build them through the
registry (``registry.make_cache("sglang", ...)``); nothing outside this package imports its
modules, which are private:

* the one loader: ``finder`` (what runs from source, what is stubbed), ``loader``
  (:func:`load_modules`, isolated loads; the one ``Loaded`` record), ``package`` (installed
  package or checkout, its version); what each cache loads: ``legacy_load``, ``unified_load``
  (+ ``tree_core``: the tree-core choice, by SGLang's own rules), ``allocators``;
* the adapters to :class:`~radixbench.cache.interface.PrefixCache`: ``legacy`` (classic
  ``RadixCache``), ``served`` (+ ``served_tree``, ``tree_shadow``: the tree as radixbench reads
  it), ``hicache`` (HiCache on; ``hicache_standins``: what replaces its I/O); shared by them:
  ``adapter`` (their common base: sizes, ``info``), ``shims`` (keys, pools and requests as
  SGLang sees them), ``process_state`` (SGLang's process-wide state kept per adapter),
  ``report`` (``ImplInfo`` and the timing of SGLang's calls on itself), ``events`` (its KV
  events as radixbench's);
* ``direct``: the served cache called without the adapter (the baseline of its overhead);
* ``entries``: the registered implementations (loaders, factories, like-for-like partners).

Public here: the implementation names and their partners, :class:`SGLangLoadError`, the
versions supported, :func:`load_allocators` (sglang's own KV allocators, for ``bench alloc``),
:class:`DirectServed` (the served cache called directly, for ``bench served``'s adapter
overhead) and :func:`loaded_modules` (the ``sglang.*`` modules of a load, to check output
against sglang's own classes). Importing the package loads nothing of SGLang.
"""

from __future__ import annotations

from types import ModuleType

from radixbench.cache.sglang.allocators import SGLangAllocators, load_allocators
from radixbench.cache.sglang.direct import DirectServed
from radixbench.cache.sglang.entries import (
    SGLANG_IMPLS,
    SGLANG_REFERENCE,
    SGLANG_RUST_REFERENCE,
    register,
)
from radixbench.cache.sglang.loader import SGLangLoadError
from radixbench.cache.sglang.package import SUPPORTED

__all__ = [
    "SGLANG_IMPLS",
    "SGLANG_REFERENCE",
    "SGLANG_RUST_REFERENCE",
    "SUPPORTED",
    "DirectServed",
    "SGLangAllocators",
    "SGLangLoadError",
    "load_allocators",
    "loaded_modules",
]

register()


def loaded_modules(spec: str = "sglang") -> dict[str, ModuleType]:
    """The ``sglang.*`` modules the implementation ``spec`` (``sglang``, ``sglang-python``,
    ``sglang-legacy``, ``NAME:PATH``...) loaded: its own isolated copies, e.g.
    ``sglang.srt.disaggregation.kv_events`` of the served cache. Loads ``spec`` if needed
    (``registry.resolve``). Raises ``ImplError`` (a ``ValueError``, one line naming the spec)
    when it cannot be loaded."""
    from radixbench.cache.registry import resolve

    _kind, loaded = resolve(spec).handle
    return dict(loaded.modules)
