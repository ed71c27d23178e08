"""KV-slot allocator and request-to-token table.

``TokenToKVPoolAllocator`` mirrors ``TokenToKVPoolAllocator`` of sglang 0.5.23
(``sglang/srt/mem_cache/allocator/token.py``, with ``need_sort`` off as outside PD
disaggregation). ``ReqToTokenPool`` follows ``ReqToTokenPool`` of sglang 0.5.23
(``sglang/srt/mem_cache/memory_pool.py``): rows are taken from the tail of the free list (LIFO,
PR #32208), one row per call. Slot 0 and row 0 are reserved as padding, as in
sglang 0.5.23, so a real KV slot index is never 0.

Checks: sglang 0.5.23 checks nothing on ``alloc`` / ``free`` of KV slots (the paged allocator
looks for duplicate free pages under ``SGLANG_DEBUG_MEMORY_POOL``); neither does radixbench
unless ``debug`` is on (constructor argument, default from the environment variable
``RADIXBENCH_DEBUG_KV_POOL``), so ``free`` makes no device-to-host synchronisation. Double frees
are still found: the free mask ``is_free`` (read by ``check_integrity``, the simulator's KV
accounting and the tests) is rebuilt from the free list and raises ``DoubleFreeError`` when a
slot is in it twice or outside the pool. With ``debug`` on, ``free`` itself raises (and frees
nothing) on a double free, a slot out of range or repeated within one call, and the mask is
kept up to date on every call (three synchronisations per ``free`` on a GPU).
"""

from __future__ import annotations

import os

import numpy as np
import torch

#: Environment variable that turns the allocators' ``debug`` checks on by default ("1").
DEBUG_ENV = "RADIXBENCH_DEBUG_KV_POOL"


class DoubleFreeError(ValueError):
    """A KV slot or request row was freed while already free."""


def debug_default() -> bool:
    """Whether ``RADIXBENCH_DEBUG_KV_POOL`` asks for the allocators' debug checks (1, true,
    yes or on)."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class TokenToKVPoolAllocator:
    """Free KV slots (one slot = one token's KV) held as int64 device tensors.

    The free list is one tensor whose first ``_head`` entries are already handed out, plus a
    release list of the tensors given to ``free`` since the last merge. ``alloc`` takes a view of
    the next ``need`` entries (one slice; sglang 0.5.23 takes two); ``free`` appends the returned
    tensor to the release list (no copy, no device op; 0.5.23 concatenates it behind
    ``free_pages`` at once, a copy of the whole free list), and the release list is concatenated
    behind the free list only when an ``alloc`` needs it. Slots come out in the order of
    sglang 0.5.23 with ``need_sort`` off (with it on, 0.5.23 parks them in ``release_pages``
    and sorts on the merge, ``merge_and_sort_free``; not mirrored).

    Ownership: ``free`` keeps the tensor it is given (int64 on the pool's device; any other
    dtype or device is converted, which copies) until the next merge, as sglang 0.5.23's tree
    keeps the value tensors given to ``insert``: the caller must not write into it afterwards
    (free a ``.clone()`` of a buffer that will be reused). With ``debug`` on, ``free`` keeps a
    copy and the merge raises ``ValueError`` if a freed tensor was written to.

    ``debug``: ``None`` takes ``RADIXBENCH_DEBUG_KV_POOL``; ``check_repeats`` is its older name
    (same meaning; kept for callers that pass it).
    """

    _list: torch.Tensor  # the free list; entries [_head:] are free
    _head: int
    _n_list: int  # _list.numel(), on the host
    _released: list[torch.Tensor]  # freed since the last merge, in order
    _released_n: int
    _mask: torch.Tensor | None  # is_free, None until rebuilt (debug: always kept)

    def __init__(
        self,
        size: int,
        device: torch.device | str = "cpu",
        debug: bool | None = None,
        *,
        check_repeats: bool | None = None,
    ) -> None:
        if size <= 0:
            raise ValueError(f"KV pool size must be positive, got {size}")
        self.size = size
        # Canonical device (cuda -> cuda:N) so free's device test is a plain comparison.
        self.device = torch.empty(0, device=device).device
        if debug is None:
            debug = check_repeats if check_repeats is not None else debug_default()
        self.debug = bool(debug)
        self.clear()

    @property
    def check_repeats(self) -> bool:
        """Older name of ``debug``."""
        return self.debug

    # ------------------------------------------------------------------ free list
    def _reset(self, free: torch.Tensor) -> None:
        self._list = free
        self._head = 0
        self._n_list = int(free.numel())
        self._released = []
        self._released_n = 0
        self._watch: list[tuple[torch.Tensor, torch.Tensor]] = []  # debug: (given, copy kept)
        self._mask = None
        if self.debug:
            self._mask = self._build_mask()

    def clear(self) -> None:
        """Mark every slot 1..size free, in order (mutates the free list, the release list and
        the mask). Mirrors ``TokenToKVPoolAllocator.clear`` of sglang 0.5.23."""
        self._reset(torch.arange(1, self.size + 1, dtype=torch.int64, device=self.device))

    def available_size(self) -> int:
        """Free slots (tokens); host integers only. Mirrors ``available_size`` of sglang 0.5.23
        (``len(free_pages) + len(release_pages)``)."""
        return self._n_list - self._head + self._released_n

    def free_list(self) -> torch.Tensor:
        """The free entries in the order ``alloc`` hands them out (slots here, pages in the
        paged allocator): a new int64 tensor ``[n]`` on the device. Mutates nothing."""
        return torch.cat([self._list[self._head :], *self._released])

    def _merge(self) -> None:
        """Concatenate the release list behind the free list (one ``torch.cat``)."""
        if self._watch:
            self._check_watch()
        self._list = torch.cat([self._list[self._head :], *self._released])
        self._head = 0
        self._n_list = int(self._list.numel())
        self._released = []
        self._released_n = 0

    def _check_watch(self) -> None:
        """Debug: every tensor given to ``free`` still holds what it held then."""
        watch, self._watch = self._watch, []
        for given, kept in watch:
            if not torch.equal(given, kept):
                raise ValueError(
                    "a tensor given to free() was written to afterwards; without debug the "
                    "KV pool would have changed with it (free a .clone() instead)"
                )

    @property
    def is_free(self) -> torch.Tensor:
        """Bool mask ``[size + 1]`` (paged: ``[(num_pages + 1) * page_size]``) on the device,
        True for each free slot; read only. With ``debug`` it is kept up to date by every
        call; otherwise it is rebuilt from the free list on the first read after a change (the
        release list merged into the free list, as ``alloc`` does when it runs short, which
        changes no allocation; then one scatter: O(pool)). Raises ``DoubleFreeError`` if the free
        list holds a slot twice or one outside the pool (a double free, or a bad ``free`` that
        is not checked without ``debug``)."""
        if self._mask is None:
            self._mask = self._build_mask()
        return self._mask

    def _build_mask(self) -> torch.Tensor:
        if self._released:
            self._merge()  # one cat, as alloc would do; keeps later rebuilds O(pool)
        return _mask_of(self._list[self._head :], self.size, 1, "KV slot")

    # ------------------------------------------------------------------ alloc / free
    def alloc(self, need: int) -> torch.Tensor | None:
        """Take ``need`` slots: int64 tensor ``[need]`` on the device (a view of the free list:
        writing into it is harmless), or ``None`` (nothing taken) when fewer are free. The caller
        evicts first (sglang 0.5.23 ``alloc_token_slots``: ``evict_from_tree_cache``, then
        ``alloc``, an error on ``None``). Mutates the free list (and, only when it runs short,
        merges the release list into it), and with ``debug`` the mask. Raises ``ValueError`` for
        a negative ``need``. Mirrors ``TokenToKVPoolAllocator.alloc`` of sglang 0.5.23."""
        if need < 0:
            raise ValueError(f"alloc: need must be >= 0, got {need}")
        head = self._head
        end = head + need
        if end > self._n_list:
            if need > self._n_list - head + self._released_n:
                return None
            self._merge()
            head, end = 0, need
        self._head = end
        out = self._list[head:end]
        if self.debug:
            self.is_free[out] = False
        else:
            self._mask = None
        return out

    def free(self, indices: torch.Tensor) -> None:
        """Return slots (int tensor, any shape, ``n`` elements) to the pool, behind every free
        slot (mirrors ``TokenToKVPoolAllocator.free`` of sglang 0.5.23 with ``need_sort`` off).

        Mutates the release list (keeps ``indices`` itself when it is int64 on the device: see
        Ownership in the class docstring) and drops the cached mask; no device op, no
        synchronisation. With ``debug``: raises ``DoubleFreeError`` (and frees nothing) if any
        slot is already free, out of range or repeated within ``indices``, keeps a copy and
        updates the mask.
        """
        n = indices.numel()
        if n == 0:
            return
        if indices.dtype is not torch.int64 or indices.device != self.device:
            indices = indices.to(device=self.device, dtype=torch.int64)
        if indices.dim() != 1:
            indices = indices.reshape(-1)
        if self.debug:
            self._debug_free(indices)
            return
        self._released.append(indices)
        self._released_n += n
        self._mask = None

    def _debug_free(self, idx: torch.Tensor) -> None:
        mask = self.is_free
        lo, hi = torch.aminmax(idx)
        if int(lo) < 1 or int(hi) > self.size:
            raise DoubleFreeError(f"KV slot out of range 1..{self.size}: {idx.tolist()[:8]}")
        if bool(mask[idx].any()):
            raise DoubleFreeError(f"double free of KV slots {idx[mask[idx]].tolist()[:8]}")
        if idx.numel() > 1:
            s = torch.sort(idx).values
            if bool((s[1:] == s[:-1]).any()):
                raise DoubleFreeError("KV slots repeated within one free() call")
        kept = idx.clone()
        self._watch.append((idx, kept))
        mask[kept] = True
        self._released.append(kept)
        self._released_n += kept.numel()


def unique_pages_np(slots: np.ndarray, page_size: int) -> np.ndarray:
    """int64 ``[k]``: the pages holding ``slots`` (numpy int64, any shape, not mutated), each
    once, ascending: ``torch.unique(slots // page_size)`` (sglang 0.5.23's paged ``free``)
    computed in numpy. Runs of one page (a request's slots come page by page) are cut to one
    entry before what is left is sorted and its repeats dropped, so freeing a request sorts
    ~1/page_size of its slots (``np.unique``'s hash path costs 4x a sort here, torch's
    ``unique`` 2x). Returns a new array; mutates nothing."""
    q = slots.reshape(-1) // page_size
    if q.size < 2:
        return q.copy()
    return _drop_runs(np.sort(_drop_runs(q)))


def _drop_runs(q: np.ndarray) -> np.ndarray:
    """``q`` (1-D, at least one value) with each run of equal neighbours cut to its first."""
    return q[np.concatenate(([True], q[1:] != q[:-1]))]


def unique_pages(slots: torch.Tensor, page_size: int) -> torch.Tensor:
    """int64 ``[k]`` on ``slots``' device: ``torch.unique(slots // page_size)`` (sorted), by
    :func:`unique_pages_np` for an int64 tensor on the CPU. Mutates nothing."""
    if slots.device.type == "cpu" and slots.dtype is torch.int64:
        return torch.from_numpy(unique_pages_np(slots.numpy(), page_size))
    return torch.unique(slots.to(torch.int64) // page_size)


def _mask_of(free: torch.Tensor, top: int, unit: int, what: str) -> torch.Tensor:
    """Bool mask ``[(top + 1) * unit]``: True on every slot of the free entries ``free`` (int64
    ``[n]``, each in 1..top; ``unit`` slots per entry). Raises ``DoubleFreeError`` if an entry is
    out of range or listed twice."""
    mask = torch.zeros((top + 1, unit), dtype=torch.bool, device=free.device)
    if free.numel():
        lo, hi = torch.aminmax(free)
        if int(lo) < 1 or int(hi) > top:
            raise DoubleFreeError(
                f"free list holds a {what} outside 1..{top} (min {int(lo)}, max {int(hi)})"
            )
        mask[free] = True
        if int(mask[:, 0].sum()) != free.numel():
            twice = (torch.bincount(free) > 1).nonzero().flatten().tolist()[:8]
            raise DoubleFreeError(f"double free: {what}s in the free list twice: {twice}")
    return mask.view(-1)


class ReqToTokenPool:
    """Per-request rows of KV-slot indices: ``req_to_token`` int32 ``[max_reqs + 1,
    max_context_len]`` on the device; row 0 is padding. ``req_to_token[r, i]`` is the KV slot of
    token ``i`` of the request holding row ``r``.

    Zero-filled as sglang 0.5.23's ``torch.zeros``; on the CPU the zeros come from ``calloc``
    (``numpy.zeros``, shared with the tensor): the OS maps the pages on their first write, so
    a table of 64 rows x 128k tokens (32 MiB) costs resident memory only for the pages that
    requests write (each row up to its longest request), which matters with one table per
    instance.
    """

    def __init__(self, max_reqs: int, max_context_len: int, device: torch.device | str = "cpu"):
        if max_reqs <= 0 or max_context_len <= 0:
            raise ValueError(
                f"max_reqs and max_context_len must be positive, got {max_reqs}, {max_context_len}"
            )
        self.max_reqs = max_reqs
        self.max_context_len = max_context_len
        self.device = torch.device(device)
        shape = (max_reqs + 1, max_context_len)
        if self.device.type == "cpu":
            self.req_to_token = torch.from_numpy(np.zeros(shape, dtype=np.int32))
        else:
            self.req_to_token = torch.zeros(shape, dtype=torch.int32, device=self.device)
        self.free_rows: list[int] = list(range(1, max_reqs + 1))
        self._is_free = [False] + [True] * max_reqs

    def available_size(self) -> int:
        """Free rows (requests)."""
        return len(self.free_rows)

    def alloc(self) -> int | None:
        """Take the last row of the free list, or ``None`` when all are in use: the list starts
        as rows 1..max_reqs and ``free`` appends to its back, so the row freed last is taken
        first (LIFO), as sglang 0.5.23's ``ReqToTokenPool.alloc_rows`` pops ``free_slots`` from
        the tail (``mem_cache/memory_pool.py``, PR #32208). A light load thus keeps reusing a
        few rows and the table's other rows are never written (no resident memory)."""
        if not self.free_rows:
            return None
        row = self.free_rows.pop()
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
