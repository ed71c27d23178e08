"""Load SGLang's real ``RadixCache`` without SGLang's GPU-serving dependencies.

``load_sglang(spec)`` imports ``sglang.srt.mem_cache.radix_cache`` of sglang 0.5.23 (and what
it imports) from SGLang's own source files; no SGLang code is copied into radixbench. Specs:
``"sglang"``: the installed package (located with ``importlib.util.find_spec``, which executes
nothing); ``"sglang:PATH"``: a checkout's ``python/`` folder (``PATH/sglang``, or
``PATH/python/sglang``), so a branch under review runs as it is; ``"sglang:FILE.py:CLASS"``: a
subclass (or replacement) of SGLang's ``RadixCache`` in FILE.py, run on the installed package.

The load executes :data:`RADIX_CACHE`, a :class:`~radixbench.cache.sglang.loader.ModuleSet`,
with the one SGLang loader (:func:`~radixbench.cache.sglang.loader.load_modules`): the modules of
``REAL_MODULES`` from their source files, synthetic packages for their parents (no package
``__init__.py`` runs: ``sglang/__init__.py``, ``sglang/srt/utils/__init__.py``... pull in triton,
orjson, zmq...), stubs for ``STUBBED_MODULES`` (imported at module level, never called on the
paths radixbench drives; their attributes raise ``SGLangStubError`` when called); any other
``sglang.*`` import raises ``ImportError``, so a version needing more is reported, not
half-loaded. Each load's ``sglang.*`` modules are its own (``LoadedSGLang.modules``): the
installed package and a checkout coexist in one process. Loads are cached by spec. Limitation:
an ``import`` run inside an SGLang method resolves against whatever ``sys.modules`` holds then.
The methods ``SGLangCache`` drives (``__init__`` without metrics, ``reset``, ``match_prefix``,
``insert``, ``evict``, ``checkpoint``, ``inc_lock_ref``, ``dec_lock_ref``, ``lock``, ``unlock``,
``path_device_indices`` and their helpers) run none in 0.5.23 (asserted by the tests); wrap a
user CLASS that does in ``LoadedSGLang.activate()``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from radixbench.cache.sglang.finder import ModuleSet
from radixbench.cache.sglang.loader import (
    SGLangLoadError,
    activated,
    exec_user_class,
    user_file,
)
from radixbench.cache.sglang.package import load_package, package_dir

#: Executed from the package's own source files, in this order.
REAL_MODULES: tuple[str, ...] = (
    "sglang.srt.mem_cache.unified_cache.component_type",
    "sglang.srt.mem_cache.evict_policy",
    "sglang.srt.mem_cache.utils",
    "sglang.srt.mem_cache.events",
    "sglang.srt.mem_cache.cache_init_params",
    "sglang.srt.mem_cache.base_prefix_cache",
    "sglang.srt.mem_cache.radix_cache",
)

#: Imported at module level by ``REAL_MODULES`` but never called by what radixbench drives:
#: module -> who imports it and why it is not needed.
STUBBED_MODULES: dict[str, str] = {
    "sglang.srt.utils.common": "radix_cache: ceil_align, called only when swa_evict_floor > 0",
    "sglang.kernels.ops.kvcache.mla_buffer": "utils: re-exported MLA KV-buffer kernels",
    "sglang.srt.environ": "utils: envs, read only by maybe_init_custom_mem_pool",
    "sglang.srt.mem_cache.cpp_utils.native_hash": "utils: page hashes, for KV events only",
    "sglang.srt.disaggregation.kv_events": "events: event classes, KV events are disabled",
    "sglang.srt.mem_cache.allocator": "base_prefix_cache: a type annotation only",
    "sglang.srt.mem_cache.memory_pool": "base_prefix_cache: a type annotation only",
    "sglang.srt.observability.metrics_collector": "base_prefix_cache: enable_metrics only",
    "sglang.srt.runtime_context": "base_prefix_cache: enable_metrics only",
}

#: Methods a CLASS that does not subclass ``RadixCache`` must define to replace it.
REPLACEMENT_API: tuple[str, ...] = (
    "reset", "match_prefix", "insert", "evict", "inc_lock_ref", "dec_lock_ref", "lock",
    "unlock", "checkpoint", "path_device_indices", "evictable_size", "protected_size",
    "_delete_leaf",
)  # fmt: skip


#: SGLang's ``RadixCache`` and what it imports (:func:`load_sglang`).
RADIX_CACHE = ModuleSet(REAL_MODULES, STUBBED_MODULES)

_MODULES = ("radix_cache", "base_prefix_cache", "cache_init_params")


@dataclass(frozen=True, eq=False)
class LoadedSGLang:
    """One loaded spec. ``module``: its ``sglang.srt.mem_cache.radix_cache``; ``cache_class``:
    ``RadixCache`` or the user's CLASS; ``base_prefix_cache`` (``MatchPrefixParams``,
    ``InsertParams``, ``EvictParams``) and ``cache_init_params`` (``CacheInitParams``): its
    modules; ``files``: sha256 (hex) of every source file executed, by path relative to the
    package's parent folder (the user's FILE.py by its absolute path); ``modules``: all its
    ``sglang.*`` modules (real, synthetic and stubs); ``user_module``: FILE.py's module."""

    spec: str
    label: str
    version: str
    origin: str
    module: ModuleType
    cache_class: type
    base_prefix_cache: ModuleType
    cache_init_params: ModuleType
    files: dict[str, str]
    modules: dict[str, ModuleType]
    user_module: ModuleType | None = None

    def activate(self) -> contextlib.AbstractContextManager[None]:
        """Make this load's modules the ``sglang.*`` of ``sys.modules`` for a ``with`` block (for
        code that imports at run time); restores the previous entries afterwards."""
        return activated(self.modules)


_LOADS: dict[str, LoadedSGLang] = {}


def _load_package(spec: str, pkg_dir: Path, label: str) -> LoadedSGLang:
    version, loaded = load_package(spec, pkg_dir, RADIX_CACHE)
    radix, bpc, cip = (loaded.modules[f"sglang.srt.mem_cache.{m}"] for m in _MODULES)
    return LoadedSGLang(
        spec, label, version, str(pkg_dir), radix, radix.RadixCache, bpc, cip, loaded.files,
        loaded.modules,
    )  # fmt: skip


def _load_user(spec: str, file: str, class_name: str) -> LoadedSGLang:
    path = user_file(spec, file)
    try:
        base = load_sglang("sglang")
    except SGLangLoadError as e:
        raise SGLangLoadError(f"{spec}: {e}") from None
    cls, module, digest = exec_user_class(
        spec, path, class_name, Path(base.origin), RADIX_CACHE, base.modules
    )
    missing = [a for a in REPLACEMENT_API if not callable(getattr(cls, a, None))]
    if not issubclass(cls, base.cache_class) and missing:
        raise SGLangLoadError(
            f"{spec}: {class_name} is not a subclass of sglang's RadixCache and lacks "
            f"{', '.join(missing)}"
        )
    files = {**base.files, str(path): digest}
    label = f"sglang:{class_name}"
    return replace(base, spec=spec, label=label, cache_class=cls, files=files, user_module=module)


def load_sglang(spec: str) -> LoadedSGLang:
    """Load ``spec`` (``"sglang"``, ``"sglang:PATH"`` or ``"sglang:FILE.py:CLASS"``, see the
    module docstring), or return the cached load of the same spec (paths resolved). Mutates
    ``sys.modules`` only while loading (but for one entry per FILE.py, under a unique name).
    Raises ``SGLangLoadError`` (one-line message) for a malformed spec, a missing package or
    path, an unsupported version, an import failure, a FILE.py without CLASS or a CLASS that
    neither subclasses SGLang's ``RadixCache`` nor defines ``REPLACEMENT_API``."""
    head, sep, rest = spec.partition(":")
    if head != "sglang" or (sep and not rest):
        raise SGLangLoadError(
            f"{spec}: not an SGLang spec (sglang, sglang:PATH or sglang:FILE.py:CLASS)"
        )
    file = class_name = label = ""
    pkg_dir = None
    if not sep:
        key = "sglang"
    elif ".py:" in rest or rest.endswith(".py"):
        file, _, class_name = rest.rpartition(":") if ".py:" in rest else (rest, "", "")
        if not class_name.isidentifier():
            raise SGLangLoadError(f"{spec}: give the class as sglang:FILE.py:CLASS")
        key = f"sglang:{Path(file).expanduser().resolve()}:{class_name}"
    else:
        pkg_dir, label = package_dir(spec, rest)
        key = f"sglang:{pkg_dir}"
    if key in _LOADS:
        return _LOADS[key]
    if pkg_dir is not None:
        loaded = _load_package(spec, pkg_dir, label)
    elif class_name:
        loaded = _load_user(spec, file, class_name)
    else:
        loaded = _load_package(spec, *package_dir(spec, None))
    _LOADS[key] = loaded
    return loaded
