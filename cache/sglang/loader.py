"""The one SGLang loader: runs SGLang's own source files without its GPU-serving dependencies.

:func:`load_modules` imports a :class:`~radixbench.cache.sglang.finder.ModuleSet` (what to
execute, what to stub: the finder's rules are in :mod:`radixbench.cache.sglang.finder`) from a
package folder, the installed one or a checkout's; no SGLang code is copied into radixbench.
:func:`exec_user_class` runs a user's file (a subclass under review) against a load.
:class:`Loaded` is the one record of a loaded cache, whichever class it runs.

Isolation: a load runs with the ``sglang*`` entries of ``sys.modules`` set aside (put back
after, :func:`activated`); its own ``sglang.*`` modules are captured in the result and removed,
so several loads (the installed package, a checkout) coexist in one process as distinct module
objects. No bytecode is written (a checkout under review stays untouched). Limitation: an
``import`` run later inside an SGLang function resolves against whatever ``sys.modules`` holds
then; run such code inside ``activated(loaded.modules)``.

The sets: ``RADIX_CACHE`` (:mod:`radixbench.cache.sglang.legacy_load`, the classic
``RadixCache``), ``UNIFIED_RADIX_CACHE`` (:mod:`radixbench.cache.sglang.unified_load`, the served
``UnifiedRadixCache`` and its tree cores) and ``ALLOCATOR_MODULES``
(:mod:`radixbench.cache.sglang.allocators`, SGLang's KV allocators). Where a load's package is
and which version it is: :mod:`radixbench.cache.sglang.package`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from radixbench.cache.sglang.finder import ModuleSet, SGLangFinder, is_sglang


class SGLangLoadError(ValueError):
    """SGLang code cannot be loaded; the message is one line naming the spec or path."""


@dataclass(frozen=True)
class LoadedModules:
    """What :func:`load_modules` loaded. ``modules``: the load's ``sglang.*`` modules by name
    (executed, synthetic, stubs, pass-through); ``files``: sha256 (hex) of every file executed
    (in import order), then of every source of ``functions`` compiled into a stub and of every
    pass-through module loaded, by path relative to the package folder's parent
    (``sglang/srt/...``; absolute for a file outside it, e.g. an extension SGLang's loader took
    from its cache); ``failed``: optional module -> why it did not import (one line)."""

    modules: dict[str, ModuleType]
    files: dict[str, str]
    failed: dict[str, str]


@dataclass(frozen=True, eq=False)
class Loaded:
    """One loaded SGLang cache: ``spec`` / ``label`` (its name in messages and reports),
    ``version``, ``origin`` (the package folder), ``cache_class`` (``RadixCache``,
    ``UnifiedRadixCache`` or a user's class); ``m``: the load's modules by short name (both
    loads: ``radix`` = ``radix_cache``, ``bpc`` = ``base_prefix_cache``, ``cip`` =
    ``cache_init_params``; the served cache's also ``urc``, ``ct``, ``cbase``, ``utc``,
    ``registry``, ``environ``); ``files``: sha256 (hex) of every file executed or loaded, by
    path relative to the package's parent folder (a user's FILE.py by its absolute path);
    ``modules``: all its ``sglang.*`` modules (real, synthetic, stubs); ``core``: the tree core
    every cache of the load is built with (``rust`` / ``python``; ``""`` for the classic
    ``RadixCache``, which has none) and ``core_reason`` (why); ``user_module``: FILE.py's
    module."""

    spec: str
    label: str
    version: str
    origin: str
    cache_class: type
    m: dict[str, ModuleType]
    files: dict[str, str]
    modules: dict[str, ModuleType]
    core: str = ""
    core_reason: str = ""
    user_module: ModuleType | None = None

    def activate(self) -> contextlib.AbstractContextManager[None]:
        """A context manager: this load's modules are the ``sglang.*`` of ``sys.modules`` for
        the block (for code that imports at run time, e.g. tree-core construction); the
        previous entries are put back afterwards."""
        return activated(self.modules)

    def with_class(
        self, spec: str, label: str, cls: type, module: ModuleType | None = None, digest: str = ""
    ) -> Loaded:
        """This load named ``spec`` / ``label`` and running ``cls`` (a user's class from
        ``module``, whose sha256 ``digest`` joins ``files``)."""
        files = dict(self.files)
        if module is not None:
            files[str(Path(module.__file__ or ""))] = digest
        return replace(
            self, spec=spec, label=label, cache_class=cls, files=files, user_module=module
        )


def sha256_file(path: Path) -> str:
    """The sha256 (hex) of ``path``'s bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line(e: BaseException) -> str:
    """``"<ExceptionType>: <message on one line>"``."""
    text = " ".join(str(e).split()) or "no message"
    return f"{type(e).__name__}: {text}"


@contextlib.contextmanager
def activated(modules: Mapping[str, ModuleType]) -> Iterator[None]:
    """For the block, ``modules`` are the ``sglang*`` entries of ``sys.modules`` (the others
    are set aside); afterwards every ``sglang*`` entry is removed (those added in the block
    too) and the ones set aside are put back. ``modules`` itself is not changed."""
    saved = {k: sys.modules.pop(k) for k in [k for k in sys.modules if is_sglang(k)]}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for k in [k for k in sys.modules if is_sglang(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


def _files(
    pkg_dir: Path, modules: ModuleSet, loaded: dict[str, ModuleType], executed: list[str]
) -> dict[str, str]:
    """``LoadedModules.files``; a module whose import failed (an optional one) is not in
    ``loaded`` and not hashed."""
    paths = [Path(loaded[n].__file__ or "") for n in executed if n in loaded]
    paths += [pkg_dir / f.file for n, f in modules.functions.items() if n in loaded]
    passthrough = [getattr(loaded.get(n), "__file__", None) for n in modules.passthrough]
    paths += [Path(f) for f in passthrough if f]
    top = pkg_dir.parent
    return {str(p.relative_to(top) if p.is_relative_to(top) else p): sha256_file(p) for p in paths}


def load_modules(spec: str, pkg_dir: Path, modules: ModuleSet) -> LoadedModules:
    """Import ``modules.real`` (in order), then ``modules.optional``, from the sglang package
    folder ``pkg_dir`` in isolation: ``sys.modules``'s ``sglang*`` entries are set aside and put
    back, no bytecode is written, every ``sglang.*`` import is answered by ``modules`` (the
    rules of :mod:`radixbench.cache.sglang.finder`). Mutates ``sys.modules``,
    ``sys.meta_path`` and ``sys.dont_write_bytecode`` only while it runs. Raises
    ``SGLangLoadError`` (one line: ``"<spec>: cannot import NAME from PKG_DIR: <error>"``) when
    a ``real`` module fails to import; an ``optional`` one's failure goes to ``failed``."""
    finder = SGLangFinder(pkg_dir, modules)
    failed: dict[str, str] = {}
    dont_write = sys.dont_write_bytecode
    with activated({}):
        sys.meta_path.insert(0, finder)
        sys.dont_write_bytecode = True  # leave a checkout under review untouched
        try:
            for name in modules.real:
                importlib.import_module(name)
            for optional in modules.optional:
                try:
                    importlib.import_module(optional)
                except Exception as e:  # e.g. a compiled extension that does not load
                    failed[optional] = one_line(e)
        except Exception as e:
            msg = f"{spec}: cannot import {name} from {pkg_dir}: {one_line(e)}"
            raise SGLangLoadError(msg) from None
        finally:
            sys.meta_path.remove(finder)
            sys.dont_write_bytecode = dont_write
        loaded = {k: v for k, v in sys.modules.items() if is_sglang(k)}
    return LoadedModules(loaded, _files(pkg_dir, modules, loaded, finder.executed), failed)


def user_file(spec: str, file: str) -> Path:
    """The user's ``file`` (``~`` expanded, resolved). Raises ``SGLangLoadError`` (``"<spec>: no
    such file <path>"``) when it is not a file."""
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise SGLangLoadError(f"{spec}: no such file {path}")
    return path


def exec_user_class(
    spec: str,
    path: Path,
    class_name: str,
    pkg_dir: Path,
    modules: ModuleSet,
    active: Mapping[str, ModuleType],
    suffix: str = "",
) -> tuple[type, ModuleType, str]:
    """Execute the user's file ``path`` against a load; returns its class ``class_name``, the
    module and the file's sha256. The module is ``radixbench_sglang_user_<stem>_<sha256[:12]>``
    + ``suffix``; while it runs, ``active`` (the load's modules) are the ``sglang*`` entries of
    ``sys.modules`` and the finder of ``modules`` (from ``pkg_dir``) answers what else it
    imports. The module stays in ``sys.modules`` (dataclasses and pickling look classes up
    there); nothing else of ``sys.modules`` changes. Raises ``SGLangLoadError`` (one line naming
    ``spec``): ``"cannot import <path>: <error>"`` (the module then removed) or ``"<path>
    defines no class <class_name>"``."""
    digest = sha256_file(path)
    name = f"radixbench_sglang_user_{path.stem}_{digest[:12]}{suffix}"
    finder = SGLangFinder(pkg_dir, modules)
    try:
        module_spec = importlib.util.spec_from_file_location(name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        with activated(active):
            sys.meta_path.insert(0, finder)
            try:
                module_spec.loader.exec_module(module)
            finally:
                sys.meta_path.remove(finder)
    except Exception as e:
        sys.modules.pop(name, None)
        raise SGLangLoadError(f"{spec}: cannot import {path}: {one_line(e)}") from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise SGLangLoadError(f"{spec}: {path} defines no class {class_name}")
    return cls, module, digest
