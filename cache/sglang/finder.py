"""How each ``sglang.*`` import is answered while radixbench loads SGLang's own source files.

A :class:`ModuleSet` declares which ``sglang.*`` modules a load executes from the package's
files and which it replaces by stubs, and how; :class:`SGLangFinder`, put first on
``sys.meta_path`` by :func:`radixbench.cache.sglang.loader.load_modules` while a load runs,
answers every ``sglang.*`` import by those rules, in this order:

1. a ``passthrough`` module (a compiled extension): left to Python's own finders, which load it
   from the package folder (the synthetic parent package's ``__path__``);
2. a ``run_init`` package: its own ``__init__.py`` runs;
3. a ``stubbed`` module: a stub (:class:`SGLangStubError` when one of its attributes is called;
   ``attributes`` set on it work; ``functions`` compiled alone from a source file work too; used
   as a base class, an attribute gives a class that raises when instantiated). A stub is a
   package (with the real folder as ``__path__``) when it is a parent of a declared module or,
   with ``folder_packages``, a folder of the package;
4. a synthetic package (no ``__init__.py`` runs; ``__path__`` is the real folder): a parent of a
   declared module, or with ``folder_packages`` any folder of the package;
5. a module executed from its own source file: named in ``real`` (exactly), or whose source file
   exists and whose name is a ``real_prefixes`` entry (without its trailing ``.``) or starts with
   one;
6. anything else raises ``ImportError`` ("... is neither loaded nor stubbed by radixbench"), so a
   version that needs more is reported, not half-loaded.

No SGLang code is copied into radixbench: what runs is the package's own files.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any


class SGLangStubError(RuntimeError):
    """Something SGLang imported but radixbench stubbed out was actually used."""


@dataclass(frozen=True)
class SourceFunctions:
    """Top-level functions of one SGLang source file, compiled alone into a stub (no other
    statement of the file runs: its module-level imports need SGLang's serving dependencies).
    ``file``: the source, relative to the package folder (``"srt/utils/common.py"``); ``names``:
    the functions, which may call each other; ``globals``: what they read of their module
    besides each other (e.g. ``{"array": array.array}``)."""

    file: str
    names: tuple[str, ...]
    globals: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModuleSet:
    """What one load executes and stubs (the finder's rules: module docstring).

    ``real``: modules executed from their source files, imported in this order by
    :func:`~radixbench.cache.sglang.loader.load_modules`; ``stubbed``: stubbed module -> who
    imports it and why it is not needed (the stub's docstring); ``attributes``: stubbed module
    -> attributes that work (values set on the stub, e.g. a flag the imported code reads at
    import time); ``functions``: stubbed module -> SGLang functions compiled into it
    (:class:`SourceFunctions`); ``real_prefixes``: any module under these prefixes
    (``"sglang.srt.mem_cache."``; an entry without the trailing dot names one module) is
    executed from its source file when something imports it; ``run_init``: packages whose
    ``__init__.py`` runs; ``passthrough``: modules Python's own finders load (a compiled
    extension); ``folder_packages``: every folder of the package is a synthetic package
    (otherwise only the parents of the declared modules are); ``optional``: imported after
    ``real`` (by the rules above: under ``real_prefixes``), a failure is recorded
    (``LoadedModules.failed``) instead of raised. A set is only data: the finder reads it."""

    real: tuple[str, ...]
    stubbed: Mapping[str, str]
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    functions: Mapping[str, SourceFunctions] = field(default_factory=dict)
    real_prefixes: tuple[str, ...] = ()
    run_init: tuple[str, ...] = ()
    passthrough: tuple[str, ...] = ()
    folder_packages: bool = False
    optional: tuple[str, ...] = ()

    def declared(self) -> tuple[str, ...]:
        """Every module named by the set (real, optional, stubbed, run_init, passthrough)."""
        return (*self.real, *self.optional, *self.stubbed, *self.run_init, *self.passthrough)

    def executes(self, fullname: str, source: Path) -> bool:
        """Whether ``fullname`` (whose source file would be ``source``) is executed from source:
        named in ``real``, or matching ``real_prefixes`` with its file present."""
        if fullname in self.real:
            return True
        return source.is_file() and any(
            fullname == p.rstrip(".") or fullname.startswith(p) for p in self.real_prefixes
        )


def is_sglang(name: str) -> bool:
    """Whether module ``name`` is ``sglang`` or one of its submodules."""
    return name == "sglang" or name.startswith("sglang.")


class _StubInstanceBase:
    """Base of the classes a stub gives when subclassed: instantiating raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise SGLangStubError(f"{type(self).__qualname__} (a radixbench stand-in) was built")


class _Stubbed:
    """An attribute of stub module ``module`` (stubbed because ``why``): attribute access
    chains, a call raises, and as a base class it gives a class whose instances cannot be
    built."""

    def __init__(self, qualname: str, module: str, why: str) -> None:
        self._qualname, self._module, self._why = qualname, module, why

    def __getattr__(self, name: str) -> _Stubbed:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stubbed(f"{self._qualname}.{name}", self._module, self._why)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise SGLangStubError(
            f"{self._qualname} was called, but radixbench stubs {self._module} out "
            f"({self._why}): this SGLang code path is not supported"
        )

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        module, _, name = self._qualname.rpartition(".")
        return (type(name, (_StubInstanceBase,), {"__module__": module}),)

    def __repr__(self) -> str:
        return f"<radixbench stub {self._qualname}>"


class _StubModule(ModuleType):
    """A stubbed module; its docstring says who imports it and why it is not needed."""

    def __getattr__(self, name: str) -> _Stubbed:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stubbed(f"{self.__name__}.{name}", self.__name__, self.__doc__ or "")


def _compile_functions(pkg_dir: Path, source: SourceFunctions) -> dict[str, Any]:
    """``source.names`` of ``pkg_dir / source.file``, compiled alone into one namespace holding
    ``source.globals``. Raises ``ImportError`` when the file defines one of them nowhere at top
    level."""
    path = pkg_dir / source.file
    tree = ast.parse(path.read_text(), filename=str(path))
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in source.names]
    missing = set(source.names) - {f.name for f in fns}
    if missing:
        raise ImportError(f"{path} defines no {', '.join(sorted(missing))}")
    namespace: dict[str, Any] = dict(source.globals)
    exec(compile(ast.Module(body=list(fns), type_ignores=[]), str(path), "exec"), namespace)
    return {name: namespace[name] for name in source.names}


class _Loader(importlib.abc.Loader):
    """Creates the stubs of ``modules`` (with their working attributes and functions) and the
    synthetic packages (default modules; their ``__path__`` comes from the finder's spec)."""

    def __init__(self, pkg_dir: Path, modules: ModuleSet) -> None:
        self.pkg_dir = pkg_dir
        self.modules = modules

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        doc = self.modules.stubbed.get(spec.name)
        if doc is None:
            return None
        stub = _StubModule(spec.name, doc)
        source = self.modules.functions.get(spec.name)
        if source is not None:
            stub.__dict__.update(_compile_functions(self.pkg_dir, source))
        for name, value in self.modules.attributes.get(spec.name, {}).items():
            setattr(stub, name, value)
        return stub

    def exec_module(self, module: ModuleType) -> None:
        pass


class SGLangFinder(importlib.abc.MetaPathFinder):
    """Answers every ``sglang.*`` import from the package folder ``pkg_dir`` by the rules of
    ``modules`` (module docstring). ``executed``: the modules it gave a source file to execute
    (``run_init`` packages included), in the order asked; one whose execution then failed stays
    listed (it is not in ``sys.modules``)."""

    def __init__(self, pkg_dir: Path, modules: ModuleSet) -> None:
        self.pkg_dir = pkg_dir
        self.modules = modules
        self.loader = _Loader(pkg_dir, modules)
        names = modules.declared()
        self.parents = {n.rsplit(".", k)[0] for n in names for k in range(1, n.count(".") + 1)}
        self.executed: list[str] = []

    def _package(self, fullname: str, folder: Path) -> bool:
        if fullname in self.parents:
            return True
        return self.modules.folder_packages and folder.is_dir()

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not is_sglang(fullname) or fullname in self.modules.passthrough:
            return None
        rel = Path(*fullname.split(".")[1:])
        folder = self.pkg_dir / rel
        if fullname in self.modules.run_init:
            self.executed.append(fullname)
            return importlib.util.spec_from_file_location(
                fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
            )
        package = self._package(fullname, folder)
        if fullname in self.modules.stubbed or package:
            spec = importlib.machinery.ModuleSpec(fullname, self.loader, is_package=package)
            if package:
                spec.submodule_search_locations = [str(folder)]
            return spec
        source = self.pkg_dir / f"{rel}.py"
        if self.modules.executes(fullname, source):
            self.executed.append(fullname)
            return importlib.util.spec_from_file_location(fullname, source)
        raise ImportError(f"{fullname} is neither loaded nor stubbed by radixbench")
