"""The stand-ins that let sglang 0.5.23's ``UnifiedRadixCache`` run HiCache without a GPU.

:func:`load_hicache` makes a load of sglang's files of its own (``unified_load``'s loader, a
second time) and replaces, in its modules only, what needs a device, pinned host memory or
threads (the module docstring of :mod:`~radixbench.cache.sglang.hicache` lists each): the host
pool assembler (a stand-in ``attach_hybrid_pool_to_unified_cache`` that hands the cache
radixbench's :class:`~radixbench.cache.hicache.controller.SimController` and a
:class:`HostGroup`), the controller class (sglang's own ``parse_storage_backend_extra_config``,
compiled alone from its source), the runtime context (bags of ``--hicache-*`` values set by the
cache being built, :class:`Pending`) and ``PollTimer``'s clock (the simulated one). The plain
served cache's load is untouched.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import os
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar, Optional

import torch

from radixbench.cache.hicache.host import HostPool
from radixbench.cache.sglang.loader import Loaded
from radixbench.cache.sglang.unified_load import _load_package, load_unified

__all__ = ["HostGroup", "Pending", "load_hicache"]

_ASSEMBLER = "sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler"
_EXT_LOADER = "sglang.srt.utils.cpp_extension_loader"
_LOADS: dict[tuple[str, str], Loaded] = {}


class Pending:
    """What the stand-ins read while one cache's ``init_hicache`` runs, and the clock."""

    bags: ClassVar[dict[str, Any]] = {}
    attach: Any = None
    now = 0.0


class HostGroup(HostPool):
    """sglang's ``HostPoolGroup`` as the tree and controller use it, over radixbench's host
    free-list (no buffers): ``free(indices, pool=...)``, ``get_pool``, ``anchor_entry``."""

    def __init__(self, size: int, page_size: int) -> None:
        super().__init__(size, page_size)
        self.anchor_entry = SimpleNamespace(
            host_pool=SimpleNamespace(shared_allocation_domain=None), host_evict_fn=None
        )
        self.entries: list[Any] = []
        self.entry_map: dict[Any, Any] = {}
        self.layout = "page_first"

    @property
    def logical_size(self) -> int:
        return self.size

    def free(self, slots: torch.Tensor, pool: Any = None) -> int:
        return super().free(slots)

    def get_pool(self, name: Any) -> HostGroup:
        return self

    def release_transfers(self, transfers: Any) -> None:
        pass

    def destroy(self) -> None:
        pass


def _class_method(path: Path, cls: str, name: str) -> Any:
    """Method ``name`` of class ``cls`` in ``path``, compiled alone (sglang's own code)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == name:
                    fn.decorator_list = []
                    ns: dict[str, Any] = {"json": json, "os": os, "Optional": Optional}
                    mod = ast.Module(body=[fn], type_ignores=[])
                    exec(compile(mod, str(path), "exec"), ns)
                    return ns[name]
    raise ImportError(f"{path} defines no {cls}.{name}")


def _attach(cache: Any, params: Any, server_args: Any, **kw: Any) -> None:
    """The stand-in ``attach_hybrid_pool_to_unified_cache`` (module docstring)."""
    Pending.attach(cache, kw)


def _patch(loaded: Loaded) -> None:
    """Install the stand-ins into ``loaded``'s modules (a load of its own)."""
    mods: dict[str, Any] = loaded.modules  # the load's modules, given stand-ins here
    pkg = Path(loaded.origin)
    parse = _class_method(
        pkg / "srt/mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController",
        "parse_storage_backend_extra_config",
    )
    ctrl_cls = type(
        "HybridCacheController", (), {"parse_storage_backend_extra_config": staticmethod(parse)}
    )
    assembler = ModuleType(_ASSEMBLER)
    assembler.attach_hybrid_pool_to_unified_cache = _attach  # type: ignore[attr-defined]
    mods[_ASSEMBLER] = assembler
    spec = importlib.util.spec_from_file_location(
        _EXT_LOADER, pkg / "srt/utils/cpp_extension_loader.py"
    )
    assert spec is not None and spec.loader is not None
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    mods[_EXT_LOADER] = ext
    urc: Any = loaded.m["urc"]
    for name in ("get_memory", "get_model", "get_observability", "get_disagg"):
        bag = name[4:]
        setattr(urc, name, lambda bag=bag: Pending.bags[bag])
    urc.HybridCacheController = ctrl_cls
    mods["sglang.srt.mem_cache.unified_cache.storage_attachment"].HybridCacheController = ctrl_cls
    mods["sglang.srt.utils.poll_timer"].time = SimpleNamespace(perf_counter=lambda: Pending.now)
    native = mods["sglang.srt.mem_cache.cpp_utils.native_hash"]
    with loaded.activate():  # build (first use: ~10 s) and cache sglang's native page hash
        native._load_native_hash_module()


def load_hicache(spec: str, core: str = "auto", path: str | None = None) -> Loaded:
    """A load of sglang's ``UnifiedRadixCache`` (as ``load_unified``) with the HiCache stand-ins
    installed; cached per package folder and core."""
    base = load_unified(spec, core, path)
    # its write_back drop / prefetch logs would flood a run's output (the run records counts)
    logging.getLogger("sglang").setLevel(logging.ERROR)
    key = (base.origin, core)
    if key not in _LOADS:
        loaded = _load_package(spec, Path(base.origin), base.label, core)
        _patch(loaded)
        _LOADS[key] = loaded
    from dataclasses import replace

    return replace(_LOADS[key], spec=base.spec, label=base.label)
