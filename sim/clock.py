"""Simulated time: the environment every server runs on, and the clock its records are stamped
with.

:class:`SimEnvironment` is simpy's ``Environment`` with one addition, :meth:`timeout_at`: a
timeout processed at an absolute simulated time. A scheduler that runs several decode steps in
one event (``sim.scheduler``'s decode runs) knows the float its last step ends at, ``t_k =
(...(t_0 + s_1) + ...) + s_k`` as step by step events would have reached it, and must wake
exactly then; a relative ``timeout(d)`` lands on ``now + d``, which for some ``t_k`` no float
``d`` rounds to (e.g. ``0.7972708557601245 + d`` skips ``3.795968790610672``).
"""

from __future__ import annotations

from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL

__all__ = ["SimEnvironment", "StepClock"]


class SimEnvironment(simpy.Environment):
    """``simpy.Environment`` plus :meth:`timeout_at`."""

    def timeout_at(self, t: float) -> simpy.Event:
        """An event processed at simulated time ``t`` (s) exactly, with normal priority and in
        creation order among events at that time, as a ``timeout`` made now would be. Raises
        ``ValueError`` if ``t`` is before ``now``. (Built as simpy 4's ``Timeout`` builds itself:
        a triggered event pushed on the queue; only the time is given, not a delay.)"""
        if t < self._now:
            raise ValueError(f"timeout_at: {t} is before now ({self._now})")
        ev = simpy.Event(self)
        ev._ok = True
        ev._value = None
        heappush(self._queue, (t, NORMAL, next(self._eid), ev))
        return ev


class StepClock:
    """The simulated time (s) a server's records are stamped with: ``env.now``, except while
    the scheduler runs decode steps ahead of the event queue (``Scheduler``'s decode runs),
    when ``at`` holds the start of the step under way. Callable (``OpRecorder``'s clock)."""

    __slots__ = ("at", "env")

    def __init__(self, env: Any) -> None:
        self.env = env
        self.at: float | None = None

    def __call__(self) -> float:
        at = self.at
        return float(self.env.now) if at is None else at
