"""Structural and size invariants of a ``RadixCache``, checked by one walk.

Used after every operation by the property tests, and available to users who change the cache.
"""

from __future__ import annotations

import torch

from radixbench.cache.key import child_key
from radixbench.cache.radix_cache import RadixCache


class IntegrityError(AssertionError):
    """An invariant of the cache does not hold; the message names it."""


def check_integrity(cache: RadixCache) -> None:
    """Raise ``IntegrityError`` unless every invariant holds. Mutates nothing; O(nodes + slots).

    Checked: parent/child links and child keys; ``len(key) == len(value)``; page-aligned keys;
    ``lock_ref >= 0`` and never decreasing toward the root; ``evictable`` flags exact; sizes and
    counters equal a recount; the evictor's members are exactly the unlocked leaves; no KV slot is
    held twice by the tree, and none is both held and free.
    """

    def fail(msg: str) -> None:
        raise IntegrityError(msg)

    root = cache.root
    if root.lock_ref != 1 or root.parent is not None or len(root.key) != 0:
        fail("root must be locked once, parentless and empty")
    evictable = protected = nodes = leaves = 0
    leaf_ids: set[int] = set()
    held: list[torch.Tensor] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for ck, child in node.children.items():
            if child.parent is not node:
                fail(f"node {child.id}: parent link broken")
            extra = child.key.namespace
            if len(child.key) == 0:
                fail(f"node {child.id}: empty key")
            if ck != child_key(child.key.token_ids, 0, cache.page_size, extra):
                fail(f"node {child.id}: child key does not match its tokens")
            if len(child.key) % cache.page_size:
                fail(f"node {child.id}: key of {len(child.key)} tokens is not page-aligned")
            if child.value.numel() != len(child.key):
                fail(f"node {child.id}: {child.value.numel()} slots for {len(child.key)} tokens")
            if child.lock_ref < 0:
                fail(f"node {child.id}: negative lock_ref")
            if node is not root and child.lock_ref > node.lock_ref:
                fail(f"node {child.id}: lock_ref {child.lock_ref} > parent's {node.lock_ref}")
            stack.append(child)
        if node is root:
            continue
        nodes += 1
        n = len(node.key)
        if node.lock_ref == 0:
            evictable += n
        else:
            protected += n
        held.append(node.value)
        is_leaf = not node.children and node.lock_ref == 0
        if node.evictable != is_leaf:
            fail(f"node {node.id}: evictable flag {node.evictable} but unlocked leaf is {is_leaf}")
        if is_leaf:
            leaves += 1
            leaf_ids.add(node.id)
    if root.evictable:
        fail("root marked evictable")
    counters = (cache.evictable_size_, cache.protected_size_, cache.num_nodes)
    if counters != (evictable, protected, nodes):
        fail(
            f"counters (evictable, protected, nodes) = {counters}, "
            f"recount = {(evictable, protected, nodes)}"
        )
    if cache.num_evictable_leaves != leaves:
        fail(f"num_evictable_leaves {cache.num_evictable_leaves} != recount {leaves}")
    members = cache.evictor.members(cache)
    if members != leaf_ids:
        extra_ids = sorted(members - leaf_ids)[:5]
        missing = sorted(leaf_ids - members)[:5]
        fail(f"evictor members differ from unlocked leaves: extra {extra_ids}, missing {missing}")
    if held:
        slots = torch.cat(held)
        lo, hi = int(slots.min()), int(slots.max())
        top = cache.allocator.is_free.numel() - 1
        if lo < 1 or hi > top:
            fail(f"a node holds KV slot outside 1..{top} (min {lo}, max {hi})")
        if torch.unique(slots).numel() != slots.numel():
            fail("a KV slot is held by two tree nodes")
        if bool(cache.allocator.is_free[slots].any()):
            fail("a KV slot is both held by the tree and free")
