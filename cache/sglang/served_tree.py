"""The tree of one ``UnifiedRadixCache`` as radixbench reads it: node numbering, counts, walk.

sglang 0.5.23's unified cache names nodes by integer ids of its tree core. ``ServedTree``
renumbers them as radixbench's (root 0, tree nodes 1, 2, ... in creation order: the Rust core
mints ids from root + 1, the Python core's LRU sentinels take the ids after the root's), answers
``PrefixCache.tree_stats`` / ``walk`` in O(1) per node from the Python core's own nodes
(``_node_arena``, ``evictable_device_leaves``, ``children``) or, for the Rust core, which has no
node objects (``adapter.py:524-531``), from a :class:`~radixbench.cache.sglang.tree_shadow.
TreeShadow` fed with the events of every call, and records the victims of each eviction
(``_evict_device_leaf``, ``unified_radix_cache.py:918``). ``ServedSGLangCache``
(:mod:`radixbench.cache.sglang.served`) owns one per SGLang instance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from radixbench.cache.sglang.process_state import ServedState
from radixbench.cache.sglang.tree_shadow import TreeShadow


class ServedTree:
    """The tree of the ``UnifiedRadixCache`` instance ``sgl``. ``full``: the load's
    ``ComponentType.FULL``; ``rust``: its core is the Rust one; ``state``: the adapter's
    ``ServedState`` (its node counter numbers the Python core's nodes); ``shadow``: keep a
    ``TreeShadow`` (needed for the Rust core; ``tiered``: HiCache's, of the device-resident
    nodes). ``victims``: the ids (the core's) of the leaves
    evicted since the adapter last replaced the list."""

    def __init__(
        self,
        sgl: Any,
        full: Any,
        rust: bool,
        state: ServedState,
        shadow: bool,
        tiered: bool = False,
    ) -> None:
        self.sgl, self.core, self.full, self.rust, self.state = (
            sgl,
            sgl.tree_core,
            full,
            rust,
            state,
        )
        self.victims: list[int] = []
        #: HiCache: load-back nodes not yet on the device (:meth:`settle`)
        self.loading: set[int] = set()
        #: runs the shadow's bookkeeping inside SGLang's calls (the adapter sets the timer's
        #: ``untimed`` when instrumented, so the shadow is not timed as SGLang's work)
        self.untimed: Callable[..., Any] = _call
        self.renumber()
        self.shadow = TreeShadow(self.core, full, self.root, tiered) if shadow else None

    def renumber(self) -> None:
        """Read the root's handle and the first id a tree node gets (after a reset)."""
        self.root = int(self.core.root_node_handle(None))
        self.base = self.root + 1 if self.rust else self.state.ids

    def reset(self) -> None:
        """After ``UnifiedRadixCache.reset``: renumber; the shadow restarts from the root."""
        self.renumber()
        if self.shadow is not None:
            self.shadow.reset(self.root)

    def hook(self, ops: Mapping[str, Callable[..., Any]]) -> None:
        """Route the calls SGLang's cache makes on itself (its ``checkpoint``, ``lock``,
        ``unlock``...) through ``ops`` (op -> callable, looked up at every call: the adapter's
        timing replaces entries), feeding the shadow; and record eviction victims. Mutates the
        SGLang instance's ``insert`` / ``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref`` /
        ``_evict_device_leaf`` attributes."""
        for op in ops:
            setattr(self.sgl, op, self._logged(op, ops))
        evict_leaf = self.sgl._evict_device_leaf

        def _evict_device_leaf(node_id: int, tracker: Any) -> Any:
            self.victims.append(node_id)
            if self.shadow is not None:
                self.shadow.on_evict(node_id)
            return evict_leaf(node_id, tracker)

        self.sgl._evict_device_leaf = _evict_device_leaf

    def _logged(self, op: str, ops: Mapping[str, Callable[..., Any]]) -> Callable[..., Any]:
        """SGLang's call ``op`` on itself through ``ops``; with a shadow, its queued events are
        applied first (under :attr:`untimed`: the shadow's work is not SGLang's) and the
        call's own queued after (O(1))."""
        shadow = self.shadow
        if shadow is None:

            def plain(*args: Any, **kwargs: Any) -> Any:
                if kwargs:  # the timer passes positional arguments only; SGLang's keyword
                    args = (*args, *kwargs.values())  # arguments here are the trailing ones
                return ops[op](*args)

            return plain
        node_op = op == "insert" or op == "match_prefix"
        delta = 1 if op == "inc_lock_ref" else -1

        def call(*args: Any, **kwargs: Any) -> Any:
            if shadow.queue:
                self.untimed(shadow.sync)
            if kwargs:
                args = (*args, *kwargs.values())
            r = ops[op](*args)
            if node_op:
                shadow.on_node(int(r.last_device_node))
            else:
                shadow.on_lock(int(args[0]), delta)
            return r

        return call

    def settle(self) -> None:
        """HiCache: the nodes of pending load backs (:attr:`loading`) that are on the device
        now, and nodes made without an event (``TreeShadow.discover``), join the shadow."""
        if self.shadow is None:
            return
        for node in self.loading:
            self.shadow.on_node(node)
        self.shadow.discover()
        kids = self.shadow.kids
        self.loading = {n for n in self.loading if n not in kids and self.shadow.exists(n)}

    def sync(self) -> None:
        """Before a call into SGLang: apply the shadow's queued events (no shadow: nothing)."""
        if self.shadow is not None:
            self.shadow.sync()

    def on_node(self, node: Any) -> None:
        """``node``: the last node of an ``insert`` / ``match_prefix`` (for the shadow)."""
        if self.shadow is not None:
            self.shadow.on_node(int(node))

    def on_lock(self, node: Any, delta: int) -> None:
        """``node``'s path was locked (+1) or unlocked (-1) (for the shadow)."""
        if self.shadow is not None:
            self.shadow.on_lock(int(node), delta)

    def counts(self) -> tuple[int, int]:
        """``(tree nodes without the root, evictable leaves)``, O(1): the Python core's node
        arena and ``evictable_device_leaves``, or the shadow's counts."""
        if self.shadow is not None:
            return self.shadow.stats()
        return len(self.core._node_arena) - 1, len(self.core.evictable_device_leaves)

    def node_id(self, node: Any) -> int:
        """radixbench's number of the core's node ``node``."""
        node = int(node)
        return 0 if node == self.root else node - self.base + 1

    def node_handle(self, node_id: int) -> int:
        """The core's node of radixbench-numbered ``node_id`` (inverse of :meth:`node_id`)."""
        return self.root if node_id == 0 else node_id + self.base - 1

    def walk(self) -> Iterator[tuple[int, int]]:
        """``(node id, parent id)`` depth first, radixbench's numbers; children in the Python
        core's dict order (the shadow keeps the same order for the Rust core)."""
        if self.shadow is not None:
            yield from self.shadow.walk(self.node_id)
            return
        stack = list(reversed(self.core.root_node.children.values()))
        while stack:
            node = stack.pop()
            yield self.node_id(node.id), self.node_id(node.parent.id)
            if node.children:
                stack.extend(reversed(node.children.values()))

    def node_value(self, node_id: int) -> torch.Tensor:
        """The FULL KV slots of radixbench-numbered node ``node_id``."""
        return self.core.get_component_device_value(self.node_handle(node_id), self.full)

    def lock_count(self, node: Any) -> int:
        """The FULL lock count of the core's node ``node``."""
        if self.shadow is not None:
            return self.shadow.lock_count(int(node))
        return int(self.core.node_by_id(int(node)).component_data[self.full].lock_ref)


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)
