"""The storage (L3) tier: which pages a backend holds, by key.

sglang 0.5.23's no-IO storage simulator (``mem_cache/storage/sim_storage.py``) keeps the *keys*
of the pages written and nothing else: ``batch_exists(keys)`` is the number of leading keys
present (``:153-164``), a write adds its keys (``:131-137``), a read of a present key
succeeds. Its timing (``bytes / bandwidth + op latency`` per batch call) is the simulator's
(``radixbench.sim.transfers``). Storage is unbounded, as there.

Page keys: sglang chains a SHA-256 over each page's tokens and the previous page's key
(``mem_cache/utils.py:116-164``, ``get_hash_str`` with the native hasher of
``cpp_utils/native_hash.py``), seeded by the request's namespace. radixbench's tiered cache
chains Python's tuple hash the same way (:func:`page_keys`): equal token prefixes in one
namespace give equal keys, and a page's key depends on every token before it, which is all
the tree relies on (sglang's own tree, driven by radixbench, keeps sglang's keys).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = ["STORAGE_BATCH_PAGES", "SimStorage", "page_keys"]

#: Pages per storage call (``STORAGE_BATCH_SIZE``, ``mem_cache/hicache_storage.py:24``).
STORAGE_BATCH_PAGES = 128


def page_keys(
    tokens: Sequence[int], page_size: int, prior: Any = None, namespace: Any = None
) -> list[int]:
    """One key per whole page of ``tokens``: ``hash((previous key, page tokens))``, the first
    chained from ``prior`` (the parent's last key) or from ``namespace`` (a new chain)."""
    if prior is None:
        seed = hashlib.sha256(f"radixbench-l3:{namespace!r}".encode()).digest()
        prior = int.from_bytes(seed[:8], "little")
    last = prior
    out = []
    for i in range(0, len(tokens) // page_size * page_size, page_size):
        last = hash((last, tuple(tokens[i : i + page_size])))
        out.append(last)
    return out


class SimStorage:
    """A key set (module docstring). ``name``: the backend's name."""

    def __init__(self, name: str = "sim") -> None:
        self.name = name
        self.keys: set[Any] = set()

    def exists_prefix(self, keys: Sequence[Any]) -> int:
        """Leading ``keys`` present (``batch_exists``)."""
        for i, k in enumerate(keys):
            if k not in self.keys:
                return i
        return len(keys)

    def store(self, keys: Sequence[Any]) -> None:
        self.keys.update(keys)

    def clear(self) -> None:
        self.keys.clear()

    def get_stats(self) -> None:
        return None
