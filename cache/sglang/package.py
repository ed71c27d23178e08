"""Which sglang package a load runs (the installed one or a checkout's) and its version.

:func:`package_dir` finds the package folder and names it; :func:`load_package` checks its
version against :data:`SUPPORTED` and loads a :class:`~radixbench.cache.sglang.finder.ModuleSet`
from it with :func:`~radixbench.cache.sglang.loader.load_modules`. The loads:
:mod:`radixbench.cache.sglang.legacy_load` (the classic ``RadixCache``) and
:mod:`radixbench.cache.sglang.unified_load` (the served ``UnifiedRadixCache``). Locating a package
and reading its version execute nothing of SGLang.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

from radixbench.cache.sglang.finder import ModuleSet
from radixbench.cache.sglang.loader import (
    LoadedModules,
    SGLangLoadError,
    load_modules,
    one_line,
    sha256_file,
)

#: SGLang releases (``X.Y.Z``; a checkout's ``X.Y.Z.devN+g...`` counts as ``X.Y.Z``) whose
#: caches load and run under radixbench's adapters (verified by tests/cache/sglang/).
SUPPORTED: frozenset[str] = frozenset({"0.5.23"})

_VERSION_RE = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.M)


def installed_dir(spec: str = "sglang") -> Path:
    """The folder of the installed ``sglang`` package (found with ``importlib.util.find_spec``,
    which executes nothing). Raises ``SGLangLoadError`` (one line, starting ``"<spec>: "``) when
    it is not installed or cannot be looked up."""
    try:
        found = importlib.util.find_spec("sglang")
    except (ImportError, ValueError) as e:
        raise SGLangLoadError(f"{spec}: cannot find the sglang package: {one_line(e)}") from None
    if found is None or not found.submodule_search_locations:
        raise SGLangLoadError(
            f"{spec}: sglang is not installed (pip install --no-deps 'sglang==0.5.23')"
        )
    return Path(next(iter(found.submodule_search_locations)))


def checkout_dir(spec: str, path: str) -> Path:
    """The sglang package folder of the checkout at ``path`` (``PATH/sglang`` or
    ``PATH/python/sglang``, the first holding ``srt/mem_cache/radix_cache.py``). Raises
    ``SGLangLoadError`` (one line naming ``spec``) when neither does."""
    base = Path(path).expanduser().resolve()
    for pkg_dir in (base / "sglang", base / "python" / "sglang"):
        if (pkg_dir / "srt" / "mem_cache" / "radix_cache.py").is_file():
            return pkg_dir
    raise SGLangLoadError(
        f"{spec}: {base} holds no sglang/srt/mem_cache/radix_cache.py "
        "(PATH must be a checkout's python/ folder)"
    )


def package_dir(spec: str, path: str | None) -> tuple[Path, str]:
    """``(package folder, label)``: the installed package's folder and ``"sglang"`` when
    ``path`` is None (:func:`installed_dir`), else the checkout's (:func:`checkout_dir`) and
    ``"sglang@<checkout folder>"`` (the folder above ``python/sglang``, or above ``sglang``).
    Raises ``SGLangLoadError`` as those do."""
    if path is None:
        return installed_dir(spec), "sglang"
    pkg_dir = checkout_dir(spec, path)
    top = pkg_dir.parent.parent if pkg_dir.parent.name == "python" else pkg_dir.parent
    return pkg_dir, f"sglang@{top.name}"


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


def load_package(
    spec: str, pkg_dir: Path, modules: ModuleSet, needs: str | None = None
) -> tuple[str, LoadedModules]:
    """``(version, load)``: the version of ``pkg_dir`` (:func:`read_version`), checked against
    :data:`SUPPORTED`; that the folder holds the file ``needs`` (relative to it); then
    ``load_modules(spec, pkg_dir, modules)``, whose ``files`` get the version file's sha256
    last. Raises ``SGLangLoadError`` (one line naming ``spec``), in this order, when the
    version is unknown, its release is not supported, ``needs`` is missing (``"<pkg_dir> has no
    <needs>"``) or a module fails to import."""
    version, version_file = read_version(pkg_dir)
    if version is None:
        raise SGLangLoadError(f"{spec}: cannot determine the sglang version of {pkg_dir}")
    release = m.group() if (m := re.match(r"\d+\.\d+\.\d+", version)) else version
    if release not in SUPPORTED:
        raise SGLangLoadError(
            f"{spec}: sglang {version} at {pkg_dir} is not supported "
            f"(supported: {', '.join(sorted(SUPPORTED))})"
        )
    if needs is not None and not (pkg_dir / needs).is_file():
        raise SGLangLoadError(f"{spec}: {pkg_dir} has no {needs}")
    loaded = load_modules(spec, pkg_dir, modules)
    if version_file is not None:
        loaded.files[str(version_file.relative_to(pkg_dir.parent))] = sha256_file(version_file)
    return version, loaded
