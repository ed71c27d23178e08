"""Decode blocks: the steps of a decode run (``sim.scheduler``) after its first, planned and done
as array operations over ``[m, bs]`` instead of ``m`` passes of the per-step Python.

Inside a run the running batch is fixed (no request joins, finishes or is retracted), the tree
does not change and no prefill can start (module docstring of ``sim.scheduler``), so each
step's inputs follow from the run's start: request ``j``'s ``seq_len`` at step ``i`` is
``seq_first[j] + i``, its input token the next one of its output plan, the batch's context
``sum(seq_len)`` grows by ``bs`` a step. :func:`run_block` plans how many more steps the run
takes — the same checks ``Scheduler._run_on`` makes before each step (the step starts before
the next arrival the driver announced, finishes nobody, and the free slots cover
``bs * page_size``), evaluated on the planned free-slot count and step ends — then does them
at once: the slots of all ``m`` steps (``SlotAllocator.decode_block``: the same slots, in the
same order, as ``m`` single steps), the ``m`` decode batches (``BatchBuilder
.build_decode_block``: every step's tensors, as rows of ``[m, bs]`` tensors, and its
``req_to_token`` writes), the batch's advance (``RunningArrays.advance_many``), and the
``m`` rows of the step log and the ``2m`` rows of the op log (``alloc``, ``build_decode`` per
step, in step order). The step times come from the cost model's ``decode_times`` (each
step's ``decode_time``, bit for bit, as one array call) and are summed in step order
(``np.add.accumulate``: the same float additions as step by step).

Measured time: the block's allocation and its build are each timed once
(``perf_counter_ns``, as ``OpRecorder.timed`` times one call: the tree's stats are read
once, outside); each step's op rows get an equal share of the block's ns (the integer
remainder on the first rows) and each step's ``measured_cpu_s`` the sum of its two shares —
the cost of the work, amortized over the steps it was done for. Results are those of step by
step (tests/sim/test_coalesce.py: request, step and op tables equal but for the measured
columns).

Where it applies: the isolated clock (under ``coupled`` a step's duration includes its own
measured CPU, known only once the step is done, so a run goes step by step), a KV pool and a
batch builder on the CPU without the allocator's debug checks, no HiCache (its runs are step
by step) and no ``before_step`` hook (a test's invariant check wants every step).
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from radixbench.sim.scheduler import Scheduler

__all__ = ["BLOCK_STEPS", "blocks_apply", "run_block"]

#: Most steps in one block (a run longer than this takes several): bounds the ``[m, bs]``
#: arrays a block builds.
BLOCK_STEPS = 256


def blocks_apply(s: Scheduler) -> bool:
    """Whether ``s``'s decode runs may be done in blocks (module docstring)."""
    return (
        not s.coupled
        and s.io is None
        and s.before_step is None
        and s.slots.cpu
        and not s.builder.cuda
        and not s.allocator.debug
    )


def _shares(ns: int, m: int) -> np.ndarray:
    """``ns`` split over ``m`` steps: equal int shares, the remainder one each on the first."""
    out = np.full(m, ns // m, dtype=np.int64)
    out[: ns % m] += 1
    return out


def run_block(s: Scheduler, end: float) -> tuple[int, float]:
    """Continue ``s``'s decode run, whose last step ends at ``end`` (s), by as many steps as
    step by step would take (at most :data:`BLOCK_STEPS`): returns ``(m, the end of the last
    one)``, ``(0, end)`` when the run stops here. Mutates the batch arrays, the free list,
    ``req_to_token``, ``s.new_token_ratio`` and the step and op logs; calls ``s.after_step``
    once (the first step's KV events: the block's own steps change no tree)."""
    arr = s.arr
    if s.chunked_req is not None or (s.waiting and s.admission_dirty):
        return 0, end
    bs, ps, cap = len(arr.reqs), s.slots.page_size, s.capacity
    most = min(BLOCK_STEPS, arr.next_done - arr.steps - 1)  # the last one finishes nobody
    if most <= 0:
        return 0, end
    seq_first = arr.seq_now() + 1  # seq_len at the block's first step
    step = np.arange(most, dtype=np.int64)
    # each step's context: the batch's tokens after that step's advance, + its new tokens
    spans = s.cfg.cost.decode_times(bs, arr.seq_total + 2 * bs + bs * step)
    ends = np.add.accumulate(np.concatenate(([end], spans)))  # in order, as step by step
    if ps == 1:
        taken = np.full(most, bs, dtype=np.int64)
    else:  # a request opens a page at step i when i = -seq_first (mod page_size)
        taken = np.bincount((-seq_first) % ps, minlength=ps)[step % ps] * ps
    after = s.allocator.available_size() - np.cumsum(taken)  # free slots after each step
    free_before = np.concatenate(([after[0] + taken[0]], after[:-1]))
    # _run_on before each step: it starts before the next arrival, the free slots cover it
    m = min(
        int(np.searchsorted(ends[:-1], s.next_arrival_s, side="left")),
        int(np.count_nonzero(free_before >= bs * ps)),  # non-increasing: a prefix holds
    )
    if not m:
        return 0, end
    starts = ends[:m]
    arr.advance_many(starts)  # the step before each block step ended at its start
    if s.after_step is not None:
        s.after_step()
    ratio, decay, low = s.new_token_ratio, s._ratio_decay, s._ratio_min
    for _ in range(m):
        if ratio == low:  # where it stays
            break
        ratio = max(ratio - decay, low)
    s.new_token_ratio = ratio
    inputs = arr.block_inputs(m)
    nodes, tokens, leaves = s.cache.tree_stats()
    t0 = perf_counter_ns()
    loc = s.slots.decode_block(seq_first, arr.rows, m)
    t1 = perf_counter_ns()
    if s.cfg.batch_builder:
        s.builder.build_decode_block(loc, inputs)
    else:
        s.builder.write_decode_block_rows(loc, inputs)
    t2 = perf_counter_ns()
    used = cap - after[:m]
    _record(s, m, bs, starts, spans[:m], used, (nodes, tokens, leaves), t1 - t0, t2 - t1)
    return m, float(ends[m])


def _record(
    s: Scheduler,
    m: int,
    bs: int,
    starts: np.ndarray,
    spans: np.ndarray,
    used: np.ndarray,
    stats: tuple[int, int, int],
    alloc_ns: int,
    build_ns: int,
) -> None:
    """The block's op rows (``alloc``, then ``build_decode`` when the builder runs, per step)
    and step rows, laid out as ``OpRecorder.timed`` and ``Scheduler._log`` write them."""
    rec, start = s.rec, starts
    a_ns = _shares(alloc_ns, m)
    ops = [rec.code("alloc")]
    ns = [a_ns]
    cpu = a_ns.copy()
    if s.cfg.batch_builder:
        ops.append(rec.code("build_decode"))
        b_ns = _shares(build_ns, m)
        ns.append(b_ns)
        cpu += b_ns
    k = len(ops)
    ints = np.empty((m, k, 7), dtype=np.int64)
    ints[:, :, 0] = ops
    ints[:, :, 1:3] = bs  # key_len, result: the slots allocated / written
    ints[:, :, 3:6] = stats
    ints[:, :, 6] = rec.top
    floats = np.empty((m, k, 2))
    floats[:, :, 0] = np.stack(ns, axis=1)
    floats[:, :, 1] = start[:, None]
    rec.extend_rows(ints.reshape(m * k, 7), floats.reshape(m * k, 2))
    steps, c = s.steps, s.cache
    row = (steps.code("decode"), bs, bs, len(s.waiting), bs, 0, s.capacity)
    sints = np.empty((m, 10), dtype=np.int64)
    sints[:, :7] = row
    sints[:, 5] = used
    sints[:, 7:] = (c.evictable_size(), c.protected_size(), s.retractions)
    steps.extend_rows(sints, np.stack((start, spans, cpu * 1e-9), axis=1))
