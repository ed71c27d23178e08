"""The index of a router fed by KV events: block id -> the instances holding that block.

What llm-d's ``kvcache.Index`` keeps over its ``kvevents.Pool`` (the KV-block index of
llm-d-kv-cache-manager: block hash -> pods and medium) and Dynamo's ``KvIndexer``: it applies
each instance's ``BlockStored`` (add), ``BlockRemoved`` (remove) and ``AllBlocksCleared`` (drop
all of that instance) in delivery order, and answers for a request's block ids the longest run
of leading blocks each instance holds (prefix blocks). Instances are bits of one int per block
(``holders[id] & (1 << i)``), so a lookup is one dict access and one AND per block. Only the
GPU medium counts (events of other tiers are ignored: radixbench's caches have one tier).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["BlockIndex"]


class BlockIndex:
    """Blocks held per instance, for ``n`` instances; ``blocks[i]``: count held by ``i``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.holders: dict[int, int] = {}
        self.blocks = [0] * n

    def apply(self, instance: int, events: Sequence[Any]) -> None:
        """Apply one delivered batch of ``instance``'s events, in order."""
        bit = 1 << instance
        holders = self.holders
        get = holders.get
        for e in events:
            kind = type(e).__name__
            if getattr(e, "medium", "GPU") not in (None, "GPU"):
                continue
            if kind == "BlockStored":
                added = 0  # counted here, added once: the loop runs per page
                for h in e.block_hashes:
                    m = get(h, 0)
                    if not m & bit:
                        holders[h] = m | bit
                        added += 1
                self.blocks[instance] += added
            elif kind == "BlockRemoved":
                removed = 0
                for h in e.block_hashes:
                    m = get(h, 0)
                    if m & bit:
                        m &= ~bit
                        removed += 1
                        if m:
                            holders[h] = m
                        else:
                            del holders[h]
                self.blocks[instance] -= removed
            elif kind == "AllBlocksCleared":
                if self.blocks[instance]:
                    for h in [h for h, m in holders.items() if m & bit]:
                        m = holders[h] & ~bit
                        if m:
                            holders[h] = m
                        else:
                            del holders[h]
                self.blocks[instance] = 0

    def size(self) -> int:
        """Blocks held over all instances (SMG's ``current_size``: > 0 turns on event-driven
        cache-aware routing)."""
        return sum(self.blocks)

    def prefix_blocks(self, ids: Sequence[int]) -> list[int]:
        """Per instance, how many leading blocks of ``ids`` it holds."""
        out = [0] * self.n
        alive = (1 << self.n) - 1
        holders = self.holders
        for j, h in enumerate(ids):
            m = holders.get(h, 0) & alive
            if m != alive:
                gone = alive & ~m
                i = 0
                while gone:
                    if gone & 1:
                        out[i] = j
                    gone >>= 1
                    i += 1
                alive = m
                if not alive:
                    return out
        for i in range(self.n):
            if alive >> i & 1:
                out[i] = len(ids)
        return out
