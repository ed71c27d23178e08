"""Which tree core a load of ``UnifiedRadixCache`` runs, by sglang 0.5.23's own rules.

sglang 0.5.23 builds a ``UnifiedRadixCache``'s tree core with the backend
``select_tree_core_backend`` returns (``unified_cache/tree_core_registry.py:124``): the cache's
``tree_core_backend`` or else ``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND`` (default ``rust``),
resolved by ``resolve_tree_core_backend`` (``:109``), which falls back to the Python core for the
reasons of ``_rust_fallback_reason`` (``:44``: torch version, device...). :func:`choose_core`
asks those functions of the load itself, for a FULL-only cache on radixbench's CPU allocator,
and adds the one case SGLang reports as an error at construction: the extension did not load.
A cache class can still build another core than its load's: ``create_tree_core`` resolves the
backend again with the cache's own ``CacheInitParams`` (``tree_core_registry.py:174``), and a
subclass that overrides a component gets the Python core (``_rust_fallback_reason``, ``:53-54``).
:func:`built_core` reads which core an instance built, and why.
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Any

from radixbench.cache.sglang.loader import SGLangLoadError, activated

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


def built_core(loaded: Any, sgl: Any, params: Any, m: dict[str, ModuleType]) -> tuple[str, str]:
    """``(tree core, why)`` of the built cache ``sgl`` (a ``UnifiedRadixCache`` of ``loaded``,
    a ``Loaded``, built from ``params``): the load's choice (``loaded.core``,
    ``loaded.core_reason``) when the instance runs it; else the core it runs, with SGLang's own
    fallback reason for ``params`` carrying the instance's non-default component classes (e.g.
    "custom components require the Python TreeCore"), run on the load's modules (``m``: by short
    name, ``urc``, ``utc``, ``registry``). Mutates nothing."""
    core = "python" if isinstance(sgl.tree_core, m["utc"].UnifiedTreeCore) else "rust"
    if core == loaded.core:
        return loaded.core, loaded.core_reason
    defaults = m["urc"].COMPONENT_REGISTRY
    custom = {ct: type(c) for ct, c in sgl.components.items() if type(c) is not defaults.get(ct)}
    probe = replace(params, component_registry_override=custom or None)
    with activated(loaded.modules):
        reason = m["registry"]._rust_fallback_reason(probe) if core == "python" else None
    cls = type(sgl).__name__
    why = f"SGLang's rules for {cls}: {reason}" if reason else f"{cls} built it"
    return core, f"{why} (the load chose {loaded.core}: {loaded.core_reason})"
