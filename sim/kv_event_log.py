"""``--kv-events FILE``: the KV events of a run as JSON lines, one record per published batch.

Each line is one JSON object (msgspec)::

    {"variant": "heapify/galloping/numpy/router=precise/instances=8", "instance": 3,
     "sim_time_s": 12.25, "batch": [12.25, [{"type": "BlockStored", ...}, ...], null]}

``batch`` is sglang 0.5.23's ``KVEventBatch`` exactly as its msgspec classes encode it
(``disaggregation/kv_events.py:233-344``: an ``array_like`` struct ``[ts, events,
attn_dp_rank]``; events tagged maps, ``kv_events.event_to_wire``) with ``ts`` the simulated time
(s) of the publication and ``attn_dp_rank`` null, so ``msgspec.json.decode(json of batch,
type=KVEventBatch)`` reads it back (tests/sim/test_kv_event_log.py). A batch is what one
``take_actions`` drain gave after one scheduler step (sglang's ``publish_kv_events`` publishes
one batch per drain, and none when the drain is empty); ``variant`` and ``instance`` say whose
cache it is. The file is written to ``FILE.tmp`` and renamed to ``FILE`` by :meth:`KVEventLog.
close`, so a failed run leaves no partial file (:meth:`KVEventLog.abort` removes it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from radixbench.cache.kv_events import KVEventConfig, event_to_wire

__all__ = ["KVEventLog", "wire_batch"]


def wire_batch(sim_time_s: float, events: list[Any]) -> list[Any]:
    """``[ts, [wire events], null]``: a ``KVEventBatch`` as msgspec encodes it."""
    return [sim_time_s, [event_to_wire(e) for e in events], None]


class KVEventLog:
    """Append-only writer of KV-event batches to ``path`` (see the module docstring).
    ``config``: the events' format, which the caches writing here are built with."""

    def __init__(self, path: Path | str, config: KVEventConfig | None = None) -> None:
        self.path = Path(path)
        self.config = config or KVEventConfig()
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._file: Any = None
        self._enc = msgspec.json.Encoder()
        self.batches = 0
        self.events = 0

    def write(self, variant: str, instance: int, sim_time_s: float, events: list[Any]) -> None:
        """Append one batch (nothing for an empty one). Opens ``FILE.tmp`` on first use."""
        if not events:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self._tmp, "wb")  # noqa: SIM115 (closed by close / abort)
        record = {
            "variant": variant,
            "instance": instance,
            "sim_time_s": sim_time_s,
            "batch": wire_batch(sim_time_s, events),
        }
        self._file.write(self._enc.encode(record) + b"\n")
        self.batches += 1
        self.events += len(events)

    def close(self) -> Path | None:
        """Finish the file (rename ``FILE.tmp`` to ``FILE``); ``None`` if nothing was written
        (then no file exists)."""
        if self._file is None:
            return None
        self._file.close()
        self._file = None
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Drop what was written (the run failed): no file is left."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._tmp.unlink(missing_ok=True)
