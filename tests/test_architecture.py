"""The import rules of docs/ARCHITECTURE.md, read from the code with ``ast``.

Each source package may import only the packages below it; ``radixbench.cache.sglang``'s
modules are private to it (and to the cache package's own tests); no module imports itself back
through a cycle; no type is defined by two modules. Every rule fails naming the file, line and
import that breaks it.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from radixbench.bench.sources import SOURCE_PACKAGES

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = SOURCE_PACKAGES

#: package -> the project packages it may import (docs/ARCHITECTURE.md, "Layers").
ALLOWED: dict[str, frozenset[str]] = {
    "workloads": frozenset(),
    "cache": frozenset(),
    "reports": frozenset(),
    "sim": frozenset({"cache", "workloads"}),
    "cluster": frozenset({"sim", "cache", "workloads"}),
    "bench": frozenset({"cluster", "sim", "cache", "workloads", "reports"}),
    "harness": frozenset(PACKAGES) - {"harness"},
}

SGLANG = "radixbench.cache.sglang"

#: Files over 400 lines left for phase B of issue 32 (none since issue 31 split
#: harness/cli/scenario_args.py into sim_args.py and hicache_args.py).
OVER_400_UNTIL_PHASE_B: set[str] = set()


def test_the_document_states_these_rules() -> None:
    """docs/ARCHITECTURE.md's table of layers is :data:`ALLOWED`, row for row."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    stated: dict[str, frozenset[str]] = {}
    for row in text.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        names = {n.strip("` ") for n in cells[0].split(",")}
        if not names <= set(PACKAGES):
            continue
        allowed = frozenset(n.strip("` ") for n in cells[1].split(",") if n.strip().startswith("`"))
        if "all of them" in cells[1]:
            allowed = frozenset(PACKAGES) - names
        for name in names:
            stated[name] = allowed
    assert stated == ALLOWED


def test_the_source_packages_are_pyprojects() -> None:
    """:data:`SOURCE_PACKAGES` (read by ``bench peers``, ``profile`` and these rules) names
    exactly the top-level folders pyproject.toml installs as ``radixbench.*``."""
    import tomllib

    with (ROOT / "pyproject.toml").open("rb") as f:
        dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"].values()
    assert sorted(SOURCE_PACKAGES) == sorted({d.split("/")[0] for d in dirs})


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["radixbench", *parts])


def _imports(tree: ast.Module, path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import of a ``radixbench`` module in ``tree`` (relative
    imports resolved against ``path``'s module); ``from M import N`` gives ``M`` and ``M.N``."""
    here = _module(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _parsed(paths: list[Path]) -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in paths}


SOURCES = _parsed(_sources())


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "radixbench" else None


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_only_the_packages_below_it(package: str) -> None:
    bad = []
    for path, tree in SOURCES.items():
        if path.relative_to(ROOT).parts[0] != package:
            continue
        for line, module in _imports(tree, path):
            target = _package(module)
            if target and target != package and target not in ALLOWED[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, f"{package}/ may import only {sorted(ALLOWED[package])}:\n" + "\n".join(bad)


def _project_files() -> list[Path]:
    """Every Python file of the project (sources, scripts, examples, notebooks, tests) but the
    package of SGLang's caches and the cache package's own tests, which may use its modules."""
    skip = [ROOT / d for d in ("cache/sglang", "tests/cache", ".venv", "typecheck", "build")]
    return sorted(p for p in ROOT.rglob("*.py") if not any(p.is_relative_to(s) for s in skip))


def test_only_the_sglang_package_uses_its_private_modules() -> None:
    """Outside ``cache/sglang/`` (and the cache package's own tests, ``tests/cache/``), code
    imports ``radixbench.cache.sglang`` itself, never one of its modules."""
    bad = []
    for path in _project_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, module in _imports(tree, path):
            if _private_sglang(module):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "private modules of radixbench.cache.sglang imported:\n" + "\n".join(bad)


def _private_sglang(module: str) -> bool:
    """Whether importing ``module`` reaches into ``radixbench.cache.sglang``'s modules."""
    return module.startswith(SGLANG + ".") and module.split(".")[3] not in _public_names()


def test_the_readers_see_what_a_breach_imports() -> None:
    """The rules read imports as Python runs them: a private SGLang module or a harness module
    imported from a function body is seen, a public name is not a private module."""
    source = (
        "def f():\n"
        "    from radixbench.cache.sglang.served import ServedSGLangCache\n"
        "    from radixbench.cache.sglang import SGLangLoadError\n"
        "    import radixbench.harness.cli\n"
    )
    found = list(_imports(ast.parse(source), ROOT / "bench" / "x.py"))
    private = [m for _, m in found if _private_sglang(m)]
    assert private == [
        "radixbench.cache.sglang.served",
        "radixbench.cache.sglang.served.ServedSGLangCache",
    ]
    assert (4, "radixbench.harness.cli") in found
    assert _package("radixbench.harness.cli") not in ALLOWED["bench"]


def _public_names() -> set[str]:
    """The names ``radixbench.cache.sglang`` exports (``from radixbench.cache.sglang import X``
    is an import of ``radixbench.cache.sglang.X`` as read here)."""
    init = ROOT / "cache" / "sglang" / "__init__.py"
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError("cache/sglang/__init__.py has no __all__")


def _top_level_imports(tree: ast.Module, path: Path) -> Iterator[tuple[int, str]]:
    """The imports a module runs when it is imported: module level, outside ``if
    TYPE_CHECKING:`` (an import inside a function runs later, when it is called)."""
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom | ast.If | ast.Try):
            yield from _imports(ast.Module(body=[node], type_ignores=[]), path)


def test_no_module_imports_itself_back() -> None:
    """The modules imported when a module is imported form no cycle."""
    modules = {_module(p): p for p in SOURCES}
    graph: dict[str, set[str]] = defaultdict(set)
    for path, tree in SOURCES.items():
        here = _module(path)
        for _, module in _top_level_imports(tree, path):
            if module in modules and module != here:
                graph[here].add(module)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(modules)))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def _type_definitions(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Classes and type aliases (``X: TypeAlias = ...``, ``X = dict[...]`` / ``tuple[...]`` /
    ``Callable[...]`` / unions of those) defined at module level."""
    generic = {"dict", "list", "tuple", "set", "frozenset", "Callable", "Mapping", "Sequence"}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            yield node.lineno, node.name
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "TypeAlias" in ast.unparse(node.annotation):
                yield node.lineno, node.target.id
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if not isinstance(target, ast.Name) or not target.id[:1].isupper():
                continue
            heads = [n for n in ast.walk(value) if isinstance(n, ast.Subscript)]
            if (
                heads
                and isinstance(value, ast.Subscript | ast.BinOp)
                and all(ast.unparse(h.value).split(".")[-1] in generic for h in heads[:1])
            ):
                yield node.lineno, target.id


def test_no_type_is_defined_twice() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path, tree in SOURCES.items():
        for line, name in _type_definitions(tree):
            seen[name].append(f"{path.relative_to(ROOT)}:{line}")
    twice = {name: where for name, where in seen.items() if len(where) > 1}
    assert not twice, f"types defined in more than one module: {twice}"


def test_no_source_file_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in SOURCES
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert set(long) == OVER_400_UNTIL_PHASE_B, long
