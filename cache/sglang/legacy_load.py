"""Load SGLang's real ``RadixCache`` without SGLang's GPU-serving dependencies.

``load_sglang(spec)`` imports ``sglang.srt.mem_cache.radix_cache`` of sglang 0.5.23 (and what
it imports) from SGLang's own source files; no SGLang code is copied into radixbench. Specs:
``"sglang"``: the installed package (located with ``importlib.util.find_spec``, which executes
nothing); ``"sglang:PATH"``: a checkout's ``python/`` folder (``PATH/sglang``, or
``PATH/python/sglang``), so a branch under review runs as it is; ``"sglang:FILE.py:CLASS"``: a
subclass (or replacement) of SGLang's ``RadixCache`` in FILE.py, run on the installed package.

The load executes :data:`RADIX_CACHE`, a :class:`~radixbench.cache.sglang.finder.ModuleSet`,
with the one SGLang loader (:func:`~radixbench.cache.sglang.loader.load_modules`): the modules of
``REAL_MODULES`` from their source files, synthetic packages for their parents (no package
``__init__.py`` runs: ``sglang/__init__.py``, ``sglang/srt/utils/__init__.py``... pull in triton,
orjson, zmq...), stubs for ``STUBBED_MODULES`` (imported at module level, never called on the
paths radixbench drives; their attributes raise ``SGLangStubError`` when called); any other
``sglang.*`` import raises ``ImportError``, so a version needing more is reported, not
half-loaded. Each load's ``sglang.*`` modules are its own (``Loaded.modules``): the
installed package and a checkout coexist in one process. Loads are cached by package folder.
Limitation: an ``import`` run inside an SGLang method resolves against whatever
``sys.modules`` holds then. The methods ``SGLangCache`` drives (``__init__`` without metrics,
``reset``, ``match_prefix``, ``insert``, ``evict``, ``checkpoint``, ``inc_lock_ref``,
``dec_lock_ref``, ``lock``, ``unlock``, ``path_device_indices`` and their helpers) run none
in 0.5.23 (asserted by the tests); wrap a user CLASS that does in ``Loaded.activate()``.
"""

from __future__ import annotations

from pathlib import Path

from radixbench.cache.sglang.finder import ModuleSet
from radixbench.cache.sglang.loader import (
    Loaded,
    SGLangLoadError,
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

_SHORT = {
    "radix": "sglang.srt.mem_cache.radix_cache",
    "bpc": "sglang.srt.mem_cache.base_prefix_cache",
    "cip": "sglang.srt.mem_cache.cache_init_params",
}
_LOADS: dict[str, Loaded] = {}


def _load_package(spec: str, pkg_dir: Path, label: str) -> Loaded:
    version, loaded = load_package(spec, pkg_dir, RADIX_CACHE)
    m = {k: loaded.modules[v] for k, v in _SHORT.items()}
    return Loaded(
        spec, label, version, str(pkg_dir), m["radix"].RadixCache, m, loaded.files,
        loaded.modules,
    )  # fmt: skip


def _load_user(spec: str, file: str, class_name: str) -> Loaded:
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
    return base.with_class(spec, f"sglang:{class_name}", cls, module, digest)


def load_sglang(spec: str) -> Loaded:
    """Load ``spec`` (``"sglang"``, ``"sglang:PATH"`` or ``"sglang:FILE.py:CLASS"``, see the
    module docstring), or return the cached load of the same package folder (or FILE.py and
    CLASS). Mutates ``sys.modules`` only while loading (but for one entry per FILE.py, under a
    unique name). Raises ``SGLangLoadError`` (one-line message) for a malformed spec, a missing
    package or path, an unsupported version, an import failure, a FILE.py without CLASS or a
    CLASS that neither subclasses SGLang's ``RadixCache`` nor defines ``REPLACEMENT_API``."""
    head, sep, rest = spec.partition(":")
    if head != "sglang" or (sep and not rest):
        raise SGLangLoadError(
            f"{spec}: not an SGLang spec (sglang, sglang:PATH or sglang:FILE.py:CLASS)"
        )
    if sep and (".py:" in rest or rest.endswith(".py")):
        file, _, class_name = rest.rpartition(":") if ".py:" in rest else (rest, "", "")
        if not class_name.isidentifier():
            raise SGLangLoadError(f"{spec}: give the class as sglang:FILE.py:CLASS")
        key = f"sglang:{Path(file).expanduser().resolve()}:{class_name}"
        if key not in _LOADS:
            _LOADS[key] = _load_user(spec, file, class_name)
        return _LOADS[key]
    pkg_dir, label = package_dir(spec, rest if sep else None)
    key = f"sglang:{pkg_dir}"
    if key not in _LOADS:
        _LOADS[key] = _load_package(spec, pkg_dir, label)
    return _LOADS[key]
