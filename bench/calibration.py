"""A machine's speed, measured in the run that reports the figures, so that figures taken on
different machines can be compared (absolute CPU seconds differ ~3x between this project's
machines; a figure divided by the calibration of its own run differs far less).

Two fixed workloads, each timed in CPU time (``time.process_time_ns``: this process, all its
threads) as the median of ``samples`` runs after one untimed run:

* the **reference loop** (:func:`reference_loop`): pure Python, 20,000 iterations of the kind of
  work the cache's Python code does (attribute and dict access, int arithmetic, list append and
  pop, a short ``while``); its median CPU time is the **calibration unit** ``cal``, about
  5 ms on this project's 2-core VM. Every figure the benches print is also given as a multiple
  of it (``figure / cal``, both in the same unit of time), e.g. ``0.5 cal``.
* the **numpy kernel** (:func:`numpy_kernel`): sort, cumulative sum and an equality count over a
  fixed 200,000-element int64 array (single-threaded numpy); recorded beside ``cal`` to tell a
  machine with slow memory or no SIMD from one with a slow interpreter, not used as a unit.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Calibration", "calibrate", "numpy_kernel", "reference_loop"]


class _TrieNode:
    __slots__ = ("children", "hits", "key")

    def __init__(self, key: int) -> None:
        self.key = key
        self.hits = 0
        self.children: dict[int, _TrieNode] = {}


def reference_loop(n: int = 20_000) -> int:
    """The fixed pure-Python reference workload (``n`` iterations); returns a checksum so that
    nothing is optimised away."""
    root = _TrieNode(0)
    stack: list[_TrieNode] = []
    total = 0
    for i in range(n):
        k = (i * 2_654_435_761) & 1023
        node = root.children.get(k)
        if node is None:
            node = root.children[k] = _TrieNode(k)
        node.hits += 1
        stack.append(node)
        if len(stack) > 8:
            total += stack.pop(0).hits
        j = i & 7
        while j:
            total ^= j << 3
            j >>= 1
    return total


def numpy_kernel(n: int = 200_000) -> int:
    """The fixed numpy workload over ``n`` int64 values; returns a checksum."""
    import numpy as np

    a = (np.arange(n, dtype=np.int64) * 2_654_435_761) % 1_000_003
    s = np.sort(a)
    c = np.cumsum(s)
    return int(np.count_nonzero(s[1:] == s[:-1]) + int(c[-1] & 0xFFFF))


def _cpu_ns(fn: Callable[[], object], samples: int) -> float:
    fn()
    times = []
    for _ in range(samples):
        t0 = time.process_time_ns()
        fn()
        times.append(time.process_time_ns() - t0)
    return float(statistics.median(times))


@dataclass(frozen=True)
class Calibration:
    """``python_ns``: median CPU ns of :func:`reference_loop` (the unit ``cal``); ``numpy_ns``:
    median CPU ns of :func:`numpy_kernel`; ``samples``: timed runs of each."""

    python_ns: float
    numpy_ns: float
    samples: int

    def cal(self, ns: float) -> float:
        """A time in ns as a multiple of the calibration unit (dimensionless)."""
        return ns / self.python_ns

    def fmt(self, ns: float) -> str:
        """``"<x> cal"`` for a time in ns: 3 significant digits, whole numbers from 1,000."""
        x = self.cal(ns)
        return f"{x:,.0f} cal" if x >= 1000 else f"{x:.3g} cal"

    def line(self) -> str:
        """The printed calibration figure (ms of CPU time, medians)."""
        return (
            f"calibration (this run, CPU time, median of {self.samples}): pure-Python reference "
            f"loop {self.python_ns / 1e6:.2f} ms = 1 cal; numpy kernel "
            f"{self.numpy_ns / 1e6:.2f} ms = {self.cal(self.numpy_ns):.3g} cal "
            "(bench/calibration.py)"
        )


def calibrate(samples: int = 21) -> Calibration:
    """Time both workloads now, ``samples`` runs each (about 0.2 s in all)."""
    return Calibration(_cpu_ns(reference_loop, samples), _cpu_ns(numpy_kernel, samples), samples)
