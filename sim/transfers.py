"""Simulated time of HiCache transfers: the host link and the storage backend.

A tiered cache (``radixbench.cache.hicache``, or sglang's own driven by
``radixbench.cache.sglang.hicache``) starts transfers as ``CacheAction`` s (``take_actions``);
:class:`TransferEngine` gives each its simulated duration and reports its completion back to
the cache's controller at that time, which the cache learns when it next polls its events
(``check_events``). Nothing moves: durations follow from bytes and bandwidths.

Queueing models, and why:

* **Host link** (device<->host over PCIe; ``d2h`` backups, ``h2d`` load-backs) — two FIFO
  streams, one per direction, as sglang 0.5.23 issues each direction on its own CUDA stream
  (``device_to_host_stream``, ``host_to_device_stream``, ``managers/cache_controller.py:
  885-1069``): within a stream operations run in order; the heads of the two streams run at
  once and **share the link's bandwidth equally** (processor sharing, the fluid model of
  concurrent DMA / copy-kernel flows). By default the link is half-duplex (``duplex=False``):
  write-through traffic slows a load-back running beside it, as the copy kernels of sglang's
  default ``--hicache-io-backend kernel`` share the GPU's PCIe and host-memory path;
  ``duplex=True`` gives each direction the full bandwidth (two independent DMA engines).
* **Storage** — three FIFO servers, one per thread of sglang's controller: hit queries
  (``prefetch_thread_func``), reads (``prefetch_io_aux_func``) and writes
  (``backup_thread_func``), each handling one operation at a time in order of submission. An
  operation is split into batches of 128 pages (``STORAGE_BATCH_SIZE``); each batch costs the
  backend's per-call latency plus its bytes over the read or write bandwidth, as
  ``mem_cache/storage/sim_storage.py`` sleeps ``op_latency + bytes / bandwidth`` per call
  (``_sleep_io``, ``:52-57``); a query costs the latency per batch and stops at the first batch
  with a missing page (``_storage_hit_query``); a read stops before its next batch once its
  prefetch was terminated (``_page_transfer``, ``cache_controller.py:1155-1206``).

A blocking transfer (``write_back``'s synchronous backup) delays whatever the scheduler does
next: :meth:`TransferEngine.submit` returns the time the scheduler may go on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from radixbench.cache.hicache.storage import STORAGE_BATCH_PAGES
from radixbench.cache.interface import CacheAction
from radixbench.sim.records import RecordLog

__all__ = ["TRANSFER_SCHEMA", "HostLink", "StorageServer", "TransferEngine"]

#: One row per transfer (docs/CONTRACTS.md, stem ``transfers``).
TRANSFER_SCHEMA = (
    ("link", "str"),
    ("kind", "str"),
    ("tokens", "int64"),
    ("bytes", "int64"),
    ("submit_s", "float64"),
    ("start_s", "float64"),
    ("end_s", "float64"),
)
_EPS = 1e-12


@dataclass(eq=False)
class _Flow:
    stream: str
    kind: str
    tokens: int
    nbytes: float
    remaining: float
    submit_s: float
    on_done: Callable[[], None]
    start_s: float = -1.0
    end_s: float = -1.0


class HostLink:
    """The device<->host link (module docstring). ``bytes_s``: bandwidth (B/s); ``duplex``:
    each direction gets all of it."""

    name = "host"

    def __init__(self, bytes_s: float, duplex: bool = False) -> None:
        if not bytes_s > 0:
            raise ValueError(f"host link bandwidth must be > 0 B/s, got {bytes_s}")
        self.bytes_s = bytes_s
        self.duplex = duplex
        self.t = 0.0
        self.streams: dict[str, deque[_Flow]] = {"d2h": deque(), "h2d": deque()}

    def _rate(self) -> float:
        active = sum(1 for q in self.streams.values() if q)
        return self.bytes_s if self.duplex or active <= 1 else self.bytes_s / active

    def submit(self, stream: str, kind: str, tokens: int, nbytes: float, t: float,
               on_done: Callable[[], None]) -> _Flow:  # fmt: skip
        q = self.streams[stream]
        flow = _Flow(stream, kind, tokens, nbytes, nbytes, t, on_done)
        if not q:
            flow.start_s = t
        q.append(flow)
        return flow

    def next_time(self) -> float:
        heads = [q[0] for q in self.streams.values() if q]
        if not heads:
            return float("inf")
        return self.t + min(f.remaining for f in heads) / self._rate()

    def advance(self, t: float) -> list[_Flow]:
        """Run the link to ``t``; returns the flows that completed (completion order)."""
        done: list[_Flow] = []
        while True:
            heads = [q[0] for q in self.streams.values() if q]
            if not heads:
                self.t = max(self.t, t)
                return done
            rate = self._rate()
            first = min(heads, key=lambda f: f.remaining)
            nxt = self.t + first.remaining / rate
            if nxt > t:
                moved = (t - self.t) * rate
                if moved > 0:
                    for f in heads:
                        f.remaining -= moved
                    self.t = t
                return done
            moved = first.remaining
            for f in heads:
                f.remaining -= moved
            first.remaining = 0.0
            self.t = max(self.t, nxt)
            for f in heads:
                if f.remaining <= _EPS * max(1.0, f.nbytes):
                    q = self.streams[f.stream]
                    q.popleft()
                    f.end_s = self.t
                    done.append(f)
                    if q:
                        q[0].start_s = self.t

    def predict(self, flow: _Flow) -> float:
        """When ``flow`` ends if nothing else is submitted (a copy of the link is run)."""
        if flow.end_s >= 0:
            return flow.end_s
        clone = HostLink(self.bytes_s, self.duplex)
        clone.t = self.t
        mine: _Flow | None = None
        for s, q in self.streams.items():
            for f in q:
                c = _Flow(f.stream, f.kind, f.tokens, f.nbytes, f.remaining, f.submit_s, _noop)
                clone.streams[s].append(c)
                if f is flow:
                    mine = c
        assert mine is not None, "flow is not on this link"
        while mine.end_s < 0:
            clone.advance(clone.next_time())
        return mine.end_s


def _noop() -> None:
    pass


@dataclass(eq=False)
class _Job:
    kind: str
    batches: Iterator[tuple[float, int, Callable[[], bool]]]
    submit_s: float
    tokens: int = 0
    nbytes: int = 0
    start_s: float = -1.0
    on_end: Callable[[], None] = _noop


@dataclass(eq=False)
class StorageServer:
    """One storage thread (module docstring): jobs in FIFO order, each a sequence of batches
    ``(service s, tokens, at_end)``; ``at_end()`` runs when the batch ends and returns whether
    the job goes on."""

    name: str
    jobs: deque[_Job] = field(default_factory=deque)
    t: float = 0.0
    batch_end: float = float("inf")
    batch_cb: Callable[[], bool] | None = None
    #: jobs ended since the engine last looked, with their end times
    finished: list[tuple[_Job, float]] = field(default_factory=list)

    def submit(self, job: _Job, t: float) -> None:
        self.jobs.append(job)
        if len(self.jobs) == 1:
            self._start(max(t, self.t))

    def _start(self, t: float) -> None:
        self.t = t
        while self.jobs:
            job = self.jobs[0]
            if job.start_s < 0:
                job.start_s = t
            nxt = next(job.batches, None)
            if nxt is not None:
                service, tokens, cb = nxt
                job.tokens += tokens
                self.batch_end, self.batch_cb = t + service, cb
                return
            self.jobs.popleft()
            job.on_end()
            self.finished.append((job, t))
        self.batch_end, self.batch_cb = float("inf"), None

    def next_time(self) -> float:
        return self.batch_end

    def step(self) -> None:
        """End the current batch (at ``next_time()``) and start what follows."""
        t, cb = self.batch_end, self.batch_cb
        assert cb is not None
        if not cb():  # the job stops here
            job = self.jobs[0]
            job.batches = iter(())
        self._start(t)


class TransferEngine:
    """Times a tiered cache's transfers (module docstring). ``bytes_per_token``: KV bytes of
    one token; ``host_bytes_s``: the host link (B/s) and ``duplex``; ``storage``: the cache's
    ``StorageConfig`` (read / write bandwidth, latency) or None; ``page_size``: tokens per
    page. ``log``: one row per transfer (:data:`TRANSFER_SCHEMA`)."""

    def __init__(
        self,
        bytes_per_token: int,
        host_bytes_s: float,
        page_size: int,
        storage: Any = None,
        duplex: bool = False,
    ) -> None:
        self.bpt = bytes_per_token
        self.page = page_size
        self.host = HostLink(host_bytes_s, duplex)
        self.storage = storage
        self.servers = {n: StorageServer(n) for n in ("l3_query", "l3_read", "l3_write")}
        self.log = RecordLog(TRANSFER_SCHEMA)
        self.t = 0.0
        self.pending_h2d: list[_Flow] = []
        self.inflight: list[tuple[_Flow, Any]] = []  # host flows and their completion events

    # ------------------------------------------------------------------ time
    def next_time(self) -> float:
        return min(self.host.next_time(), *(s.next_time() for s in self.servers.values()))

    def advance(self, t: float) -> None:
        """Run every link and server to ``t`` in time order, reporting completions."""
        while True:
            nxt = self.next_time()
            if nxt > t:
                break
            if self.host.next_time() <= nxt:
                for f in self.host.advance(nxt):
                    self._record("host", f.kind, f.tokens, f.nbytes, f.submit_s, f.start_s, f.end_s)
                    f.on_done()
            else:
                self.host.advance(nxt)
                for s in self.servers.values():
                    if s.next_time() <= nxt:
                        s.step()
                        for job, end in s.finished:
                            self._record(s.name, job.kind, job.tokens, job.nbytes, job.submit_s,
                                         job.start_s, end)  # fmt: skip
                        s.finished.clear()
                        break
        self.host.advance(t)
        self.t = max(self.t, t)

    def _record(self, link: str, kind: str, tokens: int, nbytes: float, submit: float,
                start: float, end: float) -> None:  # fmt: skip
        log = self.log
        log.ints.extend((log.code(link), log.code(kind), tokens, int(nbytes)))
        log.floats.extend((submit, start, end))

    # ------------------------------------------------------------------ submissions
    def submit(self, actions: Iterable[CacheAction], t: float) -> float:
        """Start ``actions`` at ``t`` (s); returns when the scheduler may go on: ``t``, or the
        end of the last blocking transfer among them."""
        t = max(t, self.t)
        self.advance(t)
        for a in actions:
            f = a.fields
            if a.kind in ("d2h", "h2d"):
                ev = f["ack"].finish_event
                flow = self.host.submit(a.kind, a.kind, f["tokens"], f["tokens"] * self.bpt, t,
                                        ev.set)  # fmt: skip
                self.inflight.append((flow, ev))
                if a.kind == "h2d":
                    self.pending_h2d.append(flow)
            else:
                self._storage(a.kind, f["op"], t, f)
        # a copy the cache synchronized on (``write_back``) holds the scheduler until it ends
        self.inflight = [(fl, ev) for fl, ev in self.inflight if fl.end_s < 0]
        waits = [self.host.predict(fl) for fl, ev in self.inflight if ev.blocking]
        if waits:
            t = max(waits)
            self.advance(t)
        return t

    def take_load(self) -> tuple[float, float] | None:
        """``(submitted at, predicted end)`` of the loads started since the last call (the
        load-back the next prefill waits for), or None."""
        flows, self.pending_h2d = self.pending_h2d, []
        if not flows:
            return None
        return min(f.submit_s for f in flows), max(self.host.predict(f) for f in flows)

    def _storage(self, kind: str, op: Any, t: float, fields: dict[str, Any]) -> None:
        st = self.storage
        assert st is not None, f"a {kind} transfer without a storage tier"
        ctrl = op_ctrl = fields.get("ctrl")
        lat = st.op_latency_s
        page_bytes = self.page * self.bpt
        job: _Job
        if kind == "l3_query":
            pages = fields["pages"]
            job = _Job(kind, self._query(op, pages, lat, op_ctrl), t)
        elif kind == "l3_read":
            job = _Job(kind, self._read(op, lat, page_bytes / st.read_bytes_s, ctrl), t)
            job.nbytes = len(op.hash_value) * page_bytes
        else:
            job = _Job(kind, self._write(op, lat, page_bytes / st.write_bytes_s, ctrl), t)
            job.nbytes = len(op.hash_value) * page_bytes
        self.servers[kind].submit(job, t)

    def _query(self, op: Any, pages: int, lat: float, ctrl: Any) -> Iterator[Any]:
        hit = [0]
        start = 0
        while start < pages:
            n = min(STORAGE_BATCH_PAGES, pages - start)

            def end(start: int = start, n: int = n) -> bool:
                got = ctrl.query_batch(op, start, n)
                hit[0] += got
                if got < n or start + n >= pages:
                    ctrl.query_done(op, hit[0])
                    return False
                return True

            yield lat, 0, end
            start += n
        if pages == 0:
            ctrl.query_done(op, 0)

    def _read(self, op: Any, lat: float, per_page_s: float, ctrl: Any) -> Iterator[Any]:
        total, done = len(op.hash_value), 0
        while done < total and not op.is_terminated():
            n = min(STORAGE_BATCH_PAGES, total - done)
            done += n

            def end(done: int = done) -> bool:
                ctrl.read_batch_done(op, done)
                return True

            yield lat + n * per_page_s, n * self.page, end
        ctrl.read_done(op)

    def _write(self, op: Any, lat: float, per_page_s: float, ctrl: Any) -> Iterator[Any]:
        total = len(op.hash_value)
        for s in range(0, total, STORAGE_BATCH_PAGES):
            n = min(STORAGE_BATCH_PAGES, total - s)

            def end(s: int = s, n: int = n) -> bool:
                ctrl.write_batch_done(op, s, n)
                if s + n >= total:
                    ctrl.write_done(op)
                return True

            yield lat + n * per_page_s, n * self.page, end
        if total == 0:
            ctrl.write_done(op)
