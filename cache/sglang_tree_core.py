"""Which tree core a load of ``UnifiedRadixCache`` runs, by sglang 0.5.23's own rules.

sglang 0.5.23 builds a ``UnifiedRadixCache``'s tree core with the backend
``select_tree_core_backend`` returns (``unified_cache/tree_core_registry.py:124``): the cache's
``tree_core_backend`` or else ``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND`` (default ``rust``),
resolved by ``resolve_tree_core_backend`` (``:109``), which falls back to the Python core for the
reasons of ``_rust_fallback_reason`` (``:44``: torch version, device...). :func:`choose_core`
asks those functions of the load itself, for a FULL-only cache on radixbench's CPU allocator,
and adds the one case SGLang reports as an error at construction: the extension did not load.
"""

from __future__ import annotations

from types import ModuleType

from radixbench.cache.sglang_modules import SGLangLoadError, activated

#: ``--impl`` tree cores: ``auto`` (SGLang's rules) and ``python`` (forced).
CORES = ("auto", "python")


class _ProbeAllocator:
    """What ``_rust_fallback_reason`` reads of an allocator: its device."""

    device = "cpu"


def choose_core(
    spec: str,
    core: str,
    m: dict[str, ModuleType],
    modules: dict[str, ModuleType],
    rust_error: str | None,
) -> tuple[str, str]:
    """``(tree core, why)`` for a load: ``"python"`` when ``core`` is ``"python"`` (forced);
    else what ``select_tree_core_backend`` picks with no per-cache override, run on the load's
    own modules (``m``: by short name, ``environ``, ``cip``, ``ct``, ``registry``; ``modules``:
    all of them, active while SGLang's functions run), and ``"python"`` when it picks Rust but
    the Rust adapter did not import (``rust_error``: why). Reads the environment variable;
    mutates nothing. Raises ``SGLangLoadError`` (one line naming ``spec``) when the variable
    names a tree core that is not registered."""
    if core == "python":
        return "python", f"forced by {spec!r} (the Python TreeCore)"
    env = m["environ"].envs.SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND
    name = env.get()
    params = m["cip"].CacheInitParams(
        disable=False,
        req_to_token_pool=None,
        token_to_kv_pool_allocator=_ProbeAllocator(),
        page_size=1,
        tree_components=(m["ct"].ComponentType.FULL,),
    )
    with activated(modules):
        if name != "rust":
            chosen = m["registry"].resolve_tree_core_backend(name, params)
            if m["registry"].get_tree_core_factory(chosen) is None:
                known = ", ".join(m["registry"].registered_tree_core_backends())
                raise SGLangLoadError(
                    f"{spec}: SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND={name!r} is not a "
                    f"registered tree core ({known})"
                )
            return chosen, f"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND={name}"
        reason = m["registry"]._rust_fallback_reason(params)
    if reason is not None:
        return "python", f"resolve_tree_core_backend fell back to the Python TreeCore: {reason}"
    if rust_error is not None:
        return "python", f"the Rust TreeCore extension did not load ({rust_error})"
    default = "" if env.is_set() else " (default)"
    return "rust", f"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=rust{default}; no fallback reason"
