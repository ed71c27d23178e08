"""``radixbench.cache.impls``: radixbench's own cache as a registered implementation."""

from __future__ import annotations

import hashlib
from pathlib import Path

import radixbench.cache as cache_pkg
from radixbench.cache.impls import radixbench_info

FOLDER = Path(cache_pkg.__file__ or "").parent


def test_what_radixbench_runs_is_the_cache_package_without_sglangs() -> None:
    """The files of radixbench's cache are every module of ``radixbench.cache`` and its
    subpackages (HiCache's tiers included) but the package of SGLang's caches, the registry and
    the interface: the package boundary, not a file-name prefix, decides."""
    files = radixbench_info().files
    expected = {
        f"radixbench/cache/{p.relative_to(FOLDER).as_posix()}"
        for p in FOLDER.rglob("*.py")
        if p.relative_to(FOLDER).parts[0] != "sglang"
        and p.name not in ("impls.py", "registry.py", "interface.py")
    }
    assert set(files) == expected
    assert "radixbench/cache/hicache/tree.py" in files
    assert not any("/sglang/" in f for f in files)
    tree = FOLDER / "radix_cache.py"
    assert files["radixbench/cache/radix_cache.py"] == hashlib.sha256(tree.read_bytes()).hexdigest()
