"""Page-granular KV-slot allocator, used whenever ``page_size > 1``.

Mirrors ``PagedTokenToKVPoolAllocator`` of sglang 0.5.23
(``sglang/srt/mem_cache/allocator/paged.py``): the pool is ``size // page_size`` pages numbered
1..num_pages (page 0 is padding); page ``p`` holds KV slots ``p * page_size .. p * page_size +
page_size - 1``. Besides whole-page ``alloc``, ``alloc_extend`` / ``alloc_decode`` hand out slots
that continue each request's partly filled last page before taking new pages from the front of
the free list in request order (0.5.23's triton ``alloc_extend_kernel`` / ``alloc_decode_kernel``
and their torch fallbacks ``alloc_extend_naive`` / ``alloc_decode_naive``; written here with torch
ops on the device). One difference stays on purpose: freed pages go to the *back* of the free
list, where 0.5.23 puts them at the front (``_release_page_ids`` with ``need_sort`` off; with it
on, they are staged and sorted on the merge), so the page numbers a request gets differ, not how
many or when (see docs/SGLANG-FIDELITY.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from radixbench.cache.allocator import (
    DoubleFreeError,
    TokenToKVPoolAllocator,
    _mask_of,
    unique_pages,
)


class PagedTokenToKVPoolAllocator(TokenToKVPoolAllocator):
    """Allocates and frees whole pages; slot indices are returned as int64 device tensors.

    ``alloc(need)`` takes ``need / page_size`` pages from the front of the free-page list
    (``need`` must be a multiple of ``page_size``: ``ValueError`` otherwise; 0.5.23 asserts it
    only under ``SGLANG_DEBUG_MEMORY_POOL``); ``free(indices)`` returns every page that any of
    ``indices`` lies in (0.5.23 ``free``: ``torch.unique(free_index // page_size)``), appended to
    a release list merged on demand (0.5.23 prepends them to ``free_pages``), so the allocation
    order is deterministic and FIFO. The free list, the release list, ownership and the lazily
    rebuilt ``is_free`` mask (per slot, ``[(num_pages + 1) * page_size]``) work as in
    :class:`TokenToKVPoolAllocator`, with pages for slots. ``size`` is the capacity in tokens
    (``num_pages * page_size``). ``debug`` (default ``RADIXBENCH_DEBUG_KV_POOL``; older name
    ``check_repeats``) makes ``free`` raise ``DoubleFreeError`` (freeing nothing) for a page
    already free or out of range, keeps the mask up to date on every call, and turns on the
    checks 0.5.23 makes under ``SGLANG_DEBUG_MEMORY_POOL`` in ``alloc_extend`` /
    ``alloc_decode`` (each ``last_loc`` continues its page) and one of ours: ``last_loc`` lies in
    a page that is allocated.
    """

    _head: int  # (declared again for mypy, which sees the base class as Any here)

    def __init__(
        self,
        size: int,
        page_size: int,
        device: torch.device | str = "cpu",
        debug: bool | None = None,
        *,
        check_repeats: bool | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        if size < page_size:
            raise ValueError(f"KV pool of {size} tokens holds no page of {page_size}")
        self.page_size = page_size
        self.num_pages = size // page_size
        super().__init__(self.num_pages * page_size, device, debug, check_repeats=check_repeats)

    def clear(self) -> None:
        """Mark every page 1..num_pages free, in order (mutates the free-page list, the release
        list and the mask). Mirrors ``PagedTokenToKVPoolAllocator.clear`` of sglang 0.5.23."""
        self._offsets = torch.arange(self.page_size, dtype=torch.int64, device=self.device)
        self._reset(torch.arange(1, self.num_pages + 1, dtype=torch.int64, device=self.device))

    def available_size(self) -> int:
        """Free tokens (whole free pages x page_size); host integers only. Mirrors
        ``PagedTokenToKVPoolAllocator.available_size`` of sglang 0.5.23."""
        return (self._n_list - self._head + self._released_n) * self.page_size

    def _build_mask(self) -> torch.Tensor:
        if self._released:
            self._merge()  # one cat, as alloc would do; keeps later rebuilds O(pool)
        return _mask_of(self._list[self._head :], self.num_pages, self.page_size, "KV page")

    def _take_pages(self, n_pages: int) -> torch.Tensor | None:
        """Take ``n_pages`` pages from the front of the free list (merging the release list
        when needed): int64 ``[n_pages]`` page numbers (a view of the free list), or ``None``
        (nothing taken) when fewer are free. Mutates the free list; with ``debug`` marks the
        pages' slots used in the mask."""
        head = self._head
        end = head + n_pages
        if end > self._n_list:
            if n_pages > self._n_list - head + self._released_n:
                return None
            self._merge()
            head, end = 0, n_pages
        self._head = end
        pages = self._list[head:end]
        if self.debug:
            self.is_free.view(-1, self.page_size)[pages] = False
        else:
            self._mask = None
        return pages

    def alloc(self, need: int) -> torch.Tensor | None:
        """Take ``need`` tokens of whole pages: int64 ``[need]`` slot indices, or ``None``
        (nothing taken) when too few pages are free. Mutates the free list (see ``_take_pages``).
        Raises ``ValueError`` for a negative ``need`` or one that is not a multiple of
        ``page_size``. Mirrors ``PagedTokenToKVPoolAllocator.alloc`` of sglang 0.5.23 (which
        builds ``torch.arange(page_size)`` on every call; here it is built once)."""
        if need < 0 or need % self.page_size:
            raise ValueError(f"alloc: need {need} is not a non-negative multiple of page size")
        pages = self._take_pages(need // self.page_size)
        if pages is None:
            return None
        return (pages[:, None] * self.page_size + self._offsets).reshape(-1)

    def _check_continues(self, slots: torch.Tensor, what: str) -> None:
        """Slots a request writes into its own last page must already be allocated."""
        if slots.numel() and bool(self.is_free[slots].any()):
            raise ValueError(f"{what}: last_loc points into a free page")

    def alloc_extend(
        self,
        prefix_lens: torch.Tensor,
        seq_lens: torch.Tensor,
        last_loc: torch.Tensor,
        extend_num_tokens: int,
    ) -> torch.Tensor | None:
        """KV slots of one extend (prefill) batch, request by request.

        ``prefix_lens`` / ``seq_lens``: int ``[bs]`` tokens of each request with KV before / after
        this step; ``last_loc``: int ``[bs]`` KV slot of each request's last prefix token (-1
        when its prefix is empty); ``extend_num_tokens`` = ``sum(seq_lens - prefix_lens)``.
        Request ``i``'s new tokens first fill the rest of the page holding ``last_loc[i]``
        (slots ``last_loc[i] + 1, ...``), then take ``ceil(seq/ps) - ceil(prefix/ps)`` new pages
        from the front of the free list in request order, the last one possibly partly used.
        Returns int64 ``[extend_num_tokens]`` slots on the device in request order, or ``None``
        (nothing taken) when too few pages are free. Mutates the free list and ``is_free``.
        Raises ``ValueError`` (taking nothing) on mismatched shapes, ``seq < prefix``, a wrong
        ``extend_num_tokens`` and, with ``debug``, a ``last_loc`` that does not continue
        its page (``(last_loc + 1) % ps != prefix % ps``, 0.5.23's debug assert) or lies in a
        free page.
        Mirrors ``PagedTokenToKVPoolAllocator.alloc_extend`` / ``alloc_extend_naive`` of
        sglang 0.5.23 (``sglang/srt/mem_cache/allocator/paged.py``).
        """
        if self.device.type == "cpu":
            pre, seq, last = (
                t.to(dtype=torch.int64).reshape(-1).numpy()
                for t in (prefix_lens, seq_lens, last_loc)
            )
            out_np = self.alloc_extend_np(pre, seq, last, extend_num_tokens)
            return None if out_np is None else torch.from_numpy(out_np)
        return self._alloc_extend_torch(prefix_lens, seq_lens, last_loc, extend_num_tokens)

    def _alloc_extend_torch(
        self,
        prefix_lens: torch.Tensor,
        seq_lens: torch.Tensor,
        last_loc: torch.Tensor,
        extend_num_tokens: int,
    ) -> torch.Tensor | None:
        """:meth:`alloc_extend` in torch ops on the pool's device (the path off the CPU)."""
        ps, dev = self.page_size, self.device
        pre = prefix_lens.to(device=dev, dtype=torch.int64).reshape(-1)
        seq = seq_lens.to(device=dev, dtype=torch.int64).reshape(-1)
        last = last_loc.to(device=dev, dtype=torch.int64).reshape(-1)
        bs = pre.numel()
        if seq.numel() != bs or last.numel() != bs:
            raise ValueError("alloc_extend: prefix_lens, seq_lens, last_loc differ in length")
        ext = self._checked_extends(pre, seq, last, extend_num_tokens)
        debug = self.debug
        pages_before = (pre + ps - 1) // ps
        n_new = (seq + ps - 1) // ps - pages_before
        total = extend_num_tokens
        req = torch.repeat_interleave(torch.arange(bs, device=dev), ext, output_size=total)
        start = torch.cumsum(ext, 0) - ext
        pre_t = pre[req]
        pos = torch.arange(total, device=dev) - start[req] + pre_t  # position in its request
        first_new = (pages_before * ps)[req]  # where the request's new pages begin
        in_old = pos < first_new
        out = torch.empty(total, dtype=torch.int64, device=dev)
        out[in_old] = (last[req] + 1 + pos - pre_t)[in_old]
        if debug:
            self._check_continues(out[in_old], "alloc_extend")
        pages = self._take_pages(int(n_new.sum()))
        if pages is None:
            return None
        new = ~in_old
        page_start = (torch.cumsum(n_new, 0) - n_new)[req]
        k = (pos - first_new) // ps + page_start
        out[new] = pages[k[new]] * ps + pos[new] % ps
        return out

    def _checked_extends(self, pre: Any, seq: Any, last: Any, extend_num_tokens: int) -> Any:
        """``seq - pre`` after :meth:`alloc_extend`'s input checks (ValueError), on int64
        ``[bs]`` torch tensors or numpy arrays alike (the torch and numpy paths share them)."""
        ext = seq - pre
        bs = len(pre)
        if bs and bool((ext < 0).any()):
            raise ValueError("alloc_extend: a seq_len is shorter than its prefix_len")
        if int(ext.sum()) != extend_num_tokens:
            raise ValueError(
                f"alloc_extend: extend_num_tokens {extend_num_tokens} != sum of extends "
                f"{int(ext.sum())}"
            )
        ps = self.page_size
        if self.debug and bs and bool(((pre > 0) & ((last + 1) % ps != pre % ps)).any()):
            raise ValueError("alloc_extend: last_loc does not continue its request's page")
        return ext

    def alloc_extend_np(
        self, pre: np.ndarray, seq: np.ndarray, last: np.ndarray, extend_num_tokens: int
    ) -> np.ndarray | None:
        """:meth:`alloc_extend` of a CPU pool on numpy int64 ``[bs]`` arrays (not mutated):
        the same slots, checks and mutations, computed per run of contiguous slots rather than
        per token: request ``i``'s slots are one run continuing its last page (``last + 1``,
        ``min(seq, ceil(pre / ps) * ps) - pre`` slots), then one run per new page (``page *
        ps``, ``ps`` slots, its last page ``seq - (ceil(seq / ps) - 1) * ps``); the runs are
        laid out in request order and expanded in one pass (``np.repeat`` of each run's start
        less its output offset, plus ``arange``). Returns a new int64 array, or ``None``."""
        if self.device.type != "cpu":
            raise RuntimeError("alloc_extend_np: the pool is not on the CPU")
        ps = self.page_size
        bs = pre.size
        if seq.size != bs or last.size != bs:
            raise ValueError("alloc_extend: prefix_lens, seq_lens, last_loc differ in length")
        self._checked_extends(pre, seq, last, extend_num_tokens)
        pages_before = (pre + ps - 1) // ps
        pages_after = (seq + ps - 1) // ps
        n_new = pages_after - pages_before
        old = np.minimum(seq, pages_before * ps) - pre  # slots left in each request's page
        if self.debug:
            first = np.cumsum(old) - old
            held = np.repeat(last + 1 - first, old) + np.arange(int(old.sum()), dtype=np.int64)
            self._check_continues(torch.from_numpy(held), "alloc_extend")
        taken = self._take_pages(int(n_new.sum()))
        if taken is None:
            return None
        runs = n_new + 1  # each request: its old run (maybe empty), then one run per new page
        at_old = np.cumsum(runs) - runs
        starts = np.empty(int(runs.sum()), dtype=np.int64)
        lens = np.full(starts.size, ps, dtype=np.int64)
        starts[at_old], lens[at_old] = last + 1, old
        on_page = np.ones(starts.size, dtype=bool)
        on_page[at_old] = False
        starts[on_page] = taken.numpy() * ps
        ends = n_new > 0  # the last new page of a request may be partly filled
        lens[(at_old + n_new)[ends]] = (seq - (pages_after - 1) * ps)[ends]
        offsets = np.cumsum(lens) - lens
        return np.repeat(starts - offsets, lens) + np.arange(extend_num_tokens, dtype=np.int64)

    def alloc_decode(self, seq_lens: torch.Tensor, last_loc: torch.Tensor) -> torch.Tensor | None:
        """One KV slot per request for a decode step.

        ``seq_lens``: int ``[bs]`` tokens of each request with KV *including* the one decoded
        now; ``last_loc``: int ``[bs]`` slot of each request's last token with KV. A request
        whose new token starts a page (``(seq_len - 1) % ps == 0``) takes the next free page
        (in request order) and writes its first slot; the others write ``last_loc + 1``.
        Returns int64 ``[bs]`` on the device, or ``None`` (nothing taken) when too few pages
        are free. Mutates the free list and ``is_free``. Raises ``ValueError`` (taking nothing)
        on mismatched shapes and, with ``debug``, a ``last_loc`` inconsistent with
        ``seq_lens`` (``(last_loc + 2) % ps != seq_len % ps``) or in a free page.
        Mirrors ``PagedTokenToKVPoolAllocator.alloc_decode`` / ``alloc_decode_naive`` of
        sglang 0.5.23 (``sglang/srt/mem_cache/allocator/paged.py``).
        """
        if self.device.type == "cpu":
            out_np = self.alloc_decode_np(
                seq_lens.to(dtype=torch.int64).reshape(-1).numpy(),
                last_loc.to(dtype=torch.int64).reshape(-1).numpy(),
            )
            return None if out_np is None else torch.from_numpy(out_np)
        return self._alloc_decode_torch(seq_lens, last_loc)

    def _alloc_decode_torch(
        self, seq_lens: torch.Tensor, last_loc: torch.Tensor
    ) -> torch.Tensor | None:
        """:meth:`alloc_decode` in torch ops on the pool's device (the path off the CPU)."""
        ps, dev = self.page_size, self.device
        seq = seq_lens.to(device=dev, dtype=torch.int64).reshape(-1)
        last = last_loc.to(device=dev, dtype=torch.int64).reshape(-1)
        if seq.numel() != last.numel():
            raise ValueError("alloc_decode: seq_lens and last_loc differ in length")
        need = (seq - 1) % ps == 0
        out = last + 1
        if self.debug:
            if seq.numel() and bool(((last + 2) % ps != seq % ps).any()):
                raise ValueError("alloc_decode: last_loc does not match seq_lens")
            self._check_continues(out[~need], "alloc_decode")
        pages = self._take_pages(int(need.sum()))
        if pages is None:
            return None
        out[need] = pages * ps
        return out

    def alloc_decode_np(self, seq_lens: np.ndarray, last_loc: np.ndarray) -> np.ndarray | None:
        """:meth:`alloc_decode` of a CPU pool on numpy arrays (int64 ``[bs]`` each, not
        mutated): the same slots, checks and mutations, without a torch op per element-wise
        step (a decode step's batch is small: a torch op's dispatch costs more than its work).
        Returns a new int64 ``[bs]`` array, or ``None`` (nothing taken). Raises ``ValueError``
        as :meth:`alloc_decode`; ``RuntimeError`` on a pool not on the CPU."""
        if self.device.type != "cpu":
            raise RuntimeError("alloc_decode_np: the pool is not on the CPU")
        ps = self.page_size
        if seq_lens.shape != last_loc.shape:
            raise ValueError("alloc_decode: seq_lens and last_loc differ in length")
        out = last_loc + 1
        need = (seq_lens - 1) % ps == 0
        if self.debug:
            if seq_lens.size and bool(((last_loc + 2) % ps != seq_lens % ps).any()):
                raise ValueError("alloc_decode: last_loc does not match seq_lens")
            self._check_continues(torch.from_numpy(out[~need]), "alloc_decode")
        n = int(np.count_nonzero(need))
        if n:
            pages = self._take_pages(n)
            if pages is None:
                return None
            out[need] = pages.numpy() * ps
        return out

    def free(self, indices: torch.Tensor) -> None:
        """Return the pages of slots ``indices`` (int tensor, any shape) to the pool: each page
        once, in ascending order, behind every free page.

        Mirrors ``PagedTokenToKVPoolAllocator.free`` of sglang 0.5.23 (``torch.unique(free_index
        // page_size)``, whose result size is the one device-to-host synchronisation on a GPU,
        as in 0.5.23; 0.5.23 then concatenates the pages in front of ``free_pages``, here they
        are appended to the release list). Mutates the release list and drops the cached mask.
        With ``debug``: raises ``DoubleFreeError`` (freeing nothing) if a slot lies outside pages
        1..num_pages or in a page that is already free, and updates the mask."""
        if indices.numel() == 0:
            return
        if indices.dtype is not torch.int64 or indices.device != self.device:
            indices = indices.to(device=self.device, dtype=torch.int64)
        pages = unique_pages(indices, self.page_size)  # numpy on a CPU pool (same pages)
        if self.debug:
            self._debug_free_pages(pages)
            return
        self._released.append(pages)
        self._released_n += pages.numel()
        self._mask = None

    def _debug_free_pages(self, pages: torch.Tensor) -> None:
        lo, hi = int(pages[0]), int(pages[-1])
        if lo < 1 or hi > self.num_pages:
            raise DoubleFreeError(f"KV page out of range 1..{self.num_pages}: {pages.tolist()[:8]}")
        by_page = self.is_free.view(-1, self.page_size)
        used = by_page[pages, 0]
        if bool(used.any()):
            raise DoubleFreeError(f"double free of KV pages {pages[used].tolist()[:8]}")
        by_page[pages] = True
        self._released.append(pages)
        self._released_n += pages.numel()


def make_allocator(
    size: int,
    page_size: int,
    device: torch.device | str = "cpu",
    debug: bool | None = None,
    *,
    check_repeats: bool | None = None,
) -> TokenToKVPoolAllocator:
    """The token allocator for ``page_size == 1``, the paged one otherwise (as sglang 0.5.23
    chooses in ``sglang/srt/mem_cache/kv_cache_configurator.py`` for a plain model). ``debug``
    / ``check_repeats``: see :class:`TokenToKVPoolAllocator`."""
    if page_size == 1:
        return TokenToKVPoolAllocator(size, device, debug, check_repeats=check_repeats)
    return PagedTokenToKVPoolAllocator(size, page_size, device, debug, check_repeats=check_repeats)
