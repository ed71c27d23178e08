"""The one Dask runner of ``sweep`` and ``study``: a cluster, tasks submitted to it, their results
handled as they complete, under a progress bar.

``dask.distributed`` is imported when a run starts, never at module import.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from radixbench.harness.experiments.impl_failure import ImplFailed, impl_failure
from radixbench.harness.experiments.progress import progress as progress_display

__all__ = ["client", "run_on_dask"]

T = TypeVar("T")


def client(scheduler: str | None, workers: int | None) -> Any:
    """A ``distributed.Client``: of the cluster at ``scheduler`` (``tcp://host:port``; 10 s to
    connect), else of a new ``LocalCluster`` of ``workers`` single-threaded worker processes
    (default: one per core; logs silenced, dashboard on a free port) that closing the client's
    ``cluster`` stops."""
    from distributed import Client, LocalCluster

    if scheduler:
        dask = Client(scheduler, timeout="10s")
    else:
        cluster = LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        )
        dask = Client(cluster)
    dask.register_plugin(_thread_locked_tqdm(), name="radixbench-tqdm-lock")
    return dask


def _thread_locked_tqdm() -> Any:
    """A worker plugin giving tqdm a thread lock in each worker process, before any task runs.

    tqdm's default lock holds a multiprocessing semaphore, which a worker stopped in the middle
    of a task (the cluster closed on Ctrl-C) never releases: the resource tracker then warns
    of "leaked semaphore objects" at exit. A worker runs one task at a time in its own process,
    so a thread lock is all its progress bars need. (Defined here: ``distributed`` is imported
    only when a run starts.)"""
    from distributed import WorkerPlugin

    class ThreadLockedTqdm(WorkerPlugin):
        def setup(self, worker: Any) -> None:
            import threading as th

            from tqdm import tqdm as bar

            bar.set_lock(th.RLock())

    return ThreadLockedTqdm()


def run_on_dask(
    submit: Callable[[Any], Mapping[Any, T]],
    on_done: Callable[[T, Any], None],
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    desc: str,
    unit: str,
    total: int | None = None,
    initial: int = 0,
) -> None:
    """Start a client (:func:`client`), let ``submit(client)`` submit the tasks (returns future
    -> the item it computes), and call ``on_done(item, future)`` for each future as it
    completes (``future.exception()`` / ``future.result()`` are the caller's to read; an
    exception ``on_done`` raises stops the run). A progress display ``desc`` counts
    completions in ``unit`` out of ``total`` (default: the tasks submitted), starting at
    ``initial`` (:func:`~radixbench.harness.experiments.progress.progress`: ``progress`` None
    gives a bar on a terminal, periodic lines in a log). The client, and a ``LocalCluster`` it
    started, are closed on the way out, also on error or Ctrl-C."""
    from distributed import as_completed

    dask = client(scheduler, workers)
    try:
        futures = submit(dask)
        count = len(futures) if total is None else total
        with progress_display(count, desc, unit, progress, initial) as bar:
            for fut in as_completed(futures):
                on_done(futures[fut], fut)
                bar.update(1)
    finally:
        cluster = getattr(dask, "cluster", None)
        dask.close()
        if cluster is not None:
            cluster.close()


def run_points(
    point_fn: Callable[..., list[dict[str, Any]]],
    args: tuple[Any, ...],
    order: Sequence[int],
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    desc: str,
) -> list[dict[str, Any]]:
    """The points of a study on Dask (:func:`run_on_dask`): ``point_fn(*args[:1], i,
    *args[1:])`` for each point index ``i`` of ``order`` (submitted in that order: the longest
    first, so the cluster ends together), every point's rows gathered as they complete (so in
    completion order; the caller sorts). A point that raises stops the study: with
    :class:`~radixbench.harness.experiments.impl_failure.ImplFailed` when an implementation
    under test raised (its one line, prefixed ``study point <i>: ``), else with
    ``RuntimeError("study point <i> failed: <its first line>")``."""
    rows: list[dict[str, Any]] = []
    head, rest = args[:1], args[1:]

    def submit(client: Any) -> dict[Any, int]:
        return {client.submit(_point, point_fn, *head, i, *rest, pure=False): i for i in order}

    def done(i: int, fut: Any) -> None:
        exc = fut.exception()
        if isinstance(exc, ImplFailed):
            raise exc.within(f"study point {i}: ")
        if exc is not None:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RuntimeError(f"study point {i} failed: {msg}")
        rows.extend(fut.result())

    run_on_dask(
        submit, done, scheduler=scheduler, workers=workers, progress=progress, desc=desc,
        unit="point",
    )  # fmt: skip
    return rows


def _point(point_fn: Callable[..., list[dict[str, Any]]], *args: Any) -> list[dict[str, Any]]:
    """``point_fn(*args)`` on a worker; an implementation under test that raises comes back
    as :class:`~radixbench.harness.experiments.impl_failure.ImplFailed` (the traceback it is
    read from stays on the worker)."""
    try:
        return point_fn(*args)
    except Exception as e:
        failure = impl_failure(e)
        if failure is None:
            raise
        raise failure from None
