"""Progress of a long run: a tqdm bar on a terminal, plain periodic lines in a log.

A bar redrawn with carriage returns is unreadable in a log file and tqdm draws none where
stderr is not a terminal, so a run sent to a log (``radixbench compare ... 2> run.log``, CI)
said nothing until it ended: a HiCache compare's log stayed empty for 10 minutes.
:func:`progress` gives a tqdm bar when stderr is a terminal and, when it is not, a
:class:`PlainProgress` that writes one line every :data:`EVERY_S` seconds of wall time
(``compare: 1,200/4,000 req (30%), 12 s elapsed, ~28 s left``) and a last line when it
printed any (a run shorter than that writes nothing).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["EVERY_S", "PlainProgress", "progress"]

#: Seconds of wall time between two lines of :class:`PlainProgress`.
EVERY_S = 10.0


class PlainProgress:
    """Progress lines for a log: ``update(n)`` counts; a line to ``stream`` (default stderr)
    once ``every_s`` seconds have passed since the last one (or the start), and a final one
    on a clean exit when any was written. ``clock``: seconds (monotonic), replaceable in
    tests."""

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str,
        initial: int = 0,
        every_s: float | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.every_s = EVERY_S if every_s is None else every_s
        self.stream, self.clock = stream, clock
        self.start = self.last = clock()
        self.lines = 0

    def _line(self, now: float, done: bool = False) -> None:
        elapsed = now - self.start
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        head = f"{self.desc}: {self.n:,}/{self.total:,} {self.unit}{share}"
        if done:
            tail = f", done in {elapsed:,.0f} s"
        elif 0 < self.n < self.total:
            left = elapsed * (self.total - self.n) / self.n
            tail = f", {elapsed:,.0f} s elapsed, ~{left:,.0f} s left"
        else:
            tail = f", {elapsed:,.0f} s elapsed"
        print(head + tail, file=self.stream or sys.stderr, flush=True)
        self.lines += 1
        self.last = now

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.every_s:
            self._line(now)

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None and self.lines:
            self._line(self.clock(), done=True)


def progress(
    total: int, desc: str, unit: str, enabled: bool | None = None, initial: int = 0
) -> Any:
    """The progress display of a run of ``total`` ``unit`` (a context manager with
    ``update(n)``): ``enabled`` False shows none, True a tqdm bar; None (the default of the
    commands) a tqdm bar when stderr is a terminal, else :class:`PlainProgress` lines."""
    from tqdm import tqdm

    if enabled is None and not _stderr_is_terminal():
        return PlainProgress(total, desc, unit, initial)
    disable = None if enabled is None else not enabled
    return tqdm(total=total, initial=initial, unit=unit, desc=desc, disable=disable)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False
