"""Load SGLang's real ``RadixCache`` without SGLang's GPU-serving dependencies.

``load_sglang(spec)`` imports ``sglang.srt.mem_cache.radix_cache`` of sglang 0.5.23 (and what
it imports) from SGLang's own source files; no SGLang code is copied into radixbench. Specs:
``"sglang"``: the installed package (located with ``importlib.util.find_spec``, which executes
nothing); ``"sglang:PATH"``: a checkout's ``python/`` folder (``PATH/sglang``, or
``PATH/python/sglang``), so a branch under review runs as it is; ``"sglang:FILE.py:CLASS"``: a
subclass (or replacement) of SGLang's ``RadixCache`` in FILE.py, run on the installed package.

No package ``__init__.py`` runs (``sglang/__init__.py``, ``sglang/srt/utils/__init__.py``...
pull in triton, orjson, zmq...): while a load runs, a meta-path finder answers every
``sglang.*`` import with a synthetic package whose ``__path__`` is the real folder, a module of
``REAL_MODULES`` executed from its source file, or a stub for ``STUBBED_MODULES`` (imported at
module level, never called on the paths radixbench drives) whose attributes raise
``SGLangStubError`` when called; any other ``sglang.*`` import raises ``ImportError``, so a
version needing more is reported, not half-loaded.

Isolation: a load runs with the ``sglang*`` entries of ``sys.modules`` set aside (put back
after); its own ``sglang.*`` modules are captured in ``LoadedSGLang.modules`` and removed, so the
installed package and a checkout coexist in one process as distinct module objects. Loads are
cached by spec. Limitation: an ``import`` run inside an SGLang method resolves against whatever
``sys.modules`` holds then. The methods ``SGLangCache`` drives (``__init__`` without metrics,
``reset``, ``match_prefix``, ``insert``, ``evict``, ``checkpoint``, ``inc_lock_ref``,
``dec_lock_ref``, ``lock``, ``unlock``, ``path_device_indices`` and their helpers) run none in
0.5.23 (asserted by the tests); wrap a user CLASS that does in ``LoadedSGLang.activate()``.

The same mechanism loads other SGLang modules for radixbench's own tools: a :class:`ModuleSet`
names the modules to execute, the ones to stub and the stubs' working attributes (the
:data:`RADIX_CACHE` set is the one above); :func:`load_modules` executes a set from a package
folder (:func:`installed_dir`) in isolation. ``radixbench bench alloc`` loads SGLang's KV
allocators this way (``radixbench.bench.alloc``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

#: SGLang releases (``X.Y.Z``; a checkout's ``X.Y.Z.devN+g...`` counts as ``X.Y.Z``) whose
#: ``RadixCache`` loads and runs under ``SGLangCache`` (verified by tests/cache/test_sglang_*).
SUPPORTED: frozenset[str] = frozenset({"0.5.23"})

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


@dataclass(frozen=True)
class ModuleSet:
    """What one load executes: ``real`` modules (from the package's own source files, in this
    order), ``stubbed`` modules (name -> who imports it and why it is not needed; an attribute
    that is called raises ``SGLangStubError``) and ``attributes``: stubbed module -> attributes
    that work (values set on the stub, e.g. a flag the imported code reads at import time). Any
    other ``sglang.*`` import fails."""

    real: tuple[str, ...]
    stubbed: Mapping[str, str]
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


#: SGLang's ``RadixCache`` and what it imports (:func:`load_sglang`).
RADIX_CACHE = ModuleSet(REAL_MODULES, STUBBED_MODULES)

_MODULES = ("radix_cache", "base_prefix_cache", "cache_init_params")
_VERSION_RE = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.M)


class SGLangLoadError(ValueError):
    """A spec cannot be loaded; the message is one line naming the spec or path."""


class SGLangStubError(RuntimeError):
    """Something SGLang imported but radixbench stubbed out was actually used."""


class _Stubbed:
    """An attribute of a stub module: attribute access chains, a call raises."""

    def __init__(self, qualname: str) -> None:
        self._qualname = qualname

    def __getattr__(self, name: str) -> _Stubbed:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stubbed(f"{self._qualname}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise SGLangStubError(
            f"{self._qualname} was called, but radixbench.cache.sglang_loader stubs it out "
            "(see STUBBED_MODULES): this SGLang code path is not supported"
        )

    def __repr__(self) -> str:
        return f"<radixbench stub {self._qualname}>"


class _StubModule(ModuleType):
    def __getattr__(self, name: str) -> _Stubbed:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stubbed(f"{self.__name__}.{name}")


class _Loader(importlib.abc.Loader):
    """Creates a stub module of ``modules`` (with its working attributes), or a synthetic
    package (no ``__init__.py`` runs; its ``__path__`` is the real folder, set by the finder's
    spec)."""

    def __init__(self, modules: ModuleSet) -> None:
        self.modules = modules

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        doc = self.modules.stubbed.get(spec.name)
        if doc is None:
            return None
        stub = _StubModule(spec.name, doc)
        for name, value in self.modules.attributes.get(spec.name, {}).items():
            setattr(stub, name, value)
        return stub

    def exec_module(self, module: ModuleType) -> None:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    """Answers every ``sglang.*`` import from ``pkg_dir`` with ``modules`` while a load runs."""

    def __init__(self, pkg_dir: Path, modules: ModuleSet = RADIX_CACHE) -> None:
        self.pkg_dir = pkg_dir
        self.modules = modules
        names = (*modules.real, *modules.stubbed)
        self.packages = {n.rsplit(".", k)[0] for n in names for k in range(1, n.count(".") + 1)}

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "sglang" and not fullname.startswith("sglang."):
            return None
        rel = Path(*fullname.split(".")[1:])
        if fullname in self.modules.stubbed:
            return importlib.machinery.ModuleSpec(fullname, _Loader(self.modules))
        if fullname in self.packages:
            spec = importlib.machinery.ModuleSpec(fullname, _Loader(self.modules), is_package=True)
            spec.submodule_search_locations = [str(self.pkg_dir / rel)]
            return spec
        if fullname in self.modules.real:
            return importlib.util.spec_from_file_location(fullname, self.pkg_dir / f"{rel}.py")
        raise ImportError(f"{fullname} is neither loaded nor stubbed by radixbench")


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

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Make this load's modules the ``sglang.*`` of ``sys.modules`` for the block (for code
        that imports at run time); restores the previous entries afterwards."""
        with _swapped(self.modules):
            yield


_LOADS: dict[str, LoadedSGLang] = {}


def _is_sglang(name: str) -> bool:
    return name == "sglang" or name.startswith("sglang.")


@contextlib.contextmanager
def _swapped(modules: dict[str, ModuleType]) -> Iterator[None]:
    saved = {k: sys.modules.pop(k) for k in [k for k in sys.modules if _is_sglang(k)]}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for k in [k for k in sys.modules if _is_sglang(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or "no message"
    return f"{type(e).__name__}: {text}"


def read_version(pkg_dir: Path) -> tuple[str | None, Path | None]:
    """The version of the sglang package folder ``pkg_dir`` (and the file it came from): the
    ``__version__`` literal of ``_version.py`` or ``version.py``, else the ``sglang`` dist-info
    beside the package; ``(None, None)`` when neither says. Reads only."""
    for name in ("_version.py", "version.py"):
        f = pkg_dir / name
        if f.is_file() and (m := _VERSION_RE.search(f.read_text(errors="replace"))):
            return m.group(1), f
    for dist in importlib.metadata.distributions(path=[str(pkg_dir.parent)]):
        if (dist.metadata["Name"] or "").lower() == "sglang":
            return dist.version, None
    return None, None


def load_modules(
    spec: str, pkg_dir: Path, modules: ModuleSet = RADIX_CACHE
) -> tuple[dict[str, ModuleType], dict[str, str]]:
    """Execute ``modules.real`` (in order) from the sglang package folder ``pkg_dir`` in
    isolation: ``sys.modules``'s ``sglang*`` entries are set aside and put back, no bytecode is
    written, every ``sglang.*`` import is answered by ``modules`` (module docstring). Returns
    the load's ``sglang.*`` modules by name (real, synthetic packages and stubs) and the sha256
    of every real module's file by its path relative to ``pkg_dir``'s parent. Raises
    ``SGLangLoadError`` (one line, starting ``"<spec>: "``) when a module fails to import."""
    finder = _Finder(pkg_dir, modules)
    dont_write = sys.dont_write_bytecode
    with _swapped({}):
        sys.meta_path.insert(0, finder)
        sys.dont_write_bytecode = True  # leave a checkout under review untouched
        try:
            for name in modules.real:
                importlib.import_module(name)
        except Exception as e:
            msg = f"{spec}: cannot import {name} from {pkg_dir}: {_one_line(e)}"
            raise SGLangLoadError(msg) from None
        finally:
            sys.meta_path.remove(finder)
            sys.dont_write_bytecode = dont_write
        loaded = {k: v for k, v in sys.modules.items() if _is_sglang(k)}
    files = {}
    for name in modules.real:
        path = Path(loaded[name].__file__ or "")
        files[str(path.relative_to(pkg_dir.parent))] = _sha256(path)
    return loaded, files


def installed_dir(spec: str = "sglang") -> Path:
    """The folder of the installed ``sglang`` package (found with ``importlib.util.find_spec``,
    which executes nothing). Raises ``SGLangLoadError`` (one line, starting ``"<spec>: "``) when
    it is not installed or cannot be looked up."""
    try:
        found = importlib.util.find_spec("sglang")
    except (ImportError, ValueError) as e:
        raise SGLangLoadError(f"{spec}: cannot find the sglang package: {_one_line(e)}") from None
    if found is None or not found.submodule_search_locations:
        raise SGLangLoadError(
            f"{spec}: sglang is not installed (pip install --no-deps 'sglang==0.5.23')"
        )
    return Path(next(iter(found.submodule_search_locations)))


def _checkout_dir(spec: str, path: str) -> Path:
    base = Path(path).expanduser().resolve()
    for pkg_dir in (base / "sglang", base / "python" / "sglang"):
        if (pkg_dir / "srt" / "mem_cache" / "radix_cache.py").is_file():
            return pkg_dir
    raise SGLangLoadError(
        f"{spec}: {base} holds no sglang/srt/mem_cache/radix_cache.py "
        "(PATH must be a checkout's python/ folder)"
    )


def _load_package(spec: str, pkg_dir: Path, label: str) -> LoadedSGLang:
    version, version_file = read_version(pkg_dir)
    if version is None:
        raise SGLangLoadError(f"{spec}: cannot determine the sglang version of {pkg_dir}")
    release = m.group() if (m := re.match(r"\d+\.\d+\.\d+", version)) else version
    if release not in SUPPORTED:
        raise SGLangLoadError(
            f"{spec}: sglang {version} at {pkg_dir} is not supported "
            f"(supported: {', '.join(sorted(SUPPORTED))})"
        )
    modules, files = load_modules(spec, pkg_dir)
    if version_file is not None:
        files[str(version_file.relative_to(pkg_dir.parent))] = _sha256(version_file)
    radix, bpc, cip = (modules[f"sglang.srt.mem_cache.{m}"] for m in _MODULES)
    return LoadedSGLang(
        spec, label, version, str(pkg_dir), radix, radix.RadixCache, bpc, cip, files, modules
    )


def _load_user(spec: str, file: str, class_name: str) -> LoadedSGLang:
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise SGLangLoadError(f"{spec}: no such file {path}")
    try:
        base = load_sglang("sglang")
    except SGLangLoadError as e:
        raise SGLangLoadError(f"{spec}: {e}") from None
    digest = _sha256(path)
    name = f"radixbench_sglang_user_{path.stem}_{digest[:12]}"
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
    file = class_name = ""
    pkg_dir = None
    if not sep:
        key = "sglang"
    elif ".py:" in rest or rest.endswith(".py"):
        file, _, class_name = rest.rpartition(":") if ".py:" in rest else (rest, "", "")
        if not class_name.isidentifier():
            raise SGLangLoadError(f"{spec}: give the class as sglang:FILE.py:CLASS")
        key = f"sglang:{Path(file).expanduser().resolve()}:{class_name}"
    else:
        pkg_dir = _checkout_dir(spec, rest)
        key = f"sglang:{pkg_dir}"
    if key in _LOADS:
        return _LOADS[key]
    if pkg_dir is not None:
        top = pkg_dir.parent.parent if pkg_dir.parent.name == "python" else pkg_dir.parent
        loaded = _load_package(spec, pkg_dir, f"sglang@{top.name}")
    elif class_name:
        loaded = _load_user(spec, file, class_name)
    else:
        loaded = _load_package(spec, installed_dir(spec), "sglang")
    _LOADS[key] = loaded
    return loaded
