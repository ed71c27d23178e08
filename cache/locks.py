"""The locks of radixbench's radix tree: a running request's hold on its prefix.

:class:`LockOps` is the lock accounting of :class:`~radixbench.cache.radix_cache.RadixCache`,
mirroring ``RadixCache.inc_lock_ref`` / ``dec_lock_ref`` of sglang 0.5.23
(``mem_cache/radix_cache.py``): a holder counts up every node of the path root..node; a node's
first holder moves its tokens from evictable to protected (``evictable_size_`` /
``protected_size_``) and takes it off the evictable leaves, its last holder moves them back.
The tiered tree's locks (host-only segments, host pins) are
:class:`~radixbench.cache.hicache.locks.TierLocks`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from radixbench.cache.node import TreeNode

__all__ = ["LockOps"]


class LockOps:
    """``inc_lock_ref`` / ``dec_lock_ref`` of a radix tree (module docstring; sizes in tokens).
    A mixin of :class:`~radixbench.cache.radix_cache.RadixCache`, which keeps the state below
    and ``_refresh`` (a node's evictable-leaf flag, told to the evictor)."""

    root: TreeNode
    evictable_size_: int
    protected_size_: int

    def _refresh(self, node: TreeNode) -> None:
        raise NotImplementedError  # the tree's

    def inc_lock_ref(self, node: TreeNode) -> int:
        """Lock the path root..node for a running request; returns the change of
        ``evictable_size_`` (<= 0). A 0->1 transition moves ``len(key)`` tokens from evictable
        to protected. Mirrors SGLang ``inc_lock_ref``."""
        delta = 0
        root = self.root
        while node is not root:
            if node.lock_ref == 0:
                n = len(node.key)
                self.evictable_size_ -= n
                self.protected_size_ += n
                delta -= n
                node.lock_ref = 1
                self._refresh(node)
            else:
                node.lock_ref += 1
            node = node.parent  # type: ignore[assignment]  # below the root: never None
        return delta

    def dec_lock_ref(self, node: TreeNode) -> int:
        """Unlock the path root..node; returns the change of ``evictable_size_`` (>= 0).
        Raises ``RuntimeError`` on a node that is not locked. Mirrors SGLang ``dec_lock_ref``."""
        delta = 0
        root = self.root
        while node is not root:
            if node.lock_ref == 1:
                n = len(node.key)
                self.evictable_size_ += n
                self.protected_size_ -= n
                delta += n
                node.lock_ref = 0
                self._refresh(node)
            elif node.lock_ref <= 0:
                raise RuntimeError(f"dec_lock_ref on unlocked node {node.id}")
            else:
                node.lock_ref -= 1
            node = node.parent  # type: ignore[assignment]  # below the root: never None
        return delta
