"""Structural and size invariants of a ``RadixCache``, checked by one walk.

Used after every operation by the property tests (hundreds of thousands of calls per suite run),
so the walk is written for speed: one pass over the nodes with the per-node checks inlined, and
the KV-slot checks done on one concatenated array by a single ``bincount``. Available to users who
change the cache.
"""

from __future__ import annotations

import numpy as np
import torch

from radixbench.cache.key import child_key
from radixbench.cache.node import TreeNode
from radixbench.cache.radix_cache import RadixCache


class IntegrityError(AssertionError):
    """An invariant of the cache does not hold; the message names it."""


def check_integrity(cache: RadixCache) -> None:
    """Raise ``IntegrityError`` unless every invariant holds. Mutates nothing; O(nodes + slots).

    Checked: the root is locked once, parentless, empty and not evictable; parent/child links and
    child keys (``key.child_key`` of the node's first page in its namespace); keys non-empty and
    page-aligned; ``len(key) == len(value)``; ``lock_ref >= 0`` and never decreasing toward the
    root; ``evictable`` flags exact (unlocked leaf); ``evictable_size_``, ``protected_size_``,
    ``num_nodes`` and ``num_evictable_leaves`` equal a recount; the evictor's members
    (``Evictor.members``) are exactly the unlocked leaves; every held KV slot lies past the
    allocator's padding (slot 0; all of page 0 in a paged pool) and inside its mask, no slot is
    held by two nodes, and none is both held and free.
    """
    root = cache.root
    if root.lock_ref != 1 or root.parent is not None or len(root.key.token_ids) != 0:
        _fail("root must be locked once, parentless and empty")
    if root.evictable:
        _fail("root marked evictable")
    page = cache.page_size
    evictable = protected = nodes = leaves = 0
    leaf_ids: set[int] = set()
    held: list[torch.Tensor] = []
    stack: list[TreeNode] = [root]
    while stack:
        node = stack.pop()
        # The root's lock (1) bounds nothing: its children may be locked by many requests.
        bound = node.lock_ref if node is not root else None
        for ck, child in node.children.items():
            if child.parent is not node:
                _fail(f"node {child.id}: parent link broken")
            key = child.key
            tokens = key.token_ids
            n = len(tokens)
            if n == 0:
                _fail(f"node {child.id}: empty key")
            if n % page:
                _fail(f"node {child.id}: key of {n} tokens is not page-aligned")
            if ck != child_key(tokens, 0, page, key.namespace):
                _fail(f"node {child.id}: child key does not match its tokens")
            value = child.value
            if value.numel() != n:
                _fail(f"node {child.id}: {value.numel()} slots for {n} tokens")
            lock = child.lock_ref
            if lock < 0:
                _fail(f"node {child.id}: negative lock_ref")
            if bound is not None and lock > bound:
                _fail(f"node {child.id}: lock_ref {lock} > parent's {bound}")
            is_leaf = lock == 0 and not child.children
            if child.evictable != is_leaf:
                _fail(
                    f"node {child.id}: evictable flag {child.evictable} "
                    f"but unlocked leaf is {is_leaf}"
                )
            if lock:
                protected += n
            else:
                evictable += n
                if is_leaf:
                    leaves += 1
                    leaf_ids.add(child.id)
            held.append(value)
            nodes += 1
            if child.children:
                stack.append(child)
    counters = (cache.evictable_size_, cache.protected_size_, cache.num_nodes)
    if counters != (evictable, protected, nodes):
        _fail(
            f"counters (evictable, protected, nodes) = {counters}, "
            f"recount = {(evictable, protected, nodes)}"
        )
    if cache.num_evictable_leaves != leaves:
        _fail(f"num_evictable_leaves {cache.num_evictable_leaves} != recount {leaves}")
    members = cache.evictor.members(cache)
    if members != leaf_ids:
        extra_ids = sorted(members - leaf_ids)[:5]
        missing = sorted(leaf_ids - members)[:5]
        _fail(f"evictor members differ from unlocked leaves: extra {extra_ids}, missing {missing}")
    if held:
        # A paged allocator's padding is its whole page 0, a token allocator's slot 0.
        first = getattr(cache.allocator, "page_size", 1)
        _check_slots(torch.cat(held), cache.allocator.is_free, first)


def _check_slots(slots: torch.Tensor, is_free: torch.Tensor, first: int) -> None:
    """``slots``: int64 ``[n]``, every KV slot the tree holds; ``is_free``: the allocator's bool
    mask ``[top + 1]``, whose slots below ``first`` are padding. One ``bincount`` finds slots held
    twice, held and free, or outside ``first..top``; the message is worked out only on failure."""
    held = slots.cpu().numpy()
    free = is_free.cpu().numpy()
    top = free.size - 1
    # Per slot: times held (bincount raises on a negative slot, grows past top on a large one).
    try:
        use = np.bincount(held, minlength=top + 1)
    except ValueError:
        use = None
    if use is None or use.size > top + 1 or use[:first].any():
        lo, hi = int(held.min()), int(held.max())
        _fail(f"a node holds KV slot outside {first}..{top} (min {lo}, max {hi})")
    # Plus 1 if free: any slot above 1 is held twice, or held and free.
    use += free
    if use.max() > 1:
        if use[free].max(initial=0) > 1:
            _fail("a KV slot is both held by the tree and free")
        _fail("a KV slot is held by two tree nodes")


def _fail(msg: str) -> None:
    raise IntegrityError(msg)
