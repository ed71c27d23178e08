"""Load SGLang's served prefix cache, ``UnifiedRadixCache``, without its GPU-serving dependencies.

sglang 0.5.23's scheduler builds its tree cache with ``default_radix_cache_factory`` ->
``create_unified_radix_cache`` (``mem_cache/registry.py:83,149``): a ``UnifiedRadixCache``
(``mem_cache/unified_radix_cache.py:199``) whose tree core is picked by
``select_tree_core_backend`` (``unified_cache/tree_core_registry.py:124``):
``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND`` (default ``rust``), then ``resolve_tree_core_backend``
(``:109``) falls back to the Python core for the reasons of ``_rust_fallback_reason`` (``:44``).
The Rust core is the bundled extension ``mem_cache/rust_tree_core/mem_cache*.so`` behind
``rust_tree_core/adapter.py``; the Python core is ``unified_cache/unified_tree_core.py``.

``load_unified(spec, core)`` executes SGLang's own files as ``sglang_loader`` does for the legacy
``RadixCache`` (no SGLang code is copied): while a load runs, a meta-path finder answers every
``sglang.*`` import with a module of ``REAL_PACKAGES`` executed from its source file (the
extension module is loaded by Python's own finder from the package folder), a package whose
``__init__`` runs (``RUN_INIT``), an empty synthetic package, or a stand-in for
``STUBBED_MODULES`` (GPU kernels, host pools, cache controllers, metrics, the scheduler's
``Req``: imported at module level, never called on the FULL-only, no-HiCache path radixbench
drives). A stand-in's attributes raise ``SGLangStubError`` when called; used as a base class
they give a class that raises when instantiated (``page_interleave.py`` subclasses the paged
allocator, only for ``isinstance``). Two stand-ins carry real SGLang functions compiled alone
from their source (``REAL_FUNCTIONS``: ``utils/common.py`` cannot be imported without orjson,
triton...): ``assert_int64_array`` (called on every Rust-core key) and ``ceil_align``.
Any other ``sglang.*`` import raises ``ImportError``, so a version needing more is reported.

``core``: ``"auto"`` (SGLang's own rules; Rust when the extension loads, else Python with the
reason), ``"python"`` (forced). The chosen core, why, and the sha256 of every file executed
(the ``.so`` included) are in ``LoadedUnified``. Loads are isolated (``sglang*`` entries of
``sys.modules`` set aside while loading, captured afterwards) and cached by spec and core.
Code that imports at run time (tree-core construction) runs inside ``activate()``.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from radixbench.cache.sglang_loader import (
    SUPPORTED,
    SGLangLoadError,
    SGLangStubError,
    _checkout_dir,
    _is_sglang,
    _one_line,
    _sha256,
    _swapped,
    installed_dir,
    read_version,
)

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

#: Stand-ins: module -> who imports it and why it is never called on radixbench's paths.
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

#: Stand-in module -> (source file under the package, functions compiled alone from it).
REAL_FUNCTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sglang.srt.utils": ("srt/utils/common.py", ("assert_int64_array",)),
    "sglang.srt.utils.common": (
        "srt/utils/common.py",
        ("assert_int64_array", "ceil_div", "ceil_align"),
    ),
}

CORES = ("auto", "python")


class _StubInstanceBase:
    """Base of the classes a stand-in gives when subclassed: instantiating raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise SGLangStubError(f"{type(self).__qualname__} (a radixbench stand-in) was built")


class _Stubbed:
    """An attribute of a stand-in module: attribute access chains, a call raises, and as a
    base class it gives a class whose instances cannot be built."""

    def __init__(self, qualname: str) -> None:
        self._qualname = qualname

    def __getattr__(self, name: str) -> _Stubbed:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stubbed(f"{self._qualname}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise SGLangStubError(
            f"{self._qualname} was called, but radixbench.cache.sglang_unified stubs it out "
            "(see STUBBED_MODULES): this SGLang code path is not supported"
        )

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        module, _, name = self._qualname.rpartition(".")
        return (type(name, (_StubInstanceBase,), {"__module__": module}),)


class _StubModule(ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stubbed(f"{self.__name__}.{name}")


def _functions_from_source(path: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """SGLang's own top-level functions ``names`` of ``path``, compiled alone (with the
    module's ``from __future__`` flags) into one namespace."""
    tree = ast.parse(path.read_text(), filename=str(path))
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {f.name for f in fns}
    if missing:
        raise ImportError(f"{path} defines no {', '.join(sorted(missing))}")
    namespace: dict[str, Any] = {"array": __import__("array").array}
    code = compile(ast.Module(body=list(fns), type_ignores=[]), str(path), "exec")
    exec(code, namespace)
    return {name: namespace[name] for name in names}


class _Loader(importlib.abc.Loader):
    def __init__(self, pkg_dir: Path) -> None:
        self.pkg_dir = pkg_dir

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        if spec.name not in STUBBED_MODULES:
            return None  # a synthetic package: the default module
        module = _StubModule(spec.name, STUBBED_MODULES[spec.name])
        if spec.name in REAL_FUNCTIONS:
            rel, names = REAL_FUNCTIONS[spec.name]
            module.__dict__.update(_functions_from_source(self.pkg_dir / rel, names))
        return module

    def exec_module(self, module: ModuleType) -> None:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    """Answers every ``sglang.*`` import from ``pkg_dir`` while a load runs."""

    def __init__(self, pkg_dir: Path) -> None:
        self.pkg_dir = pkg_dir
        self.loader = _Loader(pkg_dir)
        self.executed: list[str] = []

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not _is_sglang(fullname):
            return None
        rel = Path(*fullname.split(".")[1:])
        folder = self.pkg_dir / rel
        if fullname == RUST_EXTENSION:
            return None  # the compiled extension: Python's own finder, from the package folder
        if fullname in STUBBED_MODULES or (folder.is_dir() and fullname not in RUN_INIT):
            spec = importlib.machinery.ModuleSpec(fullname, self.loader, is_package=folder.is_dir())
            if folder.is_dir():
                spec.submodule_search_locations = [str(folder)]
            return spec
        if fullname in RUN_INIT:
            self.executed.append(fullname)
            return importlib.util.spec_from_file_location(
                fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
            )
        source = self.pkg_dir / f"{rel}.py"
        if source.is_file() and any(
            fullname == p.rstrip(".") or fullname.startswith(p) for p in REAL_PACKAGES
        ):
            self.executed.append(fullname)
            return importlib.util.spec_from_file_location(fullname, source)
        raise ImportError(f"{fullname} is neither loaded nor stubbed by radixbench")


@dataclass(frozen=True, eq=False)
class LoadedUnified:
    """One loaded spec. ``cache_class``: ``UnifiedRadixCache`` or the user's subclass;
    ``core``: ``"rust"`` / ``"python"`` (what every cache of this load is built with) and
    ``core_reason`` (why); ``m``: the load's modules by short name (``urc``, ``bpc``, ``cip``,
    ``ct``, ``radix``, ``cbase`` = ``unified_cache.components.base``, ``utc`` =
    ``unified_tree_core``, ``registry`` = ``tree_core_registry``); ``files``: sha256 of every
    file executed or loaded, by path relative to the package's parent folder; ``modules``: all
    its ``sglang.*`` modules."""

    spec: str
    label: str
    version: str
    origin: str
    cache_class: type
    core: str
    core_reason: str
    m: dict[str, ModuleType]
    files: dict[str, str]
    modules: dict[str, ModuleType]
    user_module: ModuleType | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """This load's modules are the ``sglang.*`` of ``sys.modules`` for the block."""
        with _swapped(self.modules):
            yield


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
_LOADS: dict[tuple[str, str], LoadedUnified] = {}


def _import(
    spec: str, pkg_dir: Path, core: str
) -> tuple[dict[str, ModuleType], list[str], str | None]:
    """Execute ``TOP_MODULES`` (and, unless ``core`` forces Python, the Rust adapter when its
    extension loads) in isolation. Returns the modules, the names executed and why the Rust
    adapter did not load."""
    finder = _Finder(pkg_dir)
    dont_write = sys.dont_write_bytecode
    rust_error = None
    with _swapped({}):
        sys.meta_path.insert(0, finder)
        sys.dont_write_bytecode = True
        try:
            for name in TOP_MODULES:
                importlib.import_module(name)
            try:
                if core != "python":
                    importlib.import_module(RUST_ADAPTER)
            except Exception as e:  # the extension is missing or does not load
                rust_error = _one_line(e)
        except Exception as e:
            msg = f"{spec}: cannot import {name} from {pkg_dir}: {_one_line(e)}"
            raise SGLangLoadError(msg) from None
        finally:
            sys.meta_path.remove(finder)
            sys.dont_write_bytecode = dont_write
        modules = {k: v for k, v in sys.modules.items() if _is_sglang(k)}
    return modules, finder.executed, rust_error


class _ProbeAllocator:
    """What ``_rust_fallback_reason`` reads of an allocator: its device."""

    device = "cpu"


def _choose_core(
    spec: str,
    core: str,
    m: dict[str, ModuleType],
    modules: dict[str, ModuleType],
    rust_error: str | None,
) -> tuple[str, str]:
    """The tree core SGLang's own rules pick (``select_tree_core_backend``) and why."""
    if core == "python":
        return "python", f"forced by {spec!r} (the Python TreeCore)"
    env = m["environ"].envs.SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND
    name = env.get()
    params = m["cip"].CacheInitParams(
        disable=False,
        req_to_token_pool=None,
        token_to_kv_pool_allocator=_ProbeAllocator(),
        page_size=1,
        tree_components=(m["ct"].ComponentType.FULL,),
    )
    with _swapped(modules):
        if name != "rust":
            chosen = m["registry"].resolve_tree_core_backend(name, params)
            if m["registry"].get_tree_core_factory(chosen) is None:
                known = ", ".join(m["registry"].registered_tree_core_backends())
                raise SGLangLoadError(
                    f"{spec}: SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND={name!r} is not a "
                    f"registered tree core ({known})"
                )
            return chosen, f"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND={name}"
        reason = m["registry"]._rust_fallback_reason(params)
    if reason is not None:
        return "python", f"resolve_tree_core_backend fell back to the Python TreeCore: {reason}"
    if rust_error is not None:
        return "python", f"the Rust TreeCore extension did not load ({rust_error})"
    default = "" if env.is_set() else " (default)"
    return "rust", f"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=rust{default}; no fallback reason"


def _files(pkg_dir: Path, modules: dict[str, ModuleType], executed: list[str]) -> dict[str, str]:
    files = {}
    for name in executed:
        path = Path(modules[name].__file__ or "")
        files[str(path.relative_to(pkg_dir.parent))] = _sha256(path)
    for rel, _ in set(REAL_FUNCTIONS.values()):
        files[f"sglang/{rel}"] = _sha256(pkg_dir / rel)
    ext = modules.get(RUST_EXTENSION)
    if ext is not None and getattr(ext, "__file__", None):
        path = Path(ext.__file__ or "")
        files[str(path.relative_to(pkg_dir.parent))] = _sha256(path)
    return files


def _load_package(spec: str, pkg_dir: Path, label: str, core: str) -> LoadedUnified:
    version, version_file = read_version(pkg_dir)
    if version is None:
        raise SGLangLoadError(f"{spec}: cannot determine the sglang version of {pkg_dir}")
    release = m.group() if (m := re.match(r"\d+\.\d+\.\d+", version)) else version
    if release not in SUPPORTED:
        raise SGLangLoadError(
            f"{spec}: sglang {version} at {pkg_dir} is not supported "
            f"(supported: {', '.join(sorted(SUPPORTED))})"
        )
    if not (pkg_dir / "srt" / "mem_cache" / "unified_radix_cache.py").is_file():
        raise SGLangLoadError(f"{spec}: {pkg_dir} has no srt/mem_cache/unified_radix_cache.py")
    modules, executed, rust_error = _import(spec, pkg_dir, core)
    short = {k: modules[v] for k, v in _SHORT.items()}
    chosen, reason = _choose_core(spec, core, short, modules, rust_error)
    if chosen == "rust" and RUST_EXTENSION not in modules:
        raise SGLangLoadError(f"{spec}: the Rust TreeCore cannot be loaded: {rust_error}")
    files = _files(pkg_dir, modules, executed)
    if version_file is not None:
        files[str(version_file.relative_to(pkg_dir.parent))] = _sha256(version_file)
    cls = short["urc"].UnifiedRadixCache
    return LoadedUnified(
        spec, label, version, str(pkg_dir), cls, chosen, reason, short, files, modules
    )


def load_user_class(
    spec: str, base: LoadedUnified, file: str, class_name: str
) -> tuple[type, ModuleType, str]:
    """Execute FILE.py against ``base``'s modules; returns ``(CLASS, module, sha256)``. Raises
    ``SGLangLoadError`` for a missing file, an import failure or a missing class."""
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise SGLangLoadError(f"{spec}: no such file {path}")
    digest = _sha256(path)
    name = f"radixbench_sglang_user_{path.stem}_{digest[:12]}_{base.core}"
    finder = _Finder(Path(base.origin))
    try:
        module_spec = importlib.util.spec_from_file_location(name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # stays: dataclasses and pickling look classes up there
        with base.activate():
            sys.meta_path.insert(0, finder)
            try:
                module_spec.loader.exec_module(module)
            finally:
                sys.meta_path.remove(finder)
    except Exception as e:
        sys.modules.pop(name, None)
        raise SGLangLoadError(f"{spec}: cannot import {path}: {_one_line(e)}") from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise SGLangLoadError(f"{spec}: {path} defines no class {class_name}")
    return cls, module, digest


def load_unified(spec: str, core: str = "auto", path: str | None = None) -> LoadedUnified:
    """Load sglang's ``UnifiedRadixCache`` from the installed package (``path`` None) or a
    checkout's ``python/`` folder, with tree core ``core`` (``auto``: SGLang's rules; ``python``:
    forced); cached per (package folder, core). ``spec`` only names the load in messages and
    ``ImplInfo``. Mutates ``sys.modules`` only while loading. Raises ``SGLangLoadError`` (one
    line naming ``spec``) for a missing package, path or core, an unsupported version or an
    import failure."""
    if core not in CORES:
        raise SGLangLoadError(f"{spec}: unknown tree core {core!r} (known: {', '.join(CORES)})")
    if path is None:
        pkg_dir, label = installed_dir(spec), "sglang"
    else:
        pkg_dir = _checkout_dir(spec, path)
        top = pkg_dir.parent.parent if pkg_dir.parent.name == "python" else pkg_dir.parent
        label = f"sglang@{top.name}"
    key = (str(pkg_dir), core)
    if key not in _LOADS:
        _LOADS[key] = _load_package(spec, pkg_dir, label, core)
    loaded = _LOADS[key]
    return loaded if loaded.spec == spec else _respec(loaded, spec)


def _respec(loaded: LoadedUnified, spec: str) -> LoadedUnified:
    from dataclasses import replace

    return replace(loaded, spec=spec)


def with_class(
    loaded: LoadedUnified,
    spec: str,
    label: str,
    cls: type,
    module: ModuleType | None = None,
    digest: str = "",
) -> LoadedUnified:
    """``loaded`` named ``spec`` / ``label`` and running ``cls`` (a user's class from
    ``module``, whose sha256 ``digest`` joins ``files``)."""
    from dataclasses import replace

    files = dict(loaded.files)
    if module is not None:
        files[str(Path(module.__file__ or ""))] = digest
    return replace(loaded, spec=spec, label=label, cache_class=cls, files=files, user_module=module)


__all__ = [
    "CORES",
    "REAL_FUNCTIONS",
    "STUBBED_MODULES",
    "LoadedUnified",
    "load_unified",
    "load_user_class",
    "with_class",
]
