"""The one SGLang loader (``finder`` rules, ``loader.load_modules``) on a fake
``sglang`` package made under ``tmp_path``: every rule of a ``ModuleSet``, the files hashed, the
isolation of ``sys.modules``, and a user file executed against a load. Needs no sglang."""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import pytest

from radixbench.cache.sglang.finder import ModuleSet, SGLangStubError, SourceFunctions
from radixbench.cache.sglang.loader import (
    SGLangLoadError,
    activated,
    exec_user_class,
    load_modules,
)

FILES = {
    "srt/top.py": """
        from sglang.srt.pkg import FROM_INIT
        from sglang.srt.under.deep import DEEP
        from sglang.srt.ext import EXT
        from sglang.srt.fns import twice
        from sglang.srt.stubbed import Base, thing

        class Sub(Base):
            pass

        VALUE = (FROM_INIT, DEEP, EXT, twice(21))
        """,
    "srt/pkg/__init__.py": "FROM_INIT = 'init ran'\n",
    "srt/under/deep.py": "DEEP = 'by prefix'\n",
    "srt/ext.py": "EXT = 'python found me'\n",
    "srt/fns.py": """
        import a_module_that_is_not_installed

        def twice(x):
            return add(x, x)

        def add(x, y):
            return FACTOR * (x + y)
        """,
    "srt/opt.py": "raise RuntimeError('no extension here')\n",
    "srt/needs_more.py": "import sglang.srt.elsewhere\n",
}

SET = ModuleSet(
    real=("sglang.srt.top",),
    stubbed={"sglang.srt.stubbed": "top: Base, thing", "sglang.srt.fns": "top: twice"},
    attributes={"sglang.srt.stubbed": {"FLAG": True}},
    functions={"sglang.srt.fns": SourceFunctions("srt/fns.py", ("twice", "add"), {"FACTOR": 1})},
    real_prefixes=("sglang.srt.under.", "sglang.srt.opt"),
    run_init=("sglang.srt.pkg",),
    passthrough=("sglang.srt.ext",),
    folder_packages=True,
    optional=("sglang.srt.opt",),
)


@pytest.fixture
def pkg(tmp_path: Path) -> Path:
    root = tmp_path / "sglang"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sglang_entries() -> dict[str, object]:
    return {k: v for k, v in sys.modules.items() if k.split(".")[0] == "sglang"}


def test_every_rule_of_a_module_set(pkg: Path) -> None:
    before = sglang_entries()
    loaded = load_modules("fake", pkg, SET)
    assert sglang_entries() == before  # isolated: nothing added, nothing lost
    mods = loaded.modules
    assert mods["sglang.srt.top"].VALUE == ("init ran", "by prefix", "python found me", 42)
    assert mods["sglang.srt"].__path__ == [str(pkg / "srt")]  # a synthetic package
    stub = mods["sglang.srt.stubbed"]
    assert stub.FLAG is True and stub.__doc__ == "top: Base, thing"
    with pytest.raises(SGLangStubError, match=r"sglang\.srt\.stubbed\.thing.*top: Base, thing"):
        stub.thing()
    with pytest.raises(SGLangStubError, match="stand-in"):
        mods["sglang.srt.top"].Sub()  # a stub as a base class: instances cannot be built
    assert loaded.failed == {"sglang.srt.opt": "RuntimeError: no extension here"}
    order = ["srt/top.py", "srt/pkg/__init__.py", "srt/under/deep.py", "srt/fns.py", "srt/ext.py"]
    assert loaded.files == {f"sglang/{rel}": sha(pkg / rel) for rel in order}


def test_an_undeclared_import_fails_with_one_line(pkg: Path) -> None:
    bad = ModuleSet(real=("sglang.srt.needs_more",), stubbed={})
    with pytest.raises(SGLangLoadError) as info:
        load_modules("fake", pkg, bad)
    msg = str(info.value)
    assert msg.startswith(f"fake: cannot import sglang.srt.needs_more from {pkg}: ")
    assert "sglang.srt.elsewhere is neither loaded nor stubbed by radixbench" in msg
    assert "\n" not in msg


def test_declared_parents_only_without_folder_packages(pkg: Path) -> None:
    """Without ``folder_packages`` a folder is a package only as a parent of a declared
    module: ``sglang.srt.under`` is not one here, so its module cannot be imported."""
    narrow = ModuleSet(real=("sglang.srt.under.deep",), stubbed={})
    assert load_modules("fake", pkg, narrow).modules["sglang.srt.under.deep"].DEEP == "by prefix"
    other = ModuleSet(real=("sglang.srt.ext",), stubbed={}, real_prefixes=("sglang.srt.under.",))
    with pytest.raises(SGLangLoadError, match="neither loaded nor stubbed"):
        import_from_user_file(pkg, other, "sglang.srt.under.deep")


def import_from_user_file(pkg: Path, modules: ModuleSet, name: str) -> None:
    user = pkg.parent / "user_import.py"
    user.write_text(f"import {name}\nclass C:\n    pass\n")
    loaded = load_modules("fake", pkg, modules)
    exec_user_class("fake", user, "C", pkg, modules, loaded.modules)


def test_a_user_file_runs_against_a_load(pkg: Path) -> None:
    loaded = load_modules("fake", pkg, SET)
    user = pkg.parent / "mine.py"
    user.write_text("from sglang.srt.top import Sub\n\nclass Mine(Sub):\n    pass\n")
    cls, module, digest = exec_user_class("fake", user, "Mine", pkg, SET, loaded.modules, "_x")
    assert digest == sha(user) and module.__name__ == f"radixbench_sglang_user_mine_{digest[:12]}_x"
    assert sys.modules.pop(module.__name__) is module  # stays for pickling; removed here
    assert cls.__mro__[1] is loaded.modules["sglang.srt.top"].Sub
    with activated(loaded.modules):
        assert sys.modules["sglang.srt.top"] is loaded.modules["sglang.srt.top"]
    assert "sglang.srt.top" not in sys.modules
    with pytest.raises(SGLangLoadError, match="defines no class Absent"):
        exec_user_class("fake", user, "Absent", pkg, SET, loaded.modules)
