"""``radixbench.cache.sglang.legacy_load``: loading sglang 0.5.23's real ``RadixCache``.

Skipped (with the reason shown by ``-ra``) when the ``sglang`` package is not installed; ``make
install`` installs ``sglang==0.5.23`` without its dependencies. Fake checkouts are copies of the
installed package's loaded files, made under ``tmp_path`` only.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip(
        "sglang is not installed (make install: pip install --no-deps 'sglang==0.5.23'); "
        "SGLang fidelity tests skipped",
        allow_module_level=True,
    )

from radixbench.cache import CacheConfig, RadixKey, ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.sglang.finder import SGLangStubError
from radixbench.cache.sglang.legacy import SGLangCache
from radixbench.cache.sglang.legacy_load import REAL_MODULES, load_sglang
from radixbench.cache.sglang.loader import SGLangLoadError
from radixbench.cache.sglang.package import SUPPORTED


def make_checkout(root: Path, version: str | None = None) -> Path:
    """Copy the installed package's loaded files to ``root/python/sglang``; returns
    ``root/python``. ``version`` rewrites ``_version.py``."""
    installed = Path(load_sglang("sglang").origin)
    pkg = root / "python" / "sglang"
    for rel in [
        "_version.py",
        *(f"{m.split('.', 1)[1].replace('.', '/')}.py" for m in REAL_MODULES),
    ]:
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(installed / rel, pkg / rel)
    if version is not None:
        (pkg / "_version.py").write_text(f"__version__ = version = {version!r}\n")
    return root / "python"


def sglang_in_sys_modules() -> list[str]:
    return [k for k in sys.modules if k == "sglang" or k.startswith("sglang.")]


def one_op(loaded) -> int:
    alloc = TokenToKVPoolAllocator(32)
    cache = SGLangCache(ReqToTokenPool(2, 32), alloc, CacheConfig(), loaded)
    v = alloc.alloc(4)
    assert v is not None
    cache.insert(RadixKey([1, 2, 3, 4]), v)
    return cache.match_prefix(RadixKey([1, 2, 3, 9])).prefix_len


def test_load_installed() -> None:
    loaded = load_sglang("sglang")
    assert loaded.version == "0.5.23" and loaded.version in SUPPORTED
    assert loaded.label == "sglang" and loaded.spec == "sglang"
    assert loaded.m["radix"].__name__ == "sglang.srt.mem_cache.radix_cache"
    assert loaded.cache_class is loaded.m["radix"].RadixCache
    assert hasattr(loaded.m["bpc"], "InsertParams")
    assert hasattr(loaded.m["cip"], "CacheInitParams")
    origin = Path(loaded.origin)
    for rel in (
        "sglang/srt/mem_cache/radix_cache.py",
        "sglang/srt/mem_cache/base_prefix_cache.py",
        "sglang/srt/mem_cache/evict_policy.py",
    ):
        assert loaded.files[rel] == hashlib.sha256((origin.parent / rel).read_bytes()).hexdigest()
    assert load_sglang("sglang") is loaded  # cached
    assert sglang_in_sys_modules() == []  # isolated: nothing left behind
    assert one_op(loaded) == 3


def test_stubs_raise_when_called() -> None:
    loaded = load_sglang("sglang")
    common = loaded.modules["sglang.srt.utils.common"]
    with pytest.raises(SGLangStubError, match="ceil_align"):
        common.ceil_align(3, 2)
    with pytest.raises(SGLangStubError, match="envs"):
        loaded.modules["sglang.srt.environ"].envs.SGLANG_X.get()


def test_driven_methods_do_no_runtime_imports() -> None:
    """The methods SGLangCache drives resolve no import at run time (see the loader)."""
    loaded = load_sglang("sglang")
    rc, base = loaded.m["radix"].RadixCache, loaded.m["bpc"].BasePrefixCache
    methods = [
        getattr(rc, name)
        for name in (
            "__init__", "reset", "match_prefix", "_match_prefix_helper", "insert",
            "_insert_helper", "_split_node", "_insert_cache", "checkpoint", "evict",
            "_delete_leaf", "_update_leaf_status", "inc_lock_ref", "dec_lock_ref",
            "path_device_indices", "evictable_size", "protected_size",
        )
    ]  # fmt: skip
    methods += [
        base.lock,
        base.unlock,
        base.update_eviction_metrics,
        loaded.m["radix"].TreeNode.__init__,
    ]
    for fn in methods:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        assert not imports, fn.__qualname__


def test_checkout_side_by_side(tmp_path: Path) -> None:
    installed = load_sglang("sglang")
    path = make_checkout(tmp_path / "review-branch")
    spec = f"sglang:{path}"
    checkout = load_sglang(spec)
    assert checkout.label == "sglang@review-branch"
    assert checkout.version == "0.5.23"
    assert Path(checkout.origin) == path / "sglang"
    assert checkout.m["radix"] is not installed.m["radix"]
    assert checkout.cache_class is not installed.cache_class
    assert checkout.m["radix"].TreeNode is not installed.m["radix"].TreeNode
    assert checkout.files == installed.files  # same bytes, same relative paths
    assert sglang_in_sys_modules() == []
    assert one_op(checkout) == 3 and one_op(installed) == 3
    # The repository root (holding python/) is accepted too.
    assert load_sglang(f"sglang:{tmp_path / 'review-branch'}").origin == checkout.origin


def test_user_subclass(tmp_path: Path) -> None:
    file = tmp_path / "my_cache.py"
    file.write_text(
        "from sglang.srt.mem_cache.radix_cache import RadixCache\n\n"
        "class MyCache(RadixCache):\n"
        "    evictions = 0\n\n"
        "    def evict(self, params):\n"
        "        type(self).evictions += 1\n"
        "        return super().evict(params)\n"
    )
    loaded = load_sglang(f"sglang:{file}:MyCache")
    base = load_sglang("sglang")
    assert loaded.label == "sglang:MyCache"
    assert issubclass(loaded.cache_class, base.cache_class)
    assert loaded.files[str(file)] == hashlib.sha256(file.read_bytes()).hexdigest()
    assert (
        loaded.files["sglang/srt/mem_cache/radix_cache.py"]
        == base.files["sglang/srt/mem_cache/radix_cache.py"]
    )
    assert sglang_in_sys_modules() == []
    alloc = TokenToKVPoolAllocator(16)
    cache = SGLangCache(None, alloc, CacheConfig(), loaded)
    v = alloc.alloc(3)
    assert v is not None
    cache.insert(RadixKey([1, 2, 3]), v)
    assert cache.evict(3).num_evicted == 3
    assert loaded.cache_class.evictions == 1
    assert cache.info().cls.endswith(".MyCache")


def _error(spec: str) -> str:
    with pytest.raises(SGLangLoadError) as info:
        load_sglang(spec)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_errors_are_one_line(tmp_path: Path) -> None:
    old = make_checkout(tmp_path / "old", version="0.4.0")
    msg = _error(f"sglang:{old}")
    assert "0.4.0" in msg and "not supported" in msg and str(old) in msg

    missing = tmp_path / "nowhere"
    assert str(missing) in _error(f"sglang:{missing}")

    file = tmp_path / "user.py"
    file.write_text(
        "from sglang.srt.mem_cache.radix_cache import RadixCache\n\nclass NotACache:\n    pass\n"
    )
    assert "sglang:FILE.py:CLASS" in _error(f"sglang:{file}")  # no CLASS in the spec
    assert "defines no class Missing" in _error(f"sglang:{file}:Missing")
    assert "not a subclass" in _error(f"sglang:{file}:NotACache")
    assert "no such file" in _error(f"sglang:{tmp_path / 'absent.py'}:X")

    broken = tmp_path / "broken.py"
    broken.write_text("import sglang.srt.managers.scheduler\n")
    assert "neither loaded nor stubbed" in _error(f"sglang:{broken}:X")

    assert "not an SGLang spec" in _error("vllm")
    assert "not an SGLang spec" in _error("sglang:")
    assert sglang_in_sys_modules() == []
