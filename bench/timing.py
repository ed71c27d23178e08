"""How the cache benchmarks time a call: interleaved rounds or each function alone, medians in
ns, with the cyclic garbage collector collected once and then off (``GC_METHOD``).

Garbage collector: collected once before a bench point and off for the whole point, then one
untimed warm-up round; never collected between timed calls (a collection there hands freed
memory back to the OS, and the next timed call pays the page faults).
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import perf_counter_ns
from typing import Any

from radixbench.sim.run import paused_gc

__all__ = ["GC_METHOD", "Timed", "alone", "gc_paused", "interleaved", "interleaved_stats"]

#: What :func:`interleaved_stats` times: a function, or ``(prepare, run)`` where ``prepare`` runs
#: untimed right before each timed ``run`` (e.g. builds the fresh cache ``run`` fills).
#: One row of a benchmark's table: column -> value.
Row = dict[str, Any]

Timed = Callable[[], object] | tuple[Callable[[], object], Callable[[], object]]


#: How the benches handle the cyclic garbage collector (printed with the method).
GC_METHOD = (
    "garbage collector: collected once before each bench point, then off for the whole point "
    "and one untimed warm-up round run (never collected between timed calls: a collection "
    "hands freed memory back to the OS and the next timed call pays the page faults)"
)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Collect once (``gc.collect``), then keep the cyclic garbage collector off for the block
    with the simulator's pause (:func:`radixbench.sim.run.paused_gc`: its previous state is
    restored after); the caller runs its warm-up after entering (see ``GC_METHOD``)."""
    gc.collect()
    with paused_gc():
        yield


def interleaved(fns: dict[str, Callable[[], object]], reps: int) -> dict[str, float]:
    """Median ns per call of each function, timed round-robin ``reps`` times after one untimed
    warm-up round, with the garbage collector off throughout (``GC_METHOD``)."""
    times: dict[str, list[int]] = {k: [] for k in fns}
    with gc_paused():
        for fn in fns.values():
            fn()
        for _ in range(reps):
            for name, fn in fns.items():
                t0 = perf_counter_ns()
                fn()
                times[name].append(perf_counter_ns() - t0)
    return {k: float(statistics.median(v)) for k, v in times.items()}


def alone(fns: dict[str, Callable[[], object]], reps: int) -> dict[str, float]:
    """Median ns per call of each function timed alone: one untimed call, then ``reps`` calls
    back to back, one function after the other, garbage collector off (``GC_METHOD``)."""
    med: dict[str, float] = {}
    with gc_paused():
        for name, fn in fns.items():
            fn()
            times = []
            for _ in range(reps):
                t0 = perf_counter_ns()
                fn()
                times.append(perf_counter_ns() - t0)
            med[name] = float(statistics.median(times))
    return med


def interleaved_stats(
    fns: dict[str, Timed], reps: int, per: int = 1
) -> dict[str, tuple[float, float, float]]:
    """``(median, min, max)`` ns per call of each function over ``reps`` interleaved rounds
    after one untimed warm-up round, garbage collector off throughout (``GC_METHOD``); a
    ``(prepare, run)`` pair times ``run`` only; ``per``: each timed call does ``per`` units of
    work, and the figures are per unit."""
    pairs = {k: f if isinstance(f, tuple) else (_nothing, f) for k, f in fns.items()}
    times: dict[str, list[int]] = {k: [] for k in fns}
    with gc_paused():
        for prepare, run in pairs.values():
            prepare()
            run()
        for _ in range(reps):
            for name, (prepare, run) in pairs.items():
                prepare()
                t0 = perf_counter_ns()
                run()
                times[name].append(perf_counter_ns() - t0)
    return {k: (statistics.median(v) / per, min(v) / per, max(v) / per) for k, v in times.items()}


def _nothing() -> None:
    pass
