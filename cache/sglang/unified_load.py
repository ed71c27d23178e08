"""Load SGLang's served prefix cache, ``UnifiedRadixCache``, without its GPU-serving dependencies.

sglang 0.5.23's scheduler builds its tree cache with ``default_radix_cache_factory`` ->
``create_unified_radix_cache`` (``mem_cache/registry.py:83,149``): a ``UnifiedRadixCache``
(``mem_cache/unified_radix_cache.py:199``) whose tree core is picked by
``select_tree_core_backend`` (``unified_cache/tree_core_registry.py:124``; radixbench follows
it in :mod:`radixbench.cache.sglang.tree_core`). The Rust core is the bundled extension
``mem_cache/rust_tree_core/mem_cache*.so`` behind ``rust_tree_core/adapter.py``; the Python core
is ``unified_cache/unified_tree_core.py``.

``load_unified(spec, core)`` executes :data:`UNIFIED_RADIX_CACHE` with the one SGLang loader
(:func:`~radixbench.cache.sglang.loader.load_modules`; no SGLang code is copied): the modules
of ``TOP_MODULES``, then the Rust adapter (``RUST_ADAPTER``, optional: its failure is the
reason the Python core is chosen), each from its source file, and what they import: under
``REAL_PACKAGES`` from the source files too, the compiled extension (``RUST_EXTENSION``) by
Python's own finder from the package folder, packages whose ``__init__`` runs (``RUN_INIT``),
any other folder as an empty synthetic package, and stubs for ``STUBBED_MODULES`` (GPU kernels,
host pools, cache controllers, metrics, the scheduler's ``Req``: imported at module level, never
called on the FULL-only, no-HiCache path radixbench drives). A stub's attributes raise
``SGLangStubError`` when called; used as a base class they give a class that raises when
instantiated (``page_interleave.py`` subclasses the paged allocator, only for ``isinstance``).
Two stubs carry real SGLang functions compiled alone from their source (``REAL_FUNCTIONS``:
``utils/common.py`` cannot be imported without orjson, triton...): ``assert_int64_array``
(called on every Rust-core key) and ``ceil_align``. Any other ``sglang.*`` import raises
``ImportError``, so a version needing more is reported.

``core``: ``"auto"`` (SGLang's own rules; Rust when the extension loads, else Python with the
reason), ``"python"`` (forced; the Rust adapter is not imported). The chosen core, why, and the
sha256 of every file executed (the ``.so`` included) are in ``Loaded``.

Which Rust extension: an auto load imports ``RUST_EXTENSION`` from the package folder first
(``rust_tree_core/mem_cache*.so``, by Python's own finder), so a checkout's own build there is
the one its adapter runs. SGLang's loader (``rust_extensions/loader.py:68``,
``load_rust_extension``) returns an extension already imported; without it, in a source
checkout (``rust/Cargo.toml`` present) it ignores an in-package build and takes its fingerprinted
cache (``$SGLANG_CACHE_DIR/rust_extensions``) or runs ``cargo build``; radixbench uses the
in-package build when present, as ``SGLANG_RUST_BUILD_MODE=never`` does, and otherwise leaves
the choice to SGLang's loader (``core_reason`` names the file loaded). Loads are
isolated (each has its own ``sglang.*`` modules) and cached by package folder and core. Code
that imports at run time (tree-core construction) runs inside ``activate()``.
"""

from __future__ import annotations

from array import array
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from radixbench.cache.sglang.finder import ModuleSet, SourceFunctions
from radixbench.cache.sglang.loader import (
    Loaded,
    SGLangLoadError,
    exec_user_class,
    user_file,
)
from radixbench.cache.sglang.package import load_package, package_dir
from radixbench.cache.sglang.tree_core import CORES, choose_core

#: Imported (in this order) by a load: the cache, both tree cores' Python sides, what the tree
#: core registry imports at construction time. Their own imports are served by the finder.
TOP_MODULES: tuple[str, ...] = (
    "sglang.srt.mem_cache.unified_radix_cache",
    "sglang.srt.mem_cache.unified_cache.unified_tree_core",
    "sglang.srt.rust_extensions.torch_build",
)
RUST_ADAPTER = "sglang.srt.mem_cache.rust_tree_core.adapter"
RUST_EXTENSION = "sglang.srt.mem_cache.rust_tree_core.mem_cache"

#: Packages whose ``__init__.py`` runs (they define what their importers take from them).
RUN_INIT: tuple[str, ...] = (
    "sglang.srt.mem_cache.unified_cache.components",
    "sglang.srt.rust_extensions",
)

#: Package prefixes whose modules are executed from their source files when imported.
REAL_PACKAGES: tuple[str, ...] = (
    "sglang.srt.mem_cache.",
    "sglang.srt.session.streaming_session",
    "sglang.srt.utils.poll_timer",
    "sglang.srt.utils.rank_consensus_checker",
    "sglang.srt.utils.network",
    "sglang.srt.environ",
    "sglang.srt.runtime_context",
    "sglang.srt.arg_groups.",
    "sglang.srt.distributed.communication_tags",
    "sglang.srt.disaggregation.kv_events",
    "sglang.srt.rust_extensions.",
)

#: Stubs: module -> who imports it and why it is never called on radixbench's paths.
STUBBED_MODULES: dict[str, str] = {
    "sglang.srt.managers.cache_controller": "HiCache controller (no host tier)",
    "sglang.srt.managers.schedule_batch": "Req / ReqKvInfo: annotations; streaming sessions",
    "sglang.srt.mem_cache.buffer_mode.pipeline": "HiCache buffer-only mode",
    "sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller": "HiCache controller",
    "sglang.srt.mem_cache.memory_pool": "KV pools (triton); annotations and isinstance",
    "sglang.srt.mem_cache.swa_memory_pool": "SWA pools: no sliding window",
    "sglang.srt.mem_cache.unified_cache.unified_cache_linker": "external cache linker",
    "sglang.srt.mem_cache.allocator": "allocator package __init__ (triton kernels)",
    "sglang.srt.mem_cache.allocator.paged": "paged allocator: base class of page_interleave",
    "sglang.srt.observability.metrics_collector": "metrics (enable_metrics off)",
    "sglang.srt.utils": "utils package __init__ (orjson, triton...): see REAL_FUNCTIONS",
    "sglang.srt.utils.common": "ceil_align / is_npu: see REAL_FUNCTIONS",
    "sglang.kernels.ops.memory.common": "triton kernels of mem_cache/common.py",
    "sglang.kernels.ops.kvcache.mla_buffer": "triton kernels of mem_cache/utils.py",
}

_COMMON = "srt/utils/common.py"

#: Stubbed module -> SGLang functions compiled alone into it from their source file.
REAL_FUNCTIONS: dict[str, SourceFunctions] = {
    "sglang.srt.utils": SourceFunctions(_COMMON, ("assert_int64_array",), {"array": array}),
    "sglang.srt.utils.common": SourceFunctions(
        _COMMON, ("assert_int64_array", "ceil_div", "ceil_align"), {"array": array}
    ),
}

#: ``UnifiedRadixCache``, both tree cores and what they import (:func:`load_unified`; a forced
#: Python core loads it without ``optional``: the package's own Rust extension, when present,
#: then the Rust adapter).
UNIFIED_RADIX_CACHE = ModuleSet(
    real=TOP_MODULES,
    stubbed=STUBBED_MODULES,
    functions=REAL_FUNCTIONS,
    real_prefixes=REAL_PACKAGES,
    run_init=RUN_INIT,
    passthrough=(RUST_EXTENSION,),
    folder_packages=True,
    optional=(RUST_EXTENSION, RUST_ADAPTER),
)


_SHORT = {
    "urc": "sglang.srt.mem_cache.unified_radix_cache",
    "bpc": "sglang.srt.mem_cache.base_prefix_cache",
    "cip": "sglang.srt.mem_cache.cache_init_params",
    "ct": "sglang.srt.mem_cache.unified_cache.component_type",
    "radix": "sglang.srt.mem_cache.radix_cache",
    "cbase": "sglang.srt.mem_cache.unified_cache.components.base",
    "utc": "sglang.srt.mem_cache.unified_cache.unified_tree_core",
    "registry": "sglang.srt.mem_cache.unified_cache.tree_core_registry",
    "environ": "sglang.srt.environ",
}
_LOADS: dict[tuple[str, str], Loaded] = {}


def _load_package(spec: str, pkg_dir: Path, label: str, core: str) -> Loaded:
    module_set = UNIFIED_RADIX_CACHE
    if core == "python":
        module_set = replace(module_set, optional=())
    needs = "srt/mem_cache/unified_radix_cache.py"
    version, loaded = load_package(spec, pkg_dir, module_set, needs)
    modules = loaded.modules
    short = {k: modules[v] for k, v in _SHORT.items()}
    rust_error = loaded.failed.get(RUST_ADAPTER)
    chosen, reason = choose_core(spec, core, short, modules, rust_error)
    if chosen == "rust" and RUST_EXTENSION not in modules:
        raise SGLangLoadError(f"{spec}: the Rust TreeCore cannot be loaded: {rust_error}")
    if chosen == "rust":
        reason += f"; extension {_where(modules[RUST_EXTENSION], pkg_dir)}"
    cls = short["urc"].UnifiedRadixCache
    return Loaded(
        spec, label, version, str(pkg_dir), cls, short, loaded.files, modules, chosen, reason
    )


def _where(module: ModuleType, pkg_dir: Path) -> str:
    """``module``'s file, relative to ``pkg_dir``'s parent when inside it (``sglang/srt/...``:
    the package's own build), else absolute (SGLang's fingerprinted cache)."""
    path = Path(module.__file__ or "")
    return (
        str(path.relative_to(pkg_dir.parent)) if path.is_relative_to(pkg_dir.parent) else str(path)
    )


def load_user_class(
    spec: str, base: Loaded, file: str, class_name: str
) -> tuple[type, ModuleType, str]:
    """Execute FILE.py against ``base``'s modules (as module
    ``radixbench_sglang_user_<stem>_<sha256[:12]>_<core>``, which stays in ``sys.modules``);
    returns ``(CLASS, module, sha256)``. Raises ``SGLangLoadError`` (one line naming ``spec``)
    for a missing file, an import failure or a missing class."""
    path = user_file(spec, file)
    pkg_dir, suffix = Path(base.origin), f"_{base.core}"
    return exec_user_class(
        spec, path, class_name, pkg_dir, UNIFIED_RADIX_CACHE, base.modules, suffix
    )


def load_unified(spec: str, core: str = "auto", path: str | None = None) -> Loaded:
    """Load sglang's ``UnifiedRadixCache`` from the installed package (``path`` None) or a
    checkout's ``python/`` folder, with tree core ``core`` (``auto``: SGLang's rules; ``python``:
    forced); cached per (package folder, core). ``spec`` only names the load in messages and
    ``ImplInfo``. Mutates ``sys.modules`` only while loading. Raises ``SGLangLoadError`` (one
    line naming ``spec``) for a missing package, path or core, an unsupported version or an
    import failure."""
    if core not in CORES:
        raise SGLangLoadError(f"{spec}: unknown tree core {core!r} (known: {', '.join(CORES)})")
    pkg_dir, label = package_dir(spec, path)
    key = (str(pkg_dir), core)
    if key not in _LOADS:
        _LOADS[key] = _load_package(spec, pkg_dir, label, core)
    loaded = _LOADS[key]
    return loaded if loaded.spec == spec else replace(loaded, spec=spec)


__all__ = [
    "CORES",
    "REAL_FUNCTIONS",
    "STUBBED_MODULES",
    "UNIFIED_RADIX_CACHE",
    "load_unified",
    "load_user_class",
]
