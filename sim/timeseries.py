"""Per-step time series of one simulated server (docs/CONTRACTS.md, stem ``timeseries``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from radixbench.sim.records import records_frame

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


class StepLog:
    """Columnar append-only log: one row per scheduler step (prefill or decode).

    ``sim_time_s``: step start (s); ``step_s``: simulated duration (s, measured CPU time
    included in the coupled clock mode); ``measured_cpu_s``: measured CPU time of the step's
    top-level cache operations and batch builds (s, always recorded); ``retractions``: requests
    retracted before this step (decode only).
    """

    def __init__(self) -> None:
        self.records: list[tuple[Any, ...]] = []

    def add(self, **row: Any) -> None:
        """Append one step; every column of the contract must be given (``KeyError``)."""
        self.records.append(tuple(row[c] for c in _COLUMNS))

    def append(self, row: tuple[Any, ...]) -> None:
        """Append one step given as a tuple in column order: ``sim_time_s, step, step_s,
        measured_cpu_s, batch_size, new_tokens, queue_len, running, kv_used_tokens,
        kv_capacity_tokens, evictable_tokens, protected_tokens, retractions``."""
        self.records.append(row)

    @property
    def rows(self) -> dict[str, list[Any]]:
        """The steps by column (a fresh dict of lists)."""
        cols = list(zip(*self.records)) if self.records else [()] * len(_COLUMNS)
        return {c: list(v) for c, v in zip(_COLUMNS, cols)}

    def __len__(self) -> int:
        return len(self.records)

    def frame(self, variant: str) -> pd.DataFrame:
        """The steps as a DataFrame with a ``variant`` column first."""
        return records_frame(self.records, _SCHEMA, variant)
