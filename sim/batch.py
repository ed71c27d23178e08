"""ScheduleBatch builder: the per-step tensors a model runner consumes, built on the device.

Modeled on ``ScheduleBatch.prepare_for_extend`` / ``prepare_for_decode`` of sglang 0.5.23
(``sglang/srt/managers/schedule_batch.py``; the ``req_to_token`` writes of ``alloc_for_extend`` /
``alloc_for_decode_default`` in ``sglang/srt/mem_cache/allocation.py``): host-side lists become
int64 tensors on the device and ``req_to_token`` rows are written. Only the tensors below are
built (no sampling, logprob, multimodal or speculative state), and the rows are written by
indexing (on the CPU through numpy views of the same memory, on CUDA with torch) where 0.5.23
uses a triton kernel when the attention backend allows (``write_req_to_token_pool_triton``).
The decode batch's per-request values come from the scheduler's running arrays
(``sim.running``), as 0.5.23 keeps ``seq_lens`` / ``output_ids`` on the batch between steps.
On CUDA the host tensors are pinned and copied with
``non_blocking=True``; ``build_*`` synchronizes before returning, so a timer around the call
measures the finished copy. The input-id flatteners are the variants under test: ``numpy`` is
0.5.23's, ``chain`` and ``sum`` earlier SGLang's.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import torch

from radixbench.cache.allocator import ReqToTokenPool
from radixbench.sim.request import Req


def _flatten_sum(parts: Sequence[array]) -> torch.Tensor:
    """``sum(lists, [])``, as early SGLang's ``prepare_for_extend`` flattened the input ids:
    quadratic in the number of requests."""
    flat: list[int] = sum((p.tolist() for p in parts), [])  # noqa: RUF017 - on purpose
    return torch.tensor(flat, dtype=torch.int64)


def _flatten_chain(parts: Sequence[array]) -> torch.Tensor:
    """``list(itertools.chain.from_iterable(...))``, as SGLang's ``prepare_for_extend`` did
    before 0.5.23: one pass over Python ints."""
    return torch.tensor(list(itertools.chain.from_iterable(parts)), dtype=torch.int64)


def _flatten_numpy(parts: Sequence[array]) -> torch.Tensor:
    """Zero-copy views of each ``array('q')`` concatenated by numpy: sglang 0.5.23's
    ``flatten_arrays_to_pinned_cpu`` (``sglang/srt/utils/common.py``; it also pins the result,
    which ``BatchBuilder`` does on CUDA)."""
    if not parts:
        return torch.empty(0, dtype=torch.int64)
    views = [np.frombuffer(p, dtype=np.int64) for p in parts]
    return torch.from_numpy(np.concatenate(views))


FLATTENERS: dict[str, Callable[[Sequence[array]], torch.Tensor]] = {
    "sum": _flatten_sum,
    "chain": _flatten_chain,
    "numpy": _flatten_numpy,
}


class ScheduleBatch(NamedTuple):
    """Tensors of one step, all int64 on the device. ``bs`` = requests, ``T`` = new tokens
    (extend: sum of extend lengths; decode: ``bs``).

    input_ids ``[T]``, out_cache_loc ``[T]`` (KV slots written this step), positions ``[T]``,
    seq_lens / prefix_lens / extend_lens / req_pool_indices ``[bs]``. A typed tuple (immutable,
    built in one call: this runs every step, and inside the timed batch builds).
    """

    forward_mode: str
    input_ids: torch.Tensor
    seq_lens: torch.Tensor
    prefix_lens: torch.Tensor
    extend_lens: torch.Tensor
    req_pool_indices: torch.Tensor
    out_cache_loc: torch.Tensor
    positions: torch.Tensor


class BatchBuilder:
    """Builds ``ScheduleBatch`` es with one flatten variant (``FLATTENERS`` name)."""

    def __init__(self, pool: ReqToTokenPool, flatten: str = "chain") -> None:
        if flatten not in FLATTENERS:
            raise ValueError(f"unknown flatten {flatten!r}; known: {', '.join(FLATTENERS)}")
        self.pool = pool
        self.device = pool.device
        self.flatten = FLATTENERS[flatten]
        self.cuda = self.device.type == "cuda"
        self._table: torch.Tensor | None = None
        self._table_view = np.empty((0, 0), dtype=np.int32)
        # CPU decode batches: one int64 [5, rows] buffer reused step to step, and per batch
        # size the torch views of its rows' first bs columns (see build_decode).
        self._dec = np.empty((5, 0), dtype=np.int64)
        self._dec_views: dict[int, tuple[torch.Tensor, ...]] = {}
        self._dec_meta: dict[int, np.ndarray] = {}  # bs -> self._dec[:3, :bs]

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        if self.cuda:
            return t.pin_memory().to(self.device, non_blocking=True)
        return t

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _table_np(self) -> np.ndarray:
        """``req_to_token`` as a numpy view (CPU only: same memory, no copy)."""
        table = self.pool.req_to_token
        if self._table is not table:
            self._table, self._table_view = table, table.numpy()
        return self._table_view

    def build_extend(self, reqs: Sequence[Req], out_cache_loc: torch.Tensor) -> ScheduleBatch:
        """Extend (prefill) batch. ``out_cache_loc``: int64 ``[sum extend]`` slots on the device,
        in request order. Writes ``req_to_token[row, :seq_len]`` (prefix slots, then new ones).
        Reads ``req.prefix_indices``, ``req.fill_ids`` (the tokens whose KV this step leaves
        written: input, plus outputs after a retraction, cut to the chunk in chunked prefill),
        ``req.req_pool_idx``. On the CPU the lengths, positions and row writes go through numpy
        views of the same memory (no per-element Python, no small-tensor dispatch); on CUDA
        through torch ops on the device. Same tensors either way."""
        prefix = [r.prefix_indices.numel() for r in reqs]
        seq = [len(r.fill_ids) for r in reqs]
        input_ids = self._to_device(self.flatten([r.fill_ids[p:] for r, p in zip(reqs, prefix)]))
        if self.cuda:
            return self._extend_torch(reqs, prefix, seq, input_ids, out_cache_loc)
        meta = np.array([prefix, seq, [r.req_pool_idx for r in reqs]], dtype=np.int64)
        ext = meta[1] - meta[0]
        total = int(out_cache_loc.numel())
        if len(reqs) == 1:
            positions = np.arange(prefix[0], seq[0], dtype=np.int64)
        else:  # prefix_len .. seq_len-1 of each request, concatenated
            starts = np.cumsum(ext) - ext
            positions = np.arange(total, dtype=np.int64) - np.repeat(starts - meta[0], ext)
        self._extend_rows_np(reqs, prefix, seq, out_cache_loc)
        m = torch.from_numpy(meta)
        return ScheduleBatch(
            "extend",
            input_ids,
            m[1],
            m[0],
            torch.from_numpy(ext),
            m[2],
            out_cache_loc,
            torch.from_numpy(positions),
        )

    def _extend_rows_np(
        self, reqs: Sequence[Req], prefix: list[int], seq: list[int], out_cache_loc: torch.Tensor
    ) -> None:
        table = self._table_np()
        loc = out_cache_loc.numpy()
        off = 0
        for r, p, s in zip(reqs, prefix, seq):
            row = table[r.req_pool_idx]
            if p:
                row[:p] = r.prefix_indices.numpy()
            row[p:s] = loc[off : off + s - p]
            off += s - p

    def _extend_rows_torch(
        self, reqs: Sequence[Req], prefix: list[int], seq: list[int], out_cache_loc: torch.Tensor
    ) -> None:
        table = self.pool.req_to_token
        off = 0
        for r, p, s in zip(reqs, prefix, seq):
            if p:
                table[r.req_pool_idx, :p] = r.prefix_indices
            table[r.req_pool_idx, p:s] = out_cache_loc[off : off + s - p]
            off += s - p

    def write_extend_rows(self, reqs: Sequence[Req], out_cache_loc: torch.Tensor) -> None:
        """Only the ``req_to_token`` writes of :meth:`build_extend` (the same rows, the same
        values), no batch tensors: what a run without the builder (``--no-batch-builder``)
        still needs, as 0.5.23 writes the rows in ``alloc_for_extend`` and the cache reads them
        at checkpoint and release. Mutates ``req_to_token``."""
        prefix = [r.prefix_indices.numel() for r in reqs]
        seq = [len(r.fill_ids) for r in reqs]
        if self.cuda:
            self._extend_rows_torch(reqs, prefix, seq, out_cache_loc)
            self._sync()
        else:
            self._extend_rows_np(reqs, prefix, seq, out_cache_loc)

    def write_decode_rows(
        self, reqs: Sequence[Req], out_cache_loc: torch.Tensor, meta: np.ndarray
    ) -> None:
        """Only the ``req_to_token`` write of :meth:`build_decode` (``req_to_token[rows,
        seq_len] = out_cache_loc``; ``meta`` as there, int64 ``[3, bs]``), no batch tensors
        (``--no-batch-builder``; 0.5.23's ``alloc_for_decode_default`` writes it). Mutates
        ``req_to_token``."""
        if self.cuda:
            m = torch.from_numpy(np.ascontiguousarray(meta[1:3])).to(self.device)
            self.pool.req_to_token[m[1], m[0]] = out_cache_loc.to(torch.int32)
            self._sync()
        else:
            self._table_np()[meta[2], meta[1]] = out_cache_loc.numpy()

    def _extend_torch(
        self,
        reqs: Sequence[Req],
        prefix: list[int],
        seq: list[int],
        input_ids: torch.Tensor,
        out_cache_loc: torch.Tensor,
    ) -> ScheduleBatch:
        meta = self._to_device(
            torch.tensor([prefix, seq, [r.req_pool_idx for r in reqs]], dtype=torch.int64)
        )
        prefix_lens, seq_lens, rows = meta[0], meta[1], meta[2]
        extend_lens = seq_lens - prefix_lens
        # positions: prefix_len .. seq_len-1 of each request, concatenated.
        starts = torch.cumsum(extend_lens, 0) - extend_lens
        total = int(out_cache_loc.numel())
        positions = torch.arange(total, device=self.device) - torch.repeat_interleave(
            starts - prefix_lens, extend_lens, output_size=total
        )
        self._extend_rows_torch(reqs, prefix, seq, out_cache_loc)
        self._sync()
        return ScheduleBatch(
            "extend", input_ids, seq_lens, prefix_lens, extend_lens, rows, out_cache_loc, positions
        )

    def build_decode(
        self,
        reqs: Sequence[Req],
        out_cache_loc: torch.Tensor,
        meta: np.ndarray | None = None,
    ) -> ScheduleBatch:
        """Decode batch: one new token per request (its last output token), KV written at
        position ``req.seq_len``. Writes ``req_to_token[rows, seq_len] = out_cache_loc``.
        ``meta``: int64 ``[3, bs]`` (last output token, ``seq_len``, ``req_pool_idx`` per
        request), the scheduler's running arrays as 0.5.23's ``ScheduleBatch`` keeps them
        between steps; when ``None`` it is read from ``reqs``. Not mutated.

        On the CPU the batch's ``[bs]`` tensors are views of one buffer the builder rewrites at
        every decode build, as 0.5.23's ``ScheduleBatch`` keeps its decode tensors between steps
        and updates them in place (``prepare_for_decode``: ``seq_lens.add_(1)``): a decode
        batch is valid until the next ``build_decode`` (clone what must outlive it). On CUDA
        every batch has tensors of its own."""
        if meta is None:
            meta = np.array(
                [
                    [r.output_ids[-1] for r in reqs],
                    [r.seq_len for r in reqs],
                    [r.req_pool_idx for r in reqs],
                ],
                dtype=np.int64,
            ).reshape(3, len(reqs))
        if self.cuda:
            m = self._to_device(torch.from_numpy(meta))
            input_ids, positions, rows = m[0], m[1], m[2]
            self.pool.req_to_token[rows, positions] = out_cache_loc.to(torch.int32)
            ones = torch.ones_like(positions)
            self._sync()
            return ScheduleBatch(
                "decode", input_ids, positions + 1, positions, ones, rows, out_cache_loc, positions
            )
        table = self._table_np()
        table[meta[2], meta[1]] = out_cache_loc.numpy()
        bs = meta.shape[1]
        views = self._dec_views.get(bs)
        if views is None:
            views = self._decode_views(bs)
        buf = self._dec
        if meta is not self._dec_meta[bs]:
            buf[:3, :bs] = meta
        np.add(meta[1], 1, out=buf[3, :bs])
        input_ids, positions, rows, seq_lens, ones = views
        return ScheduleBatch(
            "decode", input_ids, seq_lens, positions, ones, rows, out_cache_loc, positions
        )

    def build_decode_block(self, out_cache_loc: np.ndarray, inputs: np.ndarray) -> ScheduleBatch:
        """The decode batches of ``m`` consecutive steps of one running batch, built at once (a
        decode block, ``sim.decode_block``). ``inputs``: int64 ``[3, m, bs]``, per step and
        request the last output token, ``seq_len`` (the new token's position) and
        ``req_pool_idx`` (:meth:`RunningArrays.block_inputs`); ``out_cache_loc``: int64 ``[m,
        bs]``. Writes ``req_to_token[rows, positions] = out_cache_loc`` for every step, as
        ``m`` calls of :meth:`build_decode` would. Returns one batch whose tensors are ``[m,
        bs]`` (CPU, fresh): row ``i`` is what :meth:`build_decode` builds for step ``i``.
        Raises ``RuntimeError`` on CUDA (blocks run on the CPU only)."""
        self.write_decode_block_rows(out_cache_loc, inputs)
        pos, t = inputs[1], torch.from_numpy
        ones = np.ones_like(pos)
        return ScheduleBatch(
            "decode", t(inputs[0]), t(pos + 1), t(pos), t(ones), t(inputs[2]), t(out_cache_loc),
            t(pos),
        )  # fmt: skip

    def write_decode_block_rows(self, out_cache_loc: np.ndarray, inputs: np.ndarray) -> None:
        """Only the ``req_to_token`` write of :meth:`build_decode_block` (``--no-batch-builder``).
        Raises ``RuntimeError`` on CUDA."""
        if self.cuda:
            raise RuntimeError("decode blocks are built on the CPU only")
        self._table_np()[inputs[2], inputs[1]] = out_cache_loc

    def _decode_views(self, bs: int) -> tuple[torch.Tensor, ...]:
        """The five ``[bs]`` tensors of a CPU decode batch: views of the first ``bs`` columns of
        the rows of ``self._dec`` (input ids, positions, request rows, seq_lens, ones), made
        once per batch size; a larger batch than the buffer holds gets a new buffer."""
        if bs > self._dec.shape[1]:
            self._dec = np.empty((5, max(bs, self.pool.max_reqs)), dtype=np.int64)
            self._dec[4] = 1  # extend_lens: one new token per request, never rewritten
            self._dec_views, self._dec_meta = {}, {}
        views = tuple(torch.from_numpy(self._dec[:, :bs]).unbind())
        self._dec_views[bs] = views
        self._dec_meta[bs] = self._dec[:3, :bs]
        return views

    def decode_meta(self, bs: int) -> np.ndarray:
        """int64 ``[3, bs]`` for ``build_decode``'s ``meta`` on the CPU: a view of the buffer the
        decode batch is built in, which the caller fills (last output token, ``seq_len``,
        ``req_pool_idx`` per request); given back to ``build_decode`` it is not copied. Valid
        until the next ``build_decode`` or ``decode_meta`` of a larger ``bs``. On CUDA a fresh
        array (the batch is copied to the device anyway)."""
        if self.cuda:
            return np.empty((3, bs), dtype=np.int64)
        if bs not in self._dec_views:
            self._decode_views(bs)
        return self._dec_meta[bs]
