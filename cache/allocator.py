"""KV-slot allocator and request-to-token table.

``TokenToKVPoolAllocator`` mirrors ``TokenToKVPoolAllocator`` of sglang 0.5.23
(``sglang/srt/mem_cache/allocator/token.py``, with ``need_sort`` off as outside PD
disaggregation). ``ReqToTokenPool`` follows ``ReqToTokenPool`` of SGLang before PR #32208
(``sglang/srt/mem_cache/memory_pool.py``): rows are taken from the head of the free list, where
sglang 0.5.23 takes them from its tail. Slot 0 and row 0 are reserved as padding, as in
sglang 0.5.23, so a real KV slot index is never 0. The double-free checks are radixbench's own
(0.5.23 asserts only that a freed request holds a row, and checks for duplicate free pages in
the paged allocator under ``SGLANG_DEBUG_MEMORY_POOL``).
"""

from __future__ import annotations

import torch


class DoubleFreeError(ValueError):
    """A KV slot or request row was freed while already free."""


class TokenToKVPoolAllocator:
    """Free KV slots (one slot = one token's KV) held as int64 device tensors.

    ``alloc`` takes slots from the front of ``free_slots``; ``free`` appends the returned slots to
    a release list that is concatenated behind ``free_slots`` only when an ``alloc`` needs them,
    so ``free`` is O(n) in the slots returned, not in the pool. Slots come out in the order of
    sglang 0.5.23 with ``need_sort`` off, whose ``free`` concatenates them behind ``free_pages``
    at once (with ``need_sort`` on it parks them in ``release_pages`` and sorts on the merge,
    ``merge_and_sort_free``; not mirrored). A bool mask ``[size + 1]`` on the device tracks
    which slots are free and makes double frees raise instead of corrupting the pool.
    ``check_repeats`` also rejects a slot repeated within one ``free`` call (a sort per call: on
    by default, off in the simulator, whose tree is checked by ``check_integrity`` in the tests
    instead, so evict timings measure the evictor).
    """

    def __init__(
        self, size: int, device: torch.device | str = "cpu", check_repeats: bool = True
    ) -> None:
        if size <= 0:
            raise ValueError(f"KV pool size must be positive, got {size}")
        self.size = size
        self.check_repeats = check_repeats
        self.device = torch.device(device)
        self.clear()

    def clear(self) -> None:
        """Mark every slot 1..size free (mutates ``free_slots``, the release list, the mask)."""
        self.free_slots = torch.arange(1, self.size + 1, dtype=torch.int64, device=self.device)
        self._released: list[torch.Tensor] = []
        self._released_n = 0
        self.is_free = torch.ones(self.size + 1, dtype=torch.bool, device=self.device)
        self.is_free[0] = False

    def available_size(self) -> int:
        """Free slots (tokens)."""
        return int(self.free_slots.numel()) + self._released_n

    def _merge(self) -> None:
        self.free_slots = torch.cat([self.free_slots, *self._released])
        self._released = []
        self._released_n = 0

    def alloc(self, need: int) -> torch.Tensor | None:
        """Take ``need`` slots: int64 tensor ``[need]`` on the device, or ``None`` (nothing taken)
        when fewer are free. The caller evicts first (sglang 0.5.23 ``alloc_token_slots``:
        ``evict_from_tree_cache``, then ``alloc``, an error on ``None``).
        Raises ``ValueError`` for a negative ``need``."""
        if need < 0:
            raise ValueError(f"alloc: need must be >= 0, got {need}")
        if need > self.free_slots.numel():
            if need > self.available_size():
                return None
            self._merge()
        select = self.free_slots[:need]
        self.free_slots = self.free_slots[need:]
        self.is_free[select] = False
        return select

    def free(self, indices: torch.Tensor) -> None:
        """Return slots (int tensor ``[n]``) to the pool.

        Raises ``DoubleFreeError`` (and frees nothing) if any slot is already free or out of
        range, or (with ``check_repeats``) repeated within ``indices``.
        """
        if indices.numel() == 0:
            return
        # A copy: the pool must not alias a tensor the caller may change later.
        idx = indices.to(device=self.device, dtype=torch.int64, copy=True).reshape(-1)
        lo, hi = torch.aminmax(idx)
        if int(lo) < 1 or int(hi) > self.size:
            raise DoubleFreeError(f"KV slot out of range 1..{self.size}: {idx.tolist()[:8]}")
        if bool(self.is_free[idx].any()):
            bad = idx[self.is_free[idx]].tolist()[:8]
            raise DoubleFreeError(f"double free of KV slots {bad}")
        if self.check_repeats and self._has_repeats(idx):
            raise DoubleFreeError("KV slots repeated within one free() call")
        self.is_free[idx] = True
        self._released.append(idx)
        self._released_n += idx.numel()

    @staticmethod
    def _has_repeats(idx: torch.Tensor) -> bool:
        if idx.numel() < 2:
            return False
        s = torch.sort(idx).values
        return bool((s[1:] == s[:-1]).any())


class ReqToTokenPool:
    """Per-request rows of KV-slot indices: ``req_to_token`` int32 ``[max_reqs + 1,
    max_context_len]`` on the device; row 0 is padding. ``req_to_token[r, i]`` is the KV slot of
    token ``i`` of the request holding row ``r``."""

    def __init__(self, max_reqs: int, max_context_len: int, device: torch.device | str = "cpu"):
        if max_reqs <= 0 or max_context_len <= 0:
            raise ValueError(
                f"max_reqs and max_context_len must be positive, got {max_reqs}, {max_context_len}"
            )
        self.max_reqs = max_reqs
        self.max_context_len = max_context_len
        self.device = torch.device(device)
        self.req_to_token = torch.zeros(
            (max_reqs + 1, max_context_len), dtype=torch.int32, device=self.device
        )
        self.free_rows: list[int] = list(range(1, max_reqs + 1))
        self._is_free = [False] + [True] * max_reqs

    def available_size(self) -> int:
        """Free rows (requests)."""
        return len(self.free_rows)

    def alloc(self) -> int | None:
        """Take the first row of the free list, or ``None`` when all are in use. The list is FIFO:
        rows start in order 1..max_reqs and ``free`` appends to its back, as in SGLang before
        PR #32208 (sglang 0.5.23 ``alloc_rows`` pops from the back: LIFO)."""
        if not self.free_rows:
            return None
        row = self.free_rows.pop(0)
        self._is_free[row] = False
        return row

    def free(self, row: int) -> None:
        """Return a row; raises ``DoubleFreeError`` if it is already free or out of range."""
        if not 1 <= row <= self.max_reqs or self._is_free[row]:
            raise DoubleFreeError(f"request row {row} is free or out of range 1..{self.max_reqs}")
        self._is_free[row] = True
        self.free_rows.append(row)

    def write(self, row: int, start: int, values: torch.Tensor) -> None:
        """``req_to_token[row, start:start+len(values)] = values`` (cast to int32)."""
        self.req_to_token[row, start : start + values.numel()] = values
