"""sglang 0.5.23's own KV allocators, loaded from the installed package for side-by-side timing.

``TokenToKVPoolAllocator`` and ``PagedTokenToKVPoolAllocator`` (``mem_cache/allocator/token.py``,
``paged.py``) are executed from their source files by the one SGLang loader
(:func:`~radixbench.cache.sglang.loader.load_modules`: no package ``__init__``, ``sys.modules``
left as it was); no SGLang code is copied. Used by ``radixbench bench alloc``
(:mod:`radixbench.bench.alloc`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace

from radixbench.cache.sglang.finder import ModuleSet
from radixbench.cache.sglang.loader import load_modules
from radixbench.cache.sglang.package import installed_dir, read_version

__all__ = ["ALLOCATOR_MODULES", "SGLangAllocators", "load_allocators"]

#: SGLang's allocator modules, with what ``paged.py`` imports at module level for its GPU
#: paths, which ``alloc`` / ``free`` never call (the torch fallbacks need none), stubbed:
#: triton kernels, the platform and ``sglang.srt.utils`` (whose ``__init__`` pulls in sglang's
#: serving dependencies). ``get_bool_env_var`` keeps sglang's meaning (reads
#: ``SGLANG_DEBUG_MEMORY_POOL``); the platform says it has no triton.
ALLOCATOR_MODULES = ModuleSet(
    real=tuple(f"sglang.srt.mem_cache.allocator.{m}" for m in ("base", "token", "paged")),
    stubbed={
        "sglang.kernels.ops.memory.allocator": "paged: triton kernels, used only with triton",
        "sglang.srt.platforms": "paged: current_platform, read for supports_triton only",
        "sglang.srt.utils": "paged: env flags, is_hip; the rest only on GPU paths",
    },
    attributes={
        "sglang.srt.platforms": {
            "current_platform": SimpleNamespace(capabilities=SimpleNamespace(supports_triton=False))
        },
        "sglang.srt.utils": {
            "get_bool_env_var": lambda name, default="false": (
                os.getenv(name, default).lower() in ("true", "1")
            ),
            "is_hip": lambda: False,
        },
    },
)


@dataclass(frozen=True)
class SGLangAllocators:
    """sglang's ``TokenToKVPoolAllocator`` and ``PagedTokenToKVPoolAllocator`` classes, the
    package's ``version`` and ``origin`` (folder)."""

    version: str
    origin: str
    token: type
    paged: type


def load_allocators() -> SGLangAllocators:
    """Execute :data:`ALLOCATOR_MODULES` from the installed package. Raises
    ``SGLangLoadError`` (one line, ``"sglang: ..."``) when sglang is not installed or its files
    do not load."""
    pkg = installed_dir("sglang")
    modules = load_modules("sglang", pkg, ALLOCATOR_MODULES).modules
    version = read_version(pkg)[0] or "unknown version"
    token = modules["sglang.srt.mem_cache.allocator.token"].TokenToKVPoolAllocator
    paged = modules["sglang.srt.mem_cache.allocator.paged"].PagedTokenToKVPoolAllocator
    return SGLangAllocators(version, str(pkg), token, paged)
