"""The TTL'd hash placement index of SMG's ``cache_aware`` (``cache_index = hash``, smg#2213).

Follows smg-project/smg ``model_gateway/src/policies/cache_aware.rs`` @f8daa88 (0b92ba1 added
it): a map ``(boundary, hash of the request's first boundary tokens)`` -> up to 3 holders
(instance, last touch), ``PLACEMENT_HOLDER_CAP`` (``:171``). A holder is live while ``now -
last touch <= ttl``; expired holders are dropped when a key is read or written
(``live_holder_min_load`` ``:1658-1676``, ``record_placement`` ``:1678-1722``) and by the
periodic sweep (``sweep_placement_index`` ``:1724-1745``). Recording a fourth holder evicts the
stalest with ``swap_remove`` (the last holder takes its slot). Times are simulated seconds; the
head hash is BLAKE2b-64 of the token ids (SMG: xxh3-64), collisions ignored as there.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Sequence

__all__ = ["HOLDER_CAP", "PlacementIndex"]

HOLDER_CAP = 3


def _head(tokens: array, boundary: int) -> int:
    return int.from_bytes(
        hashlib.blake2b(memoryview(tokens)[:boundary].tobytes(), digest_size=8).digest(), "little"
    )


class PlacementIndex:
    """Holders per (boundary, head hash); ``ttl`` seconds."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.keys: dict[tuple[int, int], list[list]] = {}  # key -> [[instance, last touch]]

    def heads(self, tokens: array, boundaries: Sequence[int]) -> list[tuple[int, int]]:
        """The keys of ``tokens`` at every boundary that fits (ascending)."""
        return [(b, _head(tokens, b)) for b in boundaries if b <= len(tokens)]

    def live_holder(
        self, key: tuple[int, int], now: float, eligible: set[int], load: Callable[[int], int]
    ) -> int | None:
        """The least loaded live eligible holder of ``key`` (ties: lower index), pruning the
        expired ones; None when there is none."""
        holders = self.keys.get(key)
        if holders is None:
            return None
        holders[:] = [h for h in holders if now - h[1] <= self.ttl]
        live = [h[0] for h in holders if h[0] in eligible]
        return min(live, key=lambda i: (load(i), i)) if live else None

    def record(self, keys: Sequence[tuple[int, int]], instance: int, now: float) -> None:
        """Record or touch ``instance`` at every key."""
        for key in keys:
            holders = self.keys.setdefault(key, [])
            holders[:] = [h for h in holders if now - h[1] <= self.ttl]
            mine = next((h for h in holders if h[0] == instance), None)
            if mine is not None:
                mine[1] = now
                continue
            if len(holders) >= HOLDER_CAP:
                stalest = min(range(len(holders)), key=lambda j: holders[j][1])
                holders[stalest] = holders[-1]  # swap_remove
                holders.pop()
            holders.append([instance, now])

    def sweep(self, now: float) -> None:
        """Drop expired holders and keys left without one."""
        for key in list(self.keys):
            holders = [h for h in self.keys[key] if now - h[1] <= self.ttl]
            if holders:
                self.keys[key] = holders
            else:
                del self.keys[key]
