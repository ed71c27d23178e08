"""The running (decode) batch as arrays: what every decode step reads and advances, per step in
O(1) numpy calls instead of O(batch size) Python.

sglang 0.5.23's ``ScheduleBatch`` keeps the decode batch's ``seq_lens`` / ``output_ids`` /
``req_pool_indices`` as tensors and advances them in place each step (``prepare_for_decode``:
``seq_lens.add_(1)``); the per-request ``Req`` fields are only touched when a request leaves the
batch. ``RunningArrays`` does the same for the simulator: between steps the truth about the
batch's requests is here, and a request's ``seq_len``, ``output_ids`` and ``token_s`` are
brought up to date (:meth:`RunningArrays.sync`) only when someone needs them — when it finishes,
on a retraction, at the end of the run or for a test hook. Values are exactly those the
per-request loop would have written (same ints, same float times).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from radixbench.sim.request import Req

_I64 = np.int64


class RunningArrays:
    """Arrays aligned with a running batch ``reqs`` (its order): ``rows`` (``req_pool_idx``),
    ``seq`` (tokens with KV, i.e. ``seq_len``), ``rem`` (output tokens still to sample),
    ``pos`` (index in ``buf`` of the request's last sampled token), ``start`` (where its output
    plan starts in ``buf``) and ``synced`` (``steps`` when its ``Req`` fields were last true).
    ``times``: simulated end time (s) of every decode step so far. All int64 but ``times``.
    ``seq`` / ``rem`` / ``pos`` hold the values as of decode step ``base``: the current ones are
    ``steps - base`` further on (``seq_now``), so a step costs O(1) Python, no array op.
    ``seq_total``: the batch's current ``sum(seq_len)``."""

    def __init__(self) -> None:
        self.reqs: list[Req] = []
        e = np.empty(0, dtype=_I64)
        self.rows, self.seq, self.rem, self.pos, self.start, self.synced = e, e, e, e, e, e
        self.buf = np.empty(1 << 16, dtype=_I64)  # output plans of the batch, back to back
        self.buf_len = 0
        self.steps = 0
        self.base = 0
        self.seq_total = 0
        self.next_done = -1  # steps at which the next request samples its last token
        self.times = array("d")

    # ------------------------------------------------------------------ membership
    def _put_plan(self, plan: array) -> int:
        n = len(plan)
        at = self.buf_len
        self.buf[at : at + n] = np.frombuffer(plan, dtype=_I64)
        self.buf_len = at + n
        return at

    def _compact(self, extra: int) -> None:
        """Copy the live requests' plans into a fresh buffer (at least twice their size)."""
        live = sum(len(r.output_plan) for r in self.reqs) + extra
        self.buf = np.empty(max(2 * live, self.buf.size), dtype=_I64)
        self.buf_len = 0
        old_start = self.start
        starts = [self._put_plan(r.output_plan) for r in self.reqs]
        self.start = np.array(starts, dtype=_I64)
        self.pos = self.pos - old_start + self.start

    def _rebase(self) -> None:
        """Make ``seq`` / ``rem`` / ``pos`` current (``base = steps``)."""
        d = self.steps - self.base
        if d:
            self.seq, self.rem, self.pos = self.seq + d, self.rem - d, self.pos + d
            self.base = self.steps

    def _changed(self) -> None:
        """After a change of membership (arrays current): next finish, ``seq_total``."""
        self.next_done = self.steps + int(self.rem.min()) if self.rem.size else -1
        self.seq_total = int(self.seq.sum())

    def add(self, reqs: Sequence[Req]) -> None:
        """Append requests whose ``Req`` fields are up to date (just prefilled, each with at
        least one output token to sample)."""
        if not reqs:
            return
        self._rebase()
        need = sum(len(r.output_plan) for r in reqs)
        if self.buf_len + need > self.buf.size:
            self._compact(need)
        self.reqs.extend(reqs)
        starts = [self._put_plan(r.output_plan) for r in reqs]
        st = np.array(starts, dtype=_I64)
        n_out = np.array([len(r.output_ids) for r in reqs], dtype=_I64)
        cat = np.concatenate
        self.rows = cat((self.rows, np.array([r.req_pool_idx for r in reqs], dtype=_I64)))
        self.seq = cat((self.seq, np.array([r.seq_len for r in reqs], dtype=_I64)))
        self.rem = cat((self.rem, np.array([r.output_len for r in reqs], dtype=_I64) - n_out))
        self.start = cat((self.start, st))
        self.pos = cat((self.pos, st + n_out - 1))
        self.synced = cat((self.synced, np.full(len(reqs), self.steps, dtype=_I64)))
        self._changed()

    def reset(self, reqs: Sequence[Req]) -> None:
        """Rebuild from ``reqs`` (all synced), e.g. after a retraction reordered the batch."""
        self.reqs = []
        e = np.empty(0, dtype=_I64)
        self.rows, self.seq, self.rem, self.pos, self.start, self.synced = e, e, e, e, e, e
        self.buf_len = 0
        self.base = self.steps
        self.add(reqs)
        self._changed()

    # ------------------------------------------------------------------ Req fields
    def sync_one(self, i: int) -> Req:
        """Bring ``reqs[i]``'s ``seq_len`` / ``output_ids`` / ``token_s`` up to date."""
        self._rebase()
        r = self.reqs[i]
        k = self.steps - int(self.synced[i])
        if k:
            r.seq_len = int(self.seq[i])
            n = len(r.output_ids)
            r.output_ids.extend(r.output_plan[n : n + k])
            r.token_s.extend(self.times[self.steps - k : self.steps])
            self.synced[i] = self.steps
        return r

    def sync(self) -> None:
        """Bring every request of the batch up to date (see :meth:`sync_one`)."""
        self._rebase()
        for i in np.flatnonzero(self.synced != self.steps).tolist():
            self.sync_one(i)

    def remaining(self) -> list[int]:
        """Output tokens still to sample, per request in batch order (Python ints)."""
        d = self.steps - self.base
        return (self.rem - d).tolist() if d else self.rem.tolist()

    def seq_now(self) -> np.ndarray:
        """int64 ``[bs]``: every request's current ``seq_len`` (do not mutate)."""
        d = self.steps - self.base
        return self.seq + d if d else self.seq

    # ------------------------------------------------------------------ decode
    def decode_inputs(self, out: np.ndarray | None = None) -> np.ndarray:
        """int64 ``[3, bs]``: last sampled token, position of the new token (``seq_len``),
        ``req_pool_idx``; written into ``out`` when given (e.g. ``BatchBuilder.decode_meta``),
        else a fresh array."""
        d = self.steps - self.base
        m = np.empty((3, self.rows.size), dtype=_I64) if out is None else out
        # buf[pos + d] as a gather from the view buf[d:]: no temporary pos + d (a ufunc call
        # costs ~4x the gather at these sizes); faster than np.take(out=) too
        m[0] = self.buf[d:][self.pos] if d else self.buf[self.pos]
        np.add(self.seq, d, out=m[1])
        m[2] = self.rows
        return m

    def advance(self, now: float) -> list[int]:
        """One decode step ended at simulated time ``now`` (s): every request sampled one
        token. Returns the indices (ascending) of the requests that sampled their last."""
        self.steps += 1
        self.times.append(now)
        self.seq_total += len(self.reqs)
        if self.steps != self.next_done:
            return []
        self._rebase()
        return np.flatnonzero(self.rem <= 0).tolist()

    def advance_many(self, ends: np.ndarray) -> None:
        """``len(ends)`` decode steps ended at the simulated times ``ends`` (s, in order), as
        that many :meth:`advance` calls, none of which may finish a request: raises
        ``ValueError`` (changing nothing) when one would."""
        k = len(ends)
        if k and self.steps + k >= self.next_done:
            raise ValueError(f"advance_many: a request finishes within {k} steps")
        self.steps += k
        self.times.frombytes(np.ascontiguousarray(ends, dtype=np.float64).tobytes())
        self.seq_total += k * len(self.reqs)

    def block_inputs(self, m: int) -> np.ndarray:
        """int64 ``[3, m, bs]``: :meth:`decode_inputs` of each of the last ``m`` steps as it
        stood when that step began (the step before each had advanced the batch), i.e. after
        :meth:`advance_many` of those steps' starts: row ``i`` is step ``i``'s last sampled
        token, new token's position and ``req_pool_idx`` per request."""
        d = self.steps - self.base
        off = np.arange(d - m + 1, d + 1, dtype=_I64)[:, None]
        out = np.empty((3, m, self.rows.size), dtype=_I64)
        out[0] = self.buf[self.pos + off]
        np.add(self.seq, off, out=out[1])
        out[2] = self.rows
        return out

    def drop(self, idx: list[int]) -> None:
        """Remove the requests at ``idx`` (ascending) from the batch; the rest keep order."""
        self._rebase()
        keep = np.ones(len(self.reqs), dtype=bool)
        keep[idx] = False
        gone = set(idx)
        self.reqs = [r for i, r in enumerate(self.reqs) if i not in gone]
        self.rows, self.seq, self.rem = self.rows[keep], self.seq[keep], self.rem[keep]
        self.pos, self.start, self.synced = self.pos[keep], self.start[keep], self.synced[keep]
        self._changed()
