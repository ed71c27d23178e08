"""Draw a report's plots in parallel: one forked worker process per core, each drawing whole
figures, so writing the report takes a fraction of its serial wall time.

The figures are independent (each reads the run's frames and writes its own PNG atomically),
so they are drawn by a ``multiprocessing`` pool of the ``fork`` start method: the workers
inherit the frames and the imported plotting modules (nothing is pickled but the plot's name
and the path it wrote) and draw what the parent would have drawn, byte for byte. Where fork
is not available, on one core, or for a single figure, they are drawn in this process, in
order. An error drawing a figure is raised here as it would be serially.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

__all__ = ["draw_plots", "plot_workers"]

#: The figures the forked workers draw: set before the pool forks, read by :func:`_draw`.
_JOBS: dict[str, tuple[Callable[[Path], Path], Path]] = {}


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
    """A worker leaves Ctrl-C to the parent and dies quietly when the pool ends it (the
    parent's own SIGTERM handler, inherited by fork, would raise in it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _draw(name: str) -> tuple[str, Path]:
    draw, path = _JOBS[name]
    return name, draw(path)


def draw_plots(
    steps: Mapping[str, Callable[[Path], Path]], plot_dir: Path, workers: int | None = None
) -> Iterator[tuple[str, Path]]:
    """``(name, PNG path)`` for every figure of ``steps`` (name -> a function drawing it into
    the path it is given: ``plot_dir/<name>.png``), as each is done: in ``steps``' order when
    drawn serially, in completion order by ``workers`` forked processes (default:
    :func:`plot_workers`). Writes the files; raises what a drawing function raises."""
    jobs = {name: (draw, plot_dir / f"{name}.png") for name, draw in steps.items()}
    n = plot_workers(len(jobs)) if workers is None else workers
    if n <= 1:
        for name, (draw, path) in jobs.items():
            yield name, draw(path)
        return
    plot_dir.mkdir(parents=True, exist_ok=True)
    _JOBS.clear()
    _JOBS.update(jobs)
    try:
        pool = multiprocessing.get_context("fork").Pool(n, initializer=_quiet_worker)
        try:
            yield from pool.imap_unordered(_draw, list(jobs), chunksize=1)
            pool.close()
        finally:
            pool.terminate()
            pool.join()
    finally:
        _JOBS.clear()
