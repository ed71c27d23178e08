"""Per-step time series of one simulated server (docs/CONTRACTS.md, stem ``timeseries``)."""

from __future__ import annotations

from typing import Any

from radixbench.sim.records import RecordLog

_INT = (
    "batch_size",
    "new_tokens",
    "queue_len",
    "running",
    "kv_used_tokens",
    "kv_capacity_tokens",
    "evictable_tokens",
    "protected_tokens",
    "retractions",
)
#: The step table's columns and dtypes, in record order (docs/CONTRACTS.md).
_SCHEMA = (
    ("sim_time_s", "float64"),
    ("step", "str"),
    ("step_s", "float64"),
    ("measured_cpu_s", "float64"),
    *((c, "int64") for c in _INT),
)
_COLUMNS = tuple(name for name, _ in _SCHEMA)


class StepLog(RecordLog):
    """Columnar append-only log (:class:`RecordLog`): one row per scheduler step (prefill or
    decode).

    ``sim_time_s``: step start (s); ``step_s``: simulated duration (s, measured CPU time
    included in the coupled clock mode); ``measured_cpu_s``: measured CPU time of the step's
    top-level cache operations and batch builds (s, always recorded); ``retractions``: requests
    retracted before this step (decode only).
    """

    def __init__(self) -> None:
        super().__init__(_SCHEMA, int32=True)  # a row per step: compact (counts fit int32)

    def add(self, **row: Any) -> None:
        """Append one step; every column of the contract must be given (``KeyError``)."""
        self.append_row([row[c] for c in _COLUMNS])

    def append(
        self,
        sim_time_s: float,
        step: str,
        step_s: float,
        measured_cpu_s: float,
        batch_size: int,
        new_tokens: int,
        queue_len: int,
        running: int,
        kv_used_tokens: int,
        kv_capacity_tokens: int,
        evictable_tokens: int,
        protected_tokens: int,
        retractions: int,
    ) -> None:
        """Append one step (the columns in contract order)."""
        code = self.code(step)
        self.floats.extend((sim_time_s, step_s, measured_cpu_s))
        self.ints.extend(
            (
                code,
                batch_size,
                new_tokens,
                queue_len,
                running,
                kv_used_tokens,
                kv_capacity_tokens,
                evictable_tokens,
                protected_tokens,
                retractions,
            )
        )
