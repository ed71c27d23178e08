"""Timing of every cache operation, batch build and KV allocation with ``perf_counter_ns``.

:class:`OpRecorder` is the one timing body of the simulator (it implements
:class:`radixbench.cache.interface.OpTimer`): :meth:`OpRecorder.timed` wraps a callable so
that each call reads the cache's ``tree_stats()`` (outside the timer), times the call alone
and appends one row to flat columnar buffers (``sim.records.RecordLog``: two array appends per
op, one DataFrame at the end, schema in docs/CONTRACTS.md). A cache puts it around its own
operations (``PrefixCache.instrument``); the scheduler around its batch builds, the slot
allocator around its allocator calls. In the isolated clock mode nothing measured is added to
simulated time; in the coupled mode the scheduler takes ``take_charge_ns()`` (top-level calls
only: ``insert`` inside ``checkpoint`` is not counted twice) and adds it to the step's
duration.

A timed call nested in another (SGLang's ``checkpoint`` calling its own ``insert``) costs the
outer call more than the bookkeeping it measures and leaves out (its stats read and row): the
wrapper's own frame and the halves of its clock reads outside what it measures. That residual
(:attr:`OpRecorder.nested_ns`, about 250 ns per nested call on this machine) is calibrated once
per process (:func:`nested_frame_ns`: an empty function timed through the same wrapper inside a
timed call, against the same call made directly) and subtracted from the outer call per nested
call, so that an operation's ns do not depend on whether the calls it makes are timed too.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import cache
from statistics import median
from time import perf_counter_ns
from typing import Any, TypeVar

from radixbench.cache.interface import PrefixCache, TreeStats
from radixbench.sim.records import RecordLog

R = TypeVar("R")

#: The per-op table's columns and dtypes, in record order (docs/CONTRACTS.md).
_SCHEMA = (
    ("op", "str"),
    ("ns", "int64"),
    ("key_len", "int64"),
    ("result", "int64"),
    ("tree_nodes", "int64"),
    ("tree_tokens", "int64"),
    ("evictable_leaves", "int64"),
    ("parent", "str"),
    ("sim_time_s", "float64"),
)


class OpRecorder(RecordLog):
    """Append-only record of timed operations (see docs/CONTRACTS.md, per-op table), columnar
    (:class:`RecordLog`): per op one ``ints.extend`` of ``(op code, key_len, result,
    tree_nodes, tree_tokens, evictable_leaves, parent code)`` (int32) and one
    ``floats.extend((ns, sim_time_s))`` (the ns, an int64 column, kept among the floats).
    ``parent``: the timed op the call was made in (``""`` for a call the simulator made
    itself, ``"checkpoint"`` for the ``insert`` / ``match_prefix`` inside a checkpoint...), so
    call sites can be compared like for like across implementations whose operations nest
    differently. ``clock``: the simulated time (s) each row is stamped with. ``nested_ns``:
    the ns subtracted from a timed call per timed call nested in it (:attr:`nested_ns`;
    default: this process's :func:`nested_frame_ns`)."""

    def __init__(
        self, clock: Callable[[], float] = lambda: 0.0, nested_ns: int | None = None
    ) -> None:
        # compact rows (a row per decode step on a whole trace): 32-bit ints, ns among the
        # floats (row layout: ints (op, key_len, result, nodes, tokens, leaves, parent),
        # floats (ns, sim_time_s))
        super().__init__(_SCHEMA, int32=True, wide=("ns",))
        self.clock = clock
        self.top = self.code("")  # the parent code of a top-level call
        # op codes of the timed calls under way, innermost last, below them ``top``: a call
        # made while another is under way is nested (not charged to the coupled clock again)
        self.parents = [self.top]
        self.charge_ns = 0  # top-level timed ns since the scheduler last took them
        # ns spent in bookkeeping (:meth:`untimed`, nested calls' stats reads and rows) so far:
        # a timed call subtracts what accrued while it ran
        self._excluded = [0]
        #: the timer's own cost to a call per timed call nested in it, beyond the bookkeeping
        #: it measures (its frame, the unmeasured halves of its clock reads): subtracted from
        #: the outer call's ns (module docstring)
        self.nested_ns = nested_frame_ns() if nested_ns is None else nested_ns

    def take_charge_ns(self) -> int:
        """Measured ns of top-level operations since the last call (and reset): what the
        ``coupled`` clock adds to the step's simulated time."""
        ns, self.charge_ns = self.charge_ns, 0
        return ns

    def add(
        self,
        op: str,
        ns: int,
        key_len: int,
        result: int,
        tree_nodes: int,
        tree_tokens: int,
        evictable_leaves: int,
        sim_time_s: float,
    ) -> None:
        """Record one operation (charged to the coupled clock unless nested in a timed one)."""
        if len(self.parents) == 1:
            self.charge_ns += ns
        code = self.code(op)
        self.floats.extend((ns, sim_time_s))
        self.ints.extend(
            (code, key_len, result, tree_nodes, tree_tokens, evictable_leaves, self.parents[-1])
        )

    def timed(
        self,
        op: str,
        fn: Callable[..., R],
        stats: Callable[[], TreeStats],
        key_len: Callable[..., int],
        result: Callable[..., int],
    ) -> Callable[..., R]:
        """``fn`` timed alone: each call reads ``stats()``, times ``fn(*args)`` (positional
        arguments only) and records ``op``, the ns, ``key_len(*args)``, ``result(ret,
        *args)``, the stats, ``clock()`` and the parent op (:attr:`parents`), so the coupled
        clock is charged the top-level calls only. The ns leave out what ran under
        :meth:`untimed` and the bookkeeping of timed calls nested in it (their stats reads and
        rows, and :attr:`nested_ns` per nested call; never below 0): the time of the
        implementation's own code. Exceptions propagate (nothing is recorded)."""
        code = self.code(op)
        ints_extend, floats_extend, clock = self.ints.extend, self.floats.extend, self.clock
        parents, top, excluded, residual = self.parents, self.top, self._excluded, self.nested_ns

        def call(*args: Any) -> R:
            b0 = perf_counter_ns()
            n, t, lv = stats()
            parent = parents[-1]
            parents.append(code)
            x0 = excluded[0]
            t0 = perf_counter_ns()
            try:
                res = fn(*args)
            finally:
                t1 = perf_counter_ns()
                parents.pop()
            ns = t1 - t0 - (excluded[0] - x0)
            if ns < 0:  # nested calls' calibrated frames over a call doing next to nothing
                ns = 0
            if parent == top:
                self.charge_ns += ns
            floats_extend((ns, clock()))
            ints_extend((code, key_len(*args), result(res, *args), n, t, lv, parent))
            # this call's own bookkeeping and frame are not the time of a call it is nested in
            excluded[0] += t0 - b0 + perf_counter_ns() - t1 + residual
            return res

        return call

    def untimed(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)``, its ns left out of every timed call under way: an adapter's
        bookkeeping inside the implementation's call (what it does for radixbench, not what the
        implementation does). Exceptions propagate."""
        t0 = perf_counter_ns()
        try:
            return fn(*args)
        finally:
            self._excluded[0] += perf_counter_ns() - t0

    def timed_with_inner(
        self,
        op: str,
        fn: Callable[..., R],
        stats: Callable[[], TreeStats],
        key_len: Callable[..., int],
        result: Callable[..., int],
        inner_op: str,
        inner_fn: Callable[..., Any],
    ) -> tuple[Callable[..., R], Callable[..., Any]]:
        """``(timed fn, timed inner_fn)``: ``fn`` as :meth:`timed`, and after each of its rows
        one ``inner_op`` row with the ns the calls of the returned ``inner_fn`` took during
        that call (its other columns repeat ``op``'s row; it is part of ``op``'s ns already,
        so never charged to the coupled clock again). Calls of ``inner_fn`` outside ``fn``
        are not timed. The caller installs the returned ``inner_fn`` where ``fn`` calls it
        (e.g. ``allocator.free`` for ``evict``)."""
        timed_fn = self.timed(op, fn, stats, key_len, result)
        state = [False, 0]  # inside fn; inner ns summed in it
        code, outer_code = self.code(inner_op), self.code(op)

        def inner(*args: Any) -> Any:
            if not state[0]:
                return inner_fn(*args)
            t0 = perf_counter_ns()
            try:
                return inner_fn(*args)
            finally:
                state[1] += perf_counter_ns() - t0

        def outer(*args: Any) -> R:
            state[0], state[1] = True, 0
            try:
                res = timed_fn(*args)
            finally:
                state[0] = False
            ints, floats = self.last_row()  # the row ``timed_fn`` just appended
            ints[0], ints[-1], floats[0] = code, outer_code, state[1]  # made inside ``op``
            self.ints.extend(ints)
            self.floats.extend(floats)
            return res

        return outer, inner


def _zero(*_: Any) -> int:
    return 0


def _no_stats() -> TreeStats:
    return 0, 0, 0


def _empty(*_: Any) -> None:
    return None


def calibrate_nested_ns(calls: int = 8, reps: int = 1_000) -> int:
    """The ns a timed call nested in another adds to the outer call beyond the bookkeeping it
    leaves out (:attr:`OpRecorder.nested_ns`): an outer timed call making ``calls`` calls of
    an empty function through :meth:`OpRecorder.timed` and one making them directly, in turn
    ``reps`` times (garbage collector off); the median of the paired differences of their
    recorded ns / ``calls``, at least 0. Reads the clock the timer reads (module
    ``perf_counter_ns``); takes about ``reps`` x ``calls`` x 0.5 µs."""
    rec = OpRecorder(nested_ns=0)
    nested = rec.timed("nested", _empty, _no_stats, _zero, _zero)
    each = range(calls)

    def through_timer() -> None:
        for _ in each:
            nested(0)

    def direct() -> None:
        for _ in each:
            _empty(0)

    timed_outer = rec.timed("outer", through_timer, _no_stats, _zero, _zero)
    direct_outer = rec.timed("outer", direct, _no_stats, _zero, _zero)
    floats, diffs = rec.floats, []
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(reps):
            timed_outer()
            ns = floats[-2]  # the outer row's ns (floats per row: ns, sim_time_s)
            direct_outer()
            diffs.append(ns - floats[-2])
    finally:
        if was:
            gc.enable()
    return max(0, round(median(diffs) / calls))


@cache
def nested_frame_ns() -> int:
    """:func:`calibrate_nested_ns`, once per process: the default :attr:`OpRecorder.nested_ns`."""
    return calibrate_nested_ns()


def instrument(cache: PrefixCache, rec: OpRecorder) -> PrefixCache:
    """``cache.instrument(rec)``: the cache puts the recorder around its own operations (see
    ``PrefixCache.instrument``); returns the same (mutated) cache."""
    cache.instrument(rec)
    return cache
