"""What both SGLang adapters read of SGLang's cache the same way.

``SGLangCache`` (the classic ``RadixCache``, :mod:`~radixbench.cache.sglang.legacy`) and
``ServedSGLangCache`` (``UnifiedRadixCache``, :mod:`~radixbench.cache.sglang.served`) hold the
SGLang instance as ``sgl`` and its load as ``loaded``; its sizes and a node's KV slots are
SGLang's own O(1) counters and ``path_device_indices`` on both (``base_prefix_cache.py``:
``evictable_size``, ``protected_size``; ``radix_cache.py`` / ``unified_radix_cache.py``:
``path_device_indices``), and both describe their load with ``report.impl_info``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from radixbench.cache.sglang.report import impl_info

if TYPE_CHECKING:
    import torch

    from radixbench.cache.interface import CacheAction, ImplInfo, TierOps
    from radixbench.cache.sglang.loader import Loaded


class SGLangAdapter:
    """The part of ``PrefixCache`` both adapters answer from ``sgl`` alone (sizes in tokens:
    the FULL component's for the unified cache). One tier: a subclass with HiCache sets
    ``tiers``."""

    sgl: Any
    loaded: Loaded
    tiers: TierOps | None = None
    #: the tree core the instance built and why (``""``: the classic class has none)
    core_name = ""
    core_reason = ""

    def info(self) -> ImplInfo:
        """``label``, ``spec``, ``version``, ``origin``, class, the tree core built and why,
        ``files`` (sha256 by path) of the SGLang code this cache runs, for reports."""
        return impl_info(self.loaded, self.core_name, self.core_reason)

    def take_actions(self) -> list[CacheAction]:
        """``[]``: no KV events are driven (an adapter that drives SGLang's recorder says so)."""
        return []

    def evictable_size(self) -> int:
        """SGLang's ``evictable_size()``: tokens of unlocked nodes, O(1)."""
        return int(self.sgl.evictable_size())

    def protected_size(self) -> int:
        """SGLang's ``protected_size()``: tokens of locked nodes, O(1)."""
        return int(self.sgl.protected_size())

    def total_size(self) -> int:
        """``evictable_size() + protected_size()``: every token of the tree, O(1)."""
        return int(self.sgl.evictable_size() + self.sgl.protected_size())

    def path_device_indices(self, node: Any) -> torch.Tensor:
        """SGLang's ``path_device_indices``: the KV slots root..node."""
        return self.sgl.path_device_indices(node)
