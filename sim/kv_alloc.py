"""KV-slot allocation of the scheduler's extend and decode steps, per token or per page.

Mirrors ``alloc_for_extend`` / ``alloc_for_decode_default`` of sglang 0.5.23 and the functions
they call, ``alloc_token_slots``, ``alloc_paged_token_slots_extend`` and
``alloc_paged_token_slots_decode`` (``sglang/srt/mem_cache/allocation.py``), and
``ScheduleBatch.new_tokens_required_next_decode`` / ``check_decode_mem``
(``sglang/srt/managers/schedule_batch.py``); before an allocation the tree evicts the shortfall
``num_tokens - available`` (``evict_from_tree_cache`` in ``mem_cache/common.py`` ->
``BaseTokenToKVPoolAllocator.evict_to_free_tokens`` in ``mem_cache/allocator/base.py``):

- ``page_size == 1``: the batch takes ``sum(extend)`` (extend) or ``bs`` (decode) slots from the
  token allocator, after evicting that many tokens from the tree when fewer are free.
- ``page_size > 1``: each request's new tokens first fill the page holding its last KV slot
  (``last_loc``), then take whole new pages (``PagedTokenToKVPoolAllocator.alloc_extend`` /
  ``alloc_decode``). Before the call the tree is asked to evict the worst case when fewer
  tokens than that are free: ``extend_num_tokens + bs * page_size`` for extend, ``bs *
  page_size`` for decode, as sglang 0.5.23 over-estimates (every request may open a new page).

Only the allocator call is timed (op ``alloc``); the eviction is timed by the instrumented
cache as ``evict``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from radixbench.cache.interface import PrefixCache
from radixbench.cache.paged_allocator import PagedTokenToKVPoolAllocator
from radixbench.sim.instrument import OpRecorder
from radixbench.sim.request import Req

T = TypeVar("T")


def _first(n: int) -> int:
    return n


def _fourth(*args: Any) -> int:
    return int(args[3])


def _numel(seq: torch.Tensor, *_: Any) -> int:
    return seq.numel()


def _size(seq: np.ndarray, *_: Any) -> int:
    return int(seq.size)


class SlotAllocator:
    """KV slots for the scheduler's steps, from ``cache.allocator`` (a token allocator when
    ``cache.page_size == 1``, else a :class:`PagedTokenToKVPoolAllocator`). ``rec`` records
    each allocator call as op ``alloc`` (key_len = result = tokens allocated)."""

    def __init__(self, cache: PrefixCache, rec: OpRecorder) -> None:
        self.cache = cache
        self.allocator = alloc = cache.allocator
        self.page_size = cache.page_size
        if self.page_size > 1 and not isinstance(alloc, PagedTokenToKVPoolAllocator):
            raise ValueError(f"page_size {self.page_size} needs a PagedTokenToKVPoolAllocator")
        pool = cache.req_to_token_pool
        if pool is None:
            raise ValueError("the scheduler's cache needs a ReqToTokenPool")
        self.pool = pool
        self.rec = rec
        stats = cache.tree_stats
        # recorded key_len = result = tokens allocated
        self._alloc = rec.timed("alloc", alloc.alloc, stats, _first, lambda _, n: n)
        self.cpu = alloc.device.type == "cpu"
        self._table: torch.Tensor | None = None
        self._table_np = np.empty((0, 0), dtype=np.int32)
        if isinstance(alloc, PagedTokenToKVPoolAllocator):
            self._alloc_extend = rec.timed(
                "alloc", alloc.alloc_extend, stats, _fourth, lambda _, *a: a[3]
            )
            self._alloc_decode = rec.timed(
                "alloc", alloc.alloc_decode, stats, _numel, lambda _, seq, last: seq.numel()
            )
            if self.cpu:
                self._alloc_decode_np = rec.timed(
                    "alloc", alloc.alloc_decode_np, stats, _size, lambda _, seq, last: seq.size
                )

    def evict_if_needed(self, num_tokens: int) -> None:
        """Make room for ``num_tokens`` slots: when fewer are free, ask the tree to evict the
        shortfall ``num_tokens - available_size()`` (it frees what it can; whole leaves, so
        possibly more). Mirrors ``BaseTokenToKVPoolAllocator.evict_to_free_tokens`` of sglang
        0.5.23 (``evict_for_alloc`` -> ``evict``; since PR #32016 — before it, SGLang asked for
        all ``num_tokens``). Mutates tree and pool."""
        shortfall = num_tokens - self.allocator.available_size()
        if shortfall > 0:
            self.cache.evict(shortfall)

    @staticmethod
    def _checked(out: T | None, tokens: int) -> T:
        if out is None:  # admission / check_decode_mem make this unreachable
            raise RuntimeError(f"out of KV slots: need {tokens}, admission invariant violated")
        return out

    # ------------------------------------------------------------------ extend
    def extend(self, reqs: Sequence[Req], prefix_lens: Sequence[int]) -> torch.Tensor:
        """Slots for the new tokens ``len(req.fill_ids) - prefix_lens[i]`` of every request:
        int64 ``[sum extend]`` on the device, in request order (what ``BatchBuilder
        .build_extend`` takes). Reads ``req.prefix_indices`` (its last slot is ``last_loc``).
        Raises ``RuntimeError`` if the pool cannot hold them even after eviction."""
        extend = [len(r.fill_ids) - p for r, p in zip(reqs, prefix_lens)]
        total = sum(extend)
        if self.page_size == 1:
            self.evict_if_needed(total)
            return self._checked(self._alloc(total), total)
        alloc = self.allocator
        assert isinstance(alloc, PagedTokenToKVPoolAllocator)
        self.evict_if_needed(total + len(reqs) * self.page_size)
        dev = alloc.device
        none = torch.full((1,), -1, dtype=torch.int64, device=dev)
        last_loc = torch.cat(
            [r.prefix_indices[-1:] if p else none for r, p in zip(reqs, prefix_lens)]
        )
        lens = torch.tensor([list(prefix_lens), [len(r.fill_ids) for r in reqs]], dtype=torch.int64)
        return self._checked(self._alloc_extend(lens[0], lens[1], last_loc, total), total)

    # ------------------------------------------------------------------ decode
    def new_pages_next_decode(self, reqs: Sequence[Req], seq_lens: np.ndarray | None = None) -> int:
        """Pages (page_size 1: slots) the next decode step of ``reqs`` opens: the requests
        whose next token starts a page, ``seq_len % page_size == 0`` (sglang 0.5.23
        ``ScheduleBatch.new_tokens_required_next_decode`` without speculative decoding, which
        returns these pages times ``page_size``: ``kv_committed_len % page_size == 0``).
        ``seq_lens``: int64 ``[bs]``, the requests' ``seq_len`` when given (the scheduler's
        running arrays), else read from ``reqs``."""
        ps = self.page_size
        if ps == 1:
            return len(reqs)
        if seq_lens is not None:
            return int(np.count_nonzero(seq_lens % ps == 0))
        return sum(1 for r in reqs if r.seq_len % ps == 0)

    def decode_fits(self, reqs: Sequence[Req], seq_lens: np.ndarray | None = None) -> bool:
        """sglang 0.5.23 ``ScheduleBatch.check_decode_mem`` (->
        ``BaseTokenToKVPoolAllocator.check_decode_capacity``): evict if needed (see
        ``evict_if_needed`` for the amount), then whether the free slots cover the pages the next
        decode step of ``reqs`` opens (``seq_lens``: as ``new_pages_next_decode``). Mutates the
        tree and the pool."""
        need = self.new_pages_next_decode(reqs, seq_lens) * self.page_size
        self.evict_if_needed(need)
        return self.allocator.available_size() >= need

    def decode(
        self,
        reqs: Sequence[Req],
        seq_lens: np.ndarray | None = None,
        rows: np.ndarray | None = None,
    ) -> torch.Tensor:
        """One slot per request for the token at position ``req.seq_len``: int64 ``[bs]`` on
        the device (page_size > 1: ``last_loc + 1``, or the first slot of a new page when the
        token starts one; ``last_loc = req_to_token[row, seq_len - 1]``). Raises
        ``RuntimeError`` if the pool cannot hold them even after eviction. ``seq_lens`` /
        ``rows``: int64 ``[bs]``, the requests' ``seq_len`` / ``req_pool_idx`` when given (the
        scheduler's running arrays), else read from ``reqs``."""
        bs = len(reqs)
        if self.page_size == 1:
            self.evict_if_needed(bs)
            return self._checked(self._alloc(bs), bs)
        alloc = self.allocator
        assert isinstance(alloc, PagedTokenToKVPoolAllocator)
        self.evict_if_needed(bs * self.page_size)
        if self.cpu and seq_lens is not None and rows is not None:
            # numpy throughout: the same slots as the torch path below, at a fraction of the
            # cost for a decode batch's few elements (the allocator call is still timed)
            table = self.pool.req_to_token
            if table is not self._table:  # a numpy view of the same memory, made once
                self._table, self._table_np = table, table.numpy()
            last = self._table_np[rows, seq_lens - 1].astype(np.int64)
            out = self._alloc_decode_np(seq_lens + 1, last)
            return torch.from_numpy(self._checked(out, bs))
        if seq_lens is not None and rows is not None:
            meta = torch.from_numpy(np.stack((rows, seq_lens))).to(alloc.device)
        else:
            meta = torch.tensor(
                [[r.req_pool_idx for r in reqs], [r.seq_len for r in reqs]], dtype=torch.int64
            ).to(alloc.device)
        last_loc = self.pool.req_to_token[meta[0], meta[1] - 1].to(torch.int64)
        return self._checked(self._alloc_decode(meta[1] + 1, last_loc), bs)

    def decode_block(self, seq_first: np.ndarray, rows: np.ndarray, m: int) -> np.ndarray:
        """The slots of ``m`` consecutive decode steps of one batch (a decode block,
        ``sim.decode_block``), taken at once: int64 ``[m, bs]`` (row ``i``: step ``i``'s
        ``out_cache_loc``), the same slots in the same order as ``m`` calls of :meth:`decode`
        with ``seq_lens = seq_first + i``. ``seq_first``: int64 ``[bs]``, each request's
        ``seq_len`` at the first step; ``rows``: its ``req_pool_idx``. Page 1: ``m * bs``
        slots from the free list, step by step in request order. Paged: a request whose token
        at position ``p`` starts a page (``p % page_size == 0``) takes the next free page, in
        (step, request) order, and writes its first slot; the others write one past the slot
        before (``req_to_token[row, seq_first - 1]`` before the first step). The caller checked
        that the free slots cover every step's worst case (``bs * page_size``), so nothing is
        evicted; raises ``RuntimeError`` if the pool cannot hold them after all. CPU pools
        only (numpy; ``ValueError`` otherwise). Mutates the free list only: the caller writes
        the slots into ``req_to_token`` (the batch build)."""
        if not self.cpu:
            raise ValueError("decode_block: the KV pool is not on the CPU")
        bs, ps, alloc = int(seq_first.size), self.page_size, self.allocator
        if ps == 1:
            out = self._checked(alloc.alloc(m * bs), m * bs)
            return out.numpy().reshape(m, bs)
        table = self.pool.req_to_token
        if table is not self._table:
            self._table, self._table_np = table, table.numpy()
        step = np.arange(m, dtype=np.int64)[:, None]
        need = (seq_first + step) % ps == 0  # [m, bs]: the token opens a page
        n = int(np.count_nonzero(need))
        # slot - step: constant along a request's column between two new pages
        first = (self._table_np[rows, seq_first - 1].astype(np.int64) + 1)[None, :]
        if not n:
            return first + step
        slots = self._checked(alloc.alloc(n * ps), n * ps).numpy()
        base = np.zeros((m, bs), dtype=np.int64)
        base[need] = slots[::ps] - np.broadcast_to(step, (m, bs))[need]  # row-major: step order
        last_new = np.maximum.accumulate(np.where(need, step, -1), axis=0)
        carried = base[np.maximum(last_new, 0), np.arange(bs)]
        return np.where(last_new >= 0, carried, first) + step

    # ------------------------------------------------------------------ release
    def own_start(self, req: Req) -> int:
        """First position of ``req``'s KV that the tree does not hold: 0.5.23's
        ``req.kv.cache_protected_len`` (page aligned; a chunk's or a checkpoint's unaligned tail
        stays the request's)."""
        return req.cache_protected_len
