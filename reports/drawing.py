"""Draw a report's plots in parallel, matplotlib imported while the report's tables are computed.

The figures are independent (each reads the run's frames and writes its own PNG atomically).
:class:`Drawing` forks one process as soon as the frames exist (``write_report`` does so before
its summaries, verdicts and tables): it imports matplotlib and the plotting modules and forks a
``multiprocessing`` pool of workers (one per core) that inherit them and the frames, then waits;
once the caller asks for the figures (:meth:`Drawing.results`, after the answer is out), the
workers draw them, and the figures whose data came later (the verdict bars) are sent along
(:meth:`Drawing.add`). The caller never imports matplotlib (a :class:`PlotJob` names its
function by module, imported where it is drawn): the import (~0.4 s of CPU) is paid once, in
the drawing process, beside the caller's work, which it does not slow down on two cores (one
process beside the caller; drawing in the meantime delayed a 1,000-request run's answer by
~0.4 s on a busy 2-core machine). The drawing processes freeze the heap they inherit
(``gc.freeze``): their garbage collections would otherwise walk the caller's whole heap (the
simulation's objects, torch's), touching every page of it (copy-on-write), ~0.35 s of CPU in
the smallest run. Nothing is pickled but late figures, names and paths; a figure is drawn byte
for byte as the caller would have drawn it. Where fork is not available, on one core, or for
a single figure, they are drawn in the caller, in order, by :meth:`Drawing.results`. An error
drawing a figure is raised in the caller as it would be serially.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["Drawing", "PlotJob", "draw_plots", "plot_workers"]

#: The figures the forked workers draw: set before the fork, read by :func:`_draw`.
_JOBS: dict[str, tuple[Callable[[Path], Path], Path]] = {}


@dataclass(frozen=True)
class PlotJob:
    """One figure: ``module.function(*args, path=PNG, **kwargs)``, the module imported where the
    figure is drawn (picklable when its arguments are, so it can be sent to a drawing process)."""

    module: str
    function: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, path: Path) -> Path:
        draw = getattr(importlib.import_module(self.module), self.function)
        return Path(draw(*self.args, path=path, **self.kwargs))


def plot_workers(n_plots: int) -> int:
    """Worker processes for ``n_plots`` figures: the cores this process may run on (at most
    the figure count); 0 (draw serially) with one core, one figure, or no ``fork``.
    ``RADIXBENCH_PLOT_WORKERS`` overrides the core count (``0``: serially)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    env = os.environ.get("RADIXBENCH_PLOT_WORKERS")
    cores = int(env) if env is not None and env.strip().isdigit() else _cores()
    n = min(cores, n_plots)
    return n if n > 1 else 0


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _quiet_worker() -> None:
    """A worker leaves Ctrl-C to the caller and dies quietly when the pool ends it (the
    handler inherited by fork, the caller's or :func:`_sigterm_deferred`'s, would raise in it
    or ignore the signal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _draw(name: str) -> tuple[str, Path]:
    draw, path = _JOBS[name]
    return name, draw(path)


def _draw_late(name: str, job: Callable[[Path], Path], path: Path) -> tuple[str, Path]:
    return name, job(path)


class Drawing:
    """The figures of ``jobs`` (name -> a function drawing it into the path it is given:
    ``plot_dir/<name>.png``) being drawn from now on by ``workers`` forked processes (default:
    :func:`plot_workers` of ``len(jobs) + late``, ``late`` being the figures :meth:`add` will
    give), or, with 0, drawn in this process by :meth:`results`. Use as a context manager
    (leaving it stops the drawing processes). Writes the files."""

    def __init__(
        self,
        jobs: Mapping[str, Callable[[Path], Path]],
        plot_dir: Path,
        workers: int | None = None,
        late: int = 0,
    ) -> None:
        self.plot_dir = plot_dir
        self._jobs = {name: (draw, plot_dir / f"{name}.png") for name, draw in jobs.items()}
        self._late: dict[str, Callable[[Path], Path]] = {}
        self._proc: multiprocessing.process.BaseProcess | None = None
        n = plot_workers(len(jobs) + late) if workers is None else workers
        if n <= 1:
            return
        plot_dir.mkdir(parents=True, exist_ok=True)
        ctx = multiprocessing.get_context("fork")
        jobs_in, self._jobs_out = ctx.Pipe(duplex=False)
        self._results_in, results_out = ctx.Pipe(duplex=False)
        _JOBS.clear()
        _JOBS.update(self._jobs)
        try:
            ends = (jobs_in, results_out, self._jobs_out, self._results_in)
            self._proc = ctx.Process(target=_serve, args=(n, *ends), name="radixbench-plots")
            with _sigterm_deferred():
                self._proc.start()
        finally:
            _JOBS.clear()
            jobs_in.close()
            results_out.close()

    @property
    def names(self) -> list[str]:
        """The figures' names: the first ones in order, then those added."""
        return [*self._jobs, *self._late]

    def add(self, name: str, job: Callable[[Path], Path]) -> None:
        """One more figure, drawn once :meth:`results` is asked (picklable when drawn by the
        workers: a :class:`PlotJob`)."""
        self._late[name] = job

    def results(self) -> Iterator[tuple[str, Path]]:
        """``(name, PNG path)`` of every figure, as each is done: in order when drawn here,
        in completion order by the workers. Raises what a drawing function raises."""
        if self._proc is None:
            for name, (draw, path) in self._jobs.items():
                yield name, draw(path)
            for name, draw in self._late.items():
                yield name, draw(self.plot_dir / f"{name}.png")
            return
        late = {name: (job, self.plot_dir / f"{name}.png") for name, job in self._late.items()}
        self._jobs_out.send(late)
        for _ in range(len(self._jobs) + len(late)):
            try:
                kind, name, value = self._results_in.recv()
            except EOFError:
                raise RuntimeError("the plot drawing process ended before its figures") from None
            if kind == "error":
                raise value
            yield name, value
        self.close()

    def close(self) -> None:
        """Stop the drawing processes (done, or abandoned on an error) and release them."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            self._jobs_out.close()
        proc.join(timeout=5)
        if proc.is_alive():
            proc.terminate()
            proc.join()
        self._results_in.close()

    def __enter__(self) -> Drawing:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and exc[0] is not None:
            self._proc.terminate()  # abandoned: no need to finish the figures
        self.close()


@contextlib.contextmanager
def _sigterm_deferred() -> Iterator[None]:
    """A SIGTERM during the block is re-raised once it is over. Raised by the caller's handler
    during a fork, it would land in an at-fork callback (logging's), where Python ignores
    exceptions: the run went on and exited 0. Masking the signal in this thread was not
    enough (it still failed so twice in a day under load, likely because another thread,
    torch's or Arrow's, took the signal and the handler still ran during the fork). So the
    handler is swapped for one that only notes the signal (main thread only, and only over a
    handler Python can restore; elsewhere nothing changes)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is None  # set from C: cannot be put back
    ):
        yield
        return
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if got:
            signal.raise_signal(signal.SIGTERM)


def _serve(n: int, jobs_in: Connection, results_out: Connection, *parents: Connection) -> None:
    """The drawing process: import the plotting modules and fork ``n`` workers at once, then,
    once the caller sends the late figures on ``jobs_in`` (:meth:`Drawing.results`), draw the
    inherited figures and the late ones; each result (or error) goes back on ``results_out``
    as it comes. Ends when all is sent, or when the caller closes ``jobs_in`` first."""
    gc.freeze()  # the caller's heap, inherited: never traversed by this process's collections
    for end in parents:
        end.close()
    _quiet_worker()
    for draw, _ in _JOBS.values():  # imported once here, inherited by the workers
        if isinstance(draw, PlotJob):
            importlib.import_module(draw.module)
    done: queue.SimpleQueue[tuple[str, str, Any]] = queue.SimpleQueue()

    def worker() -> None:
        for end in (jobs_in, results_out):
            end.close()  # only this process talks to the caller: its exit is their EOF
        _quiet_worker()

    gc.freeze()  # the plotting modules too, for the workers
    with multiprocessing.get_context("fork").Pool(n, initializer=worker) as pool:

        def submit(name: str, fn: Callable[..., tuple[str, Path]], *args: Any) -> None:
            pool.apply_async(
                fn, (name, *args),
                callback=lambda r: done.put(("ok", *r)),
                error_callback=lambda e: done.put(("error", name, e)),
            )  # fmt: skip

        try:
            late = jobs_in.recv()  # nothing is drawn before the caller asks for the figures
        except EOFError:  # the caller gave up
            return
        for name in _JOBS:
            submit(name, _draw)
        for name, (job, path) in late.items():
            submit(name, _draw_late, job, path)
        for _ in range(len(_JOBS) + len(late)):
            msg = done.get()
            try:
                results_out.send(msg)
            except Exception:  # an error that does not pickle: its text
                results_out.send(("error", msg[1], RuntimeError(f"{msg[1]}: {msg[2]!r}")))


def draw_plots(
    steps: Mapping[str, Callable[[Path], Path]], plot_dir: Path, workers: int | None = None
) -> Iterator[tuple[str, Path]]:
    """``(name, PNG path)`` for every figure of ``steps`` (name -> a function drawing it into
    the path it is given: ``plot_dir/<name>.png``), as each is done: in ``steps``' order when
    drawn serially, in completion order by ``workers`` forked processes (default:
    :func:`plot_workers`). Writes the files; raises what a drawing function raises."""
    with Drawing(steps, plot_dir, workers) as drawing:
        yield from drawing.results()
