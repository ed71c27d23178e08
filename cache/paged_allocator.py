"""Page-granular KV-slot allocator, used whenever ``page_size > 1``.

Mirrors SGLang ``PagedTokenToKVPoolAllocator`` (python/sglang/srt/mem_cache/allocator.py
@ a7ec6b97): the pool is ``size // page_size`` pages numbered 1..num_pages (page 0 is padding);
page ``p`` holds KV slots ``p * page_size .. p * page_size + page_size - 1``.
"""

from __future__ import annotations

import torch

from radixbench.cache.allocator import DoubleFreeError, TokenToKVPoolAllocator


class PagedTokenToKVPoolAllocator(TokenToKVPoolAllocator):
    """Allocates and frees whole pages; slot indices are returned as int64 device tensors.

    ``alloc(need)`` takes ``need / page_size`` pages from the front of the free-page list
    (``need`` must be a multiple of ``page_size``: ``ValueError`` otherwise, as SGLang asserts);
    ``free(indices)`` returns every page that any of ``indices`` lies in (SGLang
    ``torch.unique(free_index // page_size)``), appended to a release list merged on demand, so
    the allocation order is deterministic. ``is_free`` is a per-slot bool mask
    ``[(num_pages + 1) * page_size]``; freeing a page that is already free, or a slot outside the
    pages, raises ``DoubleFreeError`` and frees nothing. ``size`` is the capacity in tokens
    (``num_pages * page_size``).
    """

    def __init__(
        self,
        size: int,
        page_size: int,
        device: torch.device | str = "cpu",
        check_repeats: bool = True,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        if size < page_size:
            raise ValueError(f"KV pool of {size} tokens holds no page of {page_size}")
        self.page_size = page_size
        self.num_pages = size // page_size
        super().__init__(self.num_pages * page_size, device, check_repeats)

    def clear(self) -> None:
        """Mark every page 1..num_pages free (mutates the free-page list, release list, mask)."""
        self.free_pages = torch.arange(1, self.num_pages + 1, dtype=torch.int64, device=self.device)
        self._released: list[torch.Tensor] = []
        self._released_n = 0
        self.is_free = torch.ones(
            (self.num_pages + 1) * self.page_size, dtype=torch.bool, device=self.device
        )
        self.is_free[: self.page_size] = False
        self._offsets = torch.arange(self.page_size, dtype=torch.int64, device=self.device)

    def available_size(self) -> int:
        """Free tokens (whole free pages x page_size)."""
        return (int(self.free_pages.numel()) + self._released_n) * self.page_size

    def _merge(self) -> None:
        self.free_pages = torch.cat([self.free_pages, *self._released])
        self._released = []
        self._released_n = 0

    def alloc(self, need: int) -> torch.Tensor | None:
        """Take ``need`` tokens of whole pages: int64 ``[need]`` slot indices, or ``None``
        (nothing taken) when too few pages are free. Raises ``ValueError`` for a negative
        ``need`` or one that is not a multiple of ``page_size``."""
        if need < 0 or need % self.page_size:
            raise ValueError(f"alloc: need {need} is not a non-negative multiple of page size")
        n_pages = need // self.page_size
        if n_pages > self.free_pages.numel():
            if n_pages > self.free_pages.numel() + self._released_n:
                return None
            self._merge()
        pages = self.free_pages[:n_pages]
        self.free_pages = self.free_pages[n_pages:]
        out = (pages[:, None] * self.page_size + self._offsets).reshape(-1)
        self.is_free[out] = False
        return out

    def free(self, indices: torch.Tensor) -> None:
        """Return the pages of slots ``indices`` (int tensor ``[n]``) to the pool.

        Raises ``DoubleFreeError`` (freeing nothing) if a slot lies outside pages 1..num_pages or
        in a page that is already free."""
        if indices.numel() == 0:
            return
        idx = indices.to(device=self.device, dtype=torch.int64).reshape(-1)
        pages = torch.unique(idx // self.page_size)
        lo, hi = int(pages[0]), int(pages[-1])
        if lo < 1 or hi > self.num_pages:
            raise DoubleFreeError(f"KV page out of range 1..{self.num_pages}: {pages.tolist()[:8]}")
        first = pages * self.page_size
        if bool(self.is_free[first].any()):
            bad = pages[self.is_free[first]].tolist()[:8]
            raise DoubleFreeError(f"double free of KV pages {bad}")
        self.is_free[(first[:, None] + self._offsets).reshape(-1)] = True
        self._released.append(pages)
        self._released_n += pages.numel()


def make_allocator(
    size: int, page_size: int, device: torch.device | str = "cpu", check_repeats: bool = True
) -> TokenToKVPoolAllocator:
    """The token allocator for ``page_size == 1``, the paged one otherwise (as SGLang)."""
    if page_size == 1:
        return TokenToKVPoolAllocator(size, device, check_repeats)
    return PagedTokenToKVPoolAllocator(size, page_size, device, check_repeats)
