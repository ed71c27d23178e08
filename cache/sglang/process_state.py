"""SGLang's process-wide cache state, kept per adapter so caches of one process do not perturb
each other.

SGLang's caches read state that belongs to the module, not to the cache: the classic
``RadixCache`` reads ``time.monotonic()`` (``TreeNode.__init__``, twice: access then creation
time, ``radix_cache.py:259-260``; ``_match_prefix_helper`` / ``_insert_helper``, ``:652,716``)
and numbers nodes with the class-wide ``TreeNode.counter`` (``:251,270-271``); the unified
cache's Python tree core keeps an access clock (``_LAST_ACCESS_TIME_COUNTER_FLOAT``, a float
counter, ``components/base.py:53,161``), node ids (``UnifiedTreeNode.counter``,
``unified_tree_core.py:113``) and lock uuids (``_COMPONENT_UUID_COUNTERS``, ``components/base.py:
62,168``). Each adapter owns one of the context managers below and enters it around every call
into SGLang: on entry the adapter's copies become the process-wide values, on exit they are read
back. Adapters of one load may so be interleaved in one thread, not across threads. Entering is
idempotent (a nested block reads back the same values).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any


class TimeShim:
    """Stands in for the ``time`` module in a loaded SGLang module: ``monotonic()`` returns
    ``clock()``; every other attribute is the real ``time`` module's."""

    def __init__(self, real: ModuleType) -> None:
        self._real = real
        self.clock: Callable[[], float] = real.monotonic

    def monotonic(self) -> float:
        return self.clock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def install_time_shim(module: ModuleType) -> TimeShim | None:
    """Replace ``module.time`` by a :class:`TimeShim` (once: a module that has one keeps it, for
    every adapter of its load); ``None`` if the module has no global ``time``."""
    current = getattr(module, "time", None)
    if isinstance(current, TimeShim):
        return current
    if current is not time:
        return None
    shim = TimeShim(time)
    module.time = shim  # type: ignore[attr-defined]
    return shim


class LegacyState:
    """One ``SGLangCache``'s clock and node ids. On entry: every shim's clock is ``clock()``
    (the adapter's, read through ``clock_of()`` so a replaced one counts), ``TreeNode.counter``
    is ``next_id`` and ``window`` is true (SGLang may be creating nodes); on exit the nodes
    created (``counter - next_id``) join ``num_nodes`` and ``next_id`` is the counter.
    ``num_nodes``: tree nodes without the root, which the adapter also decrements per deleted
    leaf."""

    def __init__(
        self, node_cls: Any, shims: list[TimeShim], clock_of: Callable[[], Callable[[], float]]
    ) -> None:
        self.node_cls, self.shims, self.clock_of = node_cls, shims, clock_of
        self.next_id = 0
        self.num_nodes = 0
        self.window = False

    def live_nodes(self) -> int:
        """``num_nodes`` plus, inside a block, the nodes SGLang created so far in it."""
        n = self.num_nodes
        if self.window:
            n += self.node_cls.counter - self.next_id
        return n

    def __enter__(self) -> None:
        clock = self.clock_of()
        for shim in self.shims:
            shim.clock = clock
        self.node_cls.counter = self.next_id
        self.window = True

    def __exit__(self, *exc: Any) -> None:
        counter = self.node_cls.counter
        self.num_nodes += counter - self.next_id
        self.next_id = counter
        self.window = False


class ServedState:
    """One ``ServedSGLangCache``'s Python-core clock, node counter and lock uuids, starting at
    the values of a fresh import (``components/base.py:53,62``; ids at 0). ``cbase``: the load's
    ``unified_cache.components.base``; ``node_cls``: its ``UnifiedTreeNode``. ``ids``: the next
    node id (the adapter resets it to 0 with the tree)."""

    __slots__ = ("cbase", "clock", "ids", "node_cls", "uuids")

    def __init__(self, cbase: Any, node_cls: Any) -> None:
        self.cbase, self.node_cls = cbase, node_cls
        self.clock, self.ids = 1.0, 0
        self.uuids = {
            ct: (i + 1) * cbase._COMPONENT_UUID_RANGE_SIZE
            for ct, i in cbase._COMPONENT_UUID_RANGE_INDEX.items()
        }

    def __enter__(self) -> None:
        self.cbase._LAST_ACCESS_TIME_COUNTER_FLOAT = self.cbase.float64(self.clock)
        self.cbase._COMPONENT_UUID_COUNTERS = self.uuids
        self.node_cls.counter = self.ids

    def __exit__(self, *exc: Any) -> None:
        self.clock = float(self.cbase._LAST_ACCESS_TIME_COUNTER_FLOAT)
        self.ids = self.node_cls.counter
