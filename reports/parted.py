"""Run tables too large to hold as one frame, as the reports read them.

A run's per-op and per-step tables (millions of rows on a whole trace behind N instances)
reach the reports as a :class:`TableParts` (the simulator's
``radixbench.sim.parted.PartedTable``): the reports ask it for the columns and rows they read
(:meth:`TableParts.frame`, :meth:`TableParts.groups`), and :func:`write_parts` writes it chunk
by chunk, the files :func:`~radixbench.reports.tables.write_table` writes for its whole frame
(the same Parquet schema and values, the same CSV text) without ever holding that frame or its
Arrow copy.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from radixbench.reports.axes import VariantSet

__all__ = ["STEP_OPS", "TableParts", "as_frame", "read_rows", "write_parts"]

#: Ops timed once per scheduler step (the KV slot allocation, the decode batch build): most
#: of a per-op table's rows (4.4 M of 4.6 M on the whole Mooncake trace behind 8 instances).
#: The report reads them row by row only in the verdicts of an axis that changes them
#: (``verdicts.AXIS_OPS``: ``flatten``, the A/A control); everywhere else through the op
#: summary (``summary.op_summary``), which a table in parts gives group by group.
STEP_OPS = ("alloc", "build_decode")


@runtime_checkable
class TableParts(Protocol):
    """A table held in parts. Every frame it gives holds the values, dtypes and row order of
    the same rows of its whole frame (:meth:`frame` with no arguments), index 0..n-1."""

    @property
    def columns(self) -> list[str]: ...

    def __len__(self) -> int: ...

    def empty(self) -> pd.DataFrame:
        """No rows; the columns and dtypes."""
        ...

    def frame(
        self,
        columns: Sequence[str] | None = None,
        where: Mapping[str, Collection[Any]] | None = None,
    ) -> pd.DataFrame:
        """``columns`` (default all) of the rows passing ``where`` (column -> values)."""
        ...

    def chunks(self, columns: Sequence[str] | None = None) -> Iterator[pd.DataFrame]:
        """Every row in order, a bounded frame at a time."""
        ...

    def arrow_chunks(self, schema: Any) -> Iterator[Any]:
        """Every row in order, a bounded ``pyarrow.Table`` of ``schema`` at a time: what
        ``pa.Table.from_pandas`` makes of :meth:`chunks`' frames."""
        ...

    def groups(self, by: str, column: str) -> Iterator[tuple[tuple[str, str], np.ndarray]]:
        """``((value of by, variant), column)`` in key order, each in row order."""
        ...

    def values(self, column: str) -> list[str]:
        """The distinct values of a str column."""
        ...

    def variants(self) -> pd.DataFrame:
        """``variant`` and the axis columns, a row per part with rows, in row order."""
        ...


def as_frame(table: pd.DataFrame | TableParts) -> pd.DataFrame:
    """``table`` as one frame (a frame as it is)."""
    return table if isinstance(table, pd.DataFrame) else table.frame()


def read_rows(table: TableParts, variants: VariantSet, baseline: Mapping[str, str]) -> pd.DataFrame:
    """The rows of per-op ``table`` that the report reads row by row (speed-ups, verdicts,
    the answer's checks, the reference rows): every op's but those of :data:`STEP_OPS` that
    no verdict pair of ``variants`` under ``baseline`` compares."""
    from radixbench.reports.verdicts import AXIS_OPS

    paired = {op for p in variants.pairs(baseline, AXIS_OPS) for op in AXIS_OPS[p.axis]}
    keep = [op for op in table.values("op") if op not in STEP_OPS or op in paired]
    return table.frame(where={"op": keep})


def _csv_alike(table: TableParts, floats: list[str]) -> bool:
    """``tables._arrow_csv_reads_alike`` of the whole table, column by column over chunks: a
    float column without missing values (NaN: null in Arrow) whose values are all whole (or
    that has no rows) reads back as ints from Arrow's CSV."""
    if not floats:
        return True
    missing = dict.fromkeys(floats, False)
    whole = dict.fromkeys(floats, True)
    for chunk in table.chunks(floats):
        for c in floats:
            x = chunk[c].to_numpy(np.float64)
            missing[c] = missing[c] or bool(np.isnan(x).any())
            whole[c] = whole[c] and bool((x == np.floor(x)).all())
    n = len(table)
    return all(missing[c] or (n > 0 and not whole[c]) for c in floats)


def write_parts(table: TableParts, parquet_tmp: Path, csv_tmp: Path | None) -> None:
    """Write ``table`` to ``parquet_tmp`` and ``csv_tmp`` (None: no CSV) chunk by chunk: what
    ``write_table`` writes for its whole frame (Parquet: the schema with its pandas metadata
    and the values, in row groups of at most one chunk; CSV: the same text, by Arrow or, when
    Arrow's would read back otherwise, by pandas). The chunks go to Arrow from the logs'
    arrays and codes (``arrow_chunks``), not through frames of Python strings. Raises
    ``ValueError`` (``pyarrow.ArrowInvalid``) if a chunk's arrays do not fit the schema."""
    import pyarrow as pa

    _write(pa, table, parquet_tmp, csv_tmp, pa.default_memory_pool().release_unused)


def _write(
    pa: Any, table: TableParts, parquet_tmp: Path, csv_tmp: Path | None, release: Any
) -> None:
    """:func:`write_parts`' body; ``release()`` after each chunk: Arrow's default pool
    (mimalloc) otherwise keeps what the chunks freed (1.2 M op rows in chunks of 64k:
    +63 MB at the peak, +100 MB left after the write, without)."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    schema = pa.Table.from_pandas(table.empty(), preserve_index=False).schema
    if csv_tmp is None:
        with pq.ParquetWriter(parquet_tmp, schema) as pw:
            for t in table.arrow_chunks(schema):
                pw.write_table(t)
                release()
        return
    floats = [f.name for f in schema if pa.types.is_floating(f.type)]
    arrow_csv = _csv_alike(table, floats)
    wrote = False
    with pq.ParquetWriter(parquet_tmp, schema) as pw, open(csv_tmp, "wb") as out:
        csv = pa_csv.CSVWriter(out, schema) if arrow_csv else None
        for t in table.arrow_chunks(schema):
            pw.write_table(t)
            if csv is not None:
                csv.write_table(t)
            else:  # whole floats: pandas' text (1.0), as write_table writes such a frame
                out.write(t.to_pandas().to_csv(index=False, header=not wrote).encode())
            wrote = True
            release()
        if not wrote:
            pw.write_table(pa.Table.from_pandas(table.empty(), preserve_index=False))
            if csv is None:
                out.write(table.empty().to_csv(index=False).encode())
        if csv is not None:
            csv.close()
