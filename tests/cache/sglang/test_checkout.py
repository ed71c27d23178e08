"""``sglang:PATH`` on a source checkout runs the checkout's own built Rust extension.

A fake source checkout under ``tmp_path`` mirrors the installed sglang 0.5.23 package with
symlinks, except three files copied (``rust_extensions/loader.py``, ``unified_cache/
tree_core_registry.py``, ``rust_tree_core/extension.py``: SGLang finds its source tree from
their resolved paths) and a ``rust/`` folder with a Cargo workspace, so SGLang's own loader sees a
source checkout (where, left alone, it ignores an in-package build). With
``python/sglang/srt/mem_cache/rust_tree_core/mem_cache*.so`` present (a symlink to the installed
build) the load runs the Rust core from that file; without it SGLang's loader looks for the
crate, finds none, and the Python core is chosen with the reason."""

from __future__ import annotations

import importlib.util
import shutil
from array import array
from pathlib import Path

import pytest

from radixbench.cache import CacheConfig, RadixKey, ReqToTokenPool, TokenToKVPoolAllocator

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed (make install)", allow_module_level=True)

from radixbench.cache.sglang.package import installed_dir
from radixbench.cache.sglang.served import ServedSGLangCache
from radixbench.cache.sglang.unified_load import RUST_EXTENSION, load_unified

INSTALLED = load_unified("sglang", "auto")
if INSTALLED.core != "rust":
    pytest.skip(f"no Rust core here: {INSTALLED.core_reason}", allow_module_level=True)

COPIED = (
    "srt/rust_extensions/loader.py",
    "srt/mem_cache/unified_cache/tree_core_registry.py",
    "srt/mem_cache/rust_tree_core/extension.py",
)
SO = "sglang/srt/mem_cache/rust_tree_core/mem_cache"


def _mirror(src: Path, dst: Path, rel: str, with_so: bool) -> None:
    """``dst``: symlinks to ``src``'s entries; real folders along the paths of ``COPIED``."""
    dst.mkdir(parents=True)
    for entry in src.iterdir():
        r = f"{rel}{entry.name}"
        if r in COPIED:
            shutil.copyfile(entry, dst / entry.name)
        elif any(c.startswith(f"{r}/") for c in COPIED):
            _mirror(entry, dst / entry.name, f"{r}/", with_so)
        elif not with_so and entry.name.startswith("mem_cache") and entry.suffix == ".so":
            continue
        elif entry.name != "__pycache__":
            (dst / entry.name).symlink_to(entry)


def make_source_checkout(root: Path, with_so: bool) -> Path:
    """The fake checkout at ``root`` (module docstring); returns its ``python/`` folder."""
    _mirror(installed_dir(), root / "python" / "sglang", "", with_so)
    crate = root / "rust" / "sglang-radix-tree"
    crate.mkdir(parents=True)
    (root / "rust" / "Cargo.toml").write_text("[workspace]\nmembers = []\n")
    (crate / "Cargo.toml").write_text('[package]\nname = "not-the-tree-core"\n')
    return root / "python"


def victims(loaded) -> list[int]:
    alloc = TokenToKVPoolAllocator(64)
    cache = ServedSGLangCache(ReqToTokenPool(2, 64), alloc, CacheConfig(), loaded)
    for tokens in ([1, 2, 3], [1, 2, 4], [5, 6], [7]):
        slots = alloc.alloc(len(tokens))
        cache.allocator.free(slots[: cache.insert(RadixKey(array("q", tokens)), slots)])
    cache.match_prefix(RadixKey(array("q", [5, 6])))
    return cache.evict(64).victims


def test_a_checkouts_own_extension_is_the_one_run(tmp_path: Path) -> None:
    path = make_source_checkout(tmp_path / "review", with_so=True)
    loaded = load_unified(f"sglang:{path}", "auto", str(path))
    so = next(f for f in loaded.files if f.startswith(SO) and f.endswith(".so"))
    assert loaded.core == "rust" and loaded.label == "sglang@review"
    assert loaded.core_reason.endswith(f"; extension {so}")
    ext = loaded.modules[RUST_EXTENSION]
    assert Path(ext.__file__).parent == path / "sglang/srt/mem_cache/rust_tree_core"
    assert ext is not INSTALLED.modules[RUST_EXTENSION]
    assert loaded.files[so] == INSTALLED.files[so]  # same bytes: the symlinked build
    assert victims(loaded) == victims(INSTALLED) == [1, 3, 2, 5, 4]


def test_a_checkout_without_a_build_is_left_to_sglangs_loader(tmp_path: Path) -> None:
    path = make_source_checkout(tmp_path / "unbuilt", with_so=False)
    loaded = load_unified(f"sglang:{path}", "auto", str(path))
    assert loaded.core == "python"
    assert "the Rust TreeCore extension did not load" in loaded.core_reason
    assert "no Cargo package under" in loaded.core_reason  # SGLang's loader looked for the crate
    assert not any(f.endswith(".so") for f in loaded.files)
