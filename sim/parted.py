"""A run table held in parts: the per-op or per-step table of a run as its logs, one part per
(variant, server), never one frame unless one is asked for.

On a whole trace behind N instances these tables run to millions of rows (the Mooncake trace on
8 instances: 4.6 M op rows, 2.2 M step rows): as pandas frames, with their variant and axis
columns, ~1 GB, and another copy again while Arrow wrote them. A :class:`PartedTable` keeps the
compact logs (:class:`~radixbench.sim.records.RecordLog`, spilled to disk as they grow) and
gives what a reader needs: the columns it names (:meth:`PartedTable.frame`), the rows of some
ops (``where``), one array per group (:meth:`PartedTable.groups`), or the rows chunk by chunk
(:meth:`PartedTable.chunks`) for writing. Every frame it gives holds the values, dtypes and row
order of the same rows of :meth:`PartedTable.frame` (``variant``, the axis columns, the logs'
schema, then the tag column): the frame ``sim.run.with_axes`` over ``RecordLog.frame`` /
``records.stacked_frame`` built, concatenated over the variants.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from radixbench.sim.records import STR, STRING, RecordLog

__all__ = ["Part", "PartedTable"]

#: Rows per frame :meth:`PartedTable.chunks` gives (at most; a spilled chunk may be larger).
CHUNK_ROWS = 1 << 16


@dataclass(frozen=True)
class Part:
    """One log's rows of a table: the ``variant`` column's value, the axis columns' values
    (None: missing) and the tag column's (e.g. the server index; None without one)."""

    log: RecordLog
    variant: str
    axes: tuple[tuple[str, str | None], ...]
    tag: int | None = None


class PartedTable:
    """The rows of ``parts`` one part after the other (module docstring); ``tag``: the name of
    the int64 column holding each part's tag (None: no such column; then every part's tag
    is None). Raises ``ValueError`` when the parts' schemas or axis names differ."""

    def __init__(self, parts: Sequence[Part], schema: Sequence[tuple[str, str]],
                 axes: Sequence[str], tag: str | None = None) -> None:  # fmt: skip
        self.parts = tuple(parts)
        self.schema = tuple(schema)
        self.axes = tuple(axes)
        self.tag = tag
        for p in self.parts:
            if p.log.schema != self.schema or tuple(a for a, _ in p.axes) != self.axes:
                raise ValueError("PartedTable: the parts' schemas or axis columns differ")
            if (p.tag is None) != (tag is None):
                raise ValueError(f"PartedTable: a part's tag {p.tag!r} with tag column {tag!r}")

    @classmethod
    def of(
        cls,
        logs: Sequence[RecordLog],
        variant: str,
        axes: Mapping[str, str | None],
        tag: str | None = None,
        tags: Sequence[int] | None = None,
    ) -> PartedTable:
        """The table of ``logs`` (one schema) of one variant, ``tags[i]`` on log ``i``'s rows
        in column ``tag``; it holds views of the logs (``RecordLog.view``: their rows, and
        rows appended later, not the objects that write them). Raises ``ValueError`` when
        ``tags`` does not match ``logs``."""
        if not logs or (tag is not None and (tags is None or len(tags) != len(logs))):
            raise ValueError(f"PartedTable.of: {len(logs)} logs, tags {tags!r}")
        ax = tuple(axes.items())
        # views: the rows without their writers (an OpRecorder's clock holds the whole run)
        parts = [Part(log.view(), variant, ax, None if tags is None else int(tags[i]))
                 for i, log in enumerate(logs)]  # fmt: skip
        return cls(parts, logs[0].schema, tuple(axes), tag)

    @staticmethod
    def concat(tables: Sequence[PartedTable]) -> PartedTable:
        """The rows of ``tables`` one after the other (``pd.concat(..., ignore_index=True)``
        of their frames). Raises ``ValueError`` when their columns differ."""
        first = tables[0]
        if any(t.columns != first.columns for t in tables):
            raise ValueError("PartedTable.concat: the tables' columns differ")
        parts = [p for t in tables for p in t.parts]
        return PartedTable(parts, first.schema, first.axes, first.tag)

    # ------------------------------------------------------------------ shape
    @property
    def columns(self) -> list[str]:
        """The column names in frame order."""
        tag = [self.tag] if self.tag is not None else []
        return ["variant", *self.axes, *(n for n, _ in self.schema), *tag]

    def __len__(self) -> int:
        return sum(len(p.log) for p in self.parts)

    def empty(self) -> pd.DataFrame:
        """No rows, the columns and dtypes of :meth:`frame`."""
        return self._frame([], self.columns, iter(()))

    def values(self, column: str) -> list[str]:
        """The distinct values of str ``column`` that occur in rows (part by part, in the
        order the logs coded them)."""
        seen: dict[str, None] = {}
        for p in self.parts:
            codes = p.log.columns((column,), codes=True)[column]
            for c in np.unique(codes).tolist():
                seen.setdefault(p.log.names[c], None)
        return list(seen)

    def variants(self) -> pd.DataFrame:
        """``variant`` and the axis columns, one row per part with rows (as the first rows of
        each part in :meth:`frame`)."""
        sized = [(p, 1) for p in self.parts if len(p.log)]
        return self._frame(sized, ["variant", *self.axes], iter([{}] * len(sized)))

    # ------------------------------------------------------------------ rows
    def _select(
        self, where: Mapping[str, Collection[Any]] | None
    ) -> tuple[list[Part], tuple[str, Collection[str]] | None]:
        """Parts passing ``where``'s conditions on constant columns; the one condition on a
        log's str column left for the rows."""
        parts, row_cond = list(self.parts), None
        for col, allowed in (where or {}).items():
            if col == "variant":
                parts = [p for p in parts if p.variant in allowed]
            elif col in self.axes:
                parts = [p for p in parts if dict(p.axes)[col] in allowed]
            elif col == self.tag:
                parts = [p for p in parts if p.tag in allowed]
            elif (col, "str") in self.schema and row_cond is None:
                row_cond = (col, tuple(allowed))
            else:
                raise KeyError(f"where: cannot select rows on {col!r}")
        return parts, row_cond

    def frame(
        self,
        columns: Sequence[str] | None = None,
        where: Mapping[str, Collection[Any]] | None = None,
    ) -> pd.DataFrame:
        """The rows (those passing ``where``: column -> allowed values, on the variant, axis
        and tag columns and one str column of the logs) with ``columns`` (default all, frame
        order), index 0..n-1. Peak memory: the frame and one part's columns. Raises
        ``KeyError`` for an unknown column or condition."""
        cols = self.columns if columns is None else list(columns)
        unknown = [c for c in cols if c not in self.columns]
        if unknown:
            raise KeyError(f"PartedTable: no column {unknown[0]!r}")
        parts, cond = self._select(where)
        logged = [n for n, _ in self.schema if n in cols]
        if cond is None:  # sizes known: each part's columns go straight into the frame
            reads = (p.log.columns(logged, codes=True) for p in parts)
            return self._frame([(p, len(p.log)) for p in parts], cols, reads)
        read = logged or [cond[0]]  # the condition's column counts the rows
        got = [p.log.columns(read, where=cond, codes=True) for p in parts]
        return self._frame([(p, len(c[read[0]])) for p, c in zip(parts, got)], cols, iter(got))

    def column(self, name: str) -> Any:
        """One column over all rows as an array (numpy for int64 / float64 columns; the
        string array of :meth:`frame` for str ones). Raises ``KeyError`` for an unknown one."""
        col = self.frame([name])[name]
        return col.array if dict(self.schema).get(name, "str") == "str" else col.to_numpy()

    def _frame(
        self, sized: list[tuple[Part, int]], cols: Sequence[str], reads: Iterator[dict[str, Any]]
    ) -> pd.DataFrame:
        """A frame of ``cols`` with ``sized`` ``(part, rows)``, each part's log columns the
        next of ``reads`` (:meth:`RecordLog.columns` with ``codes=True``), filled in place."""
        n = sum(k for _, k in sized)
        kinds = dict(self.schema)
        obj = [c for c in cols if c == "variant" or c in self.axes or kinds.get(c) == "str"]
        out: dict[str, Any] = {c: np.empty(n, dtype=object) for c in obj}
        for c in cols:
            if c in kinds and c not in out:
                out[c] = np.empty(n, dtype=np.float64 if kinds[c] == "float64" else np.int64)
        if self.tag is not None and self.tag in cols:
            out[self.tag] = np.repeat(
                np.asarray([p.tag for p, _ in sized], dtype=np.int64), [k for _, k in sized]
            )
        at = 0
        for p, k in sized:
            got = next(reads)
            axes = dict(p.axes)
            for c in cols:
                if c == "variant" or c in self.axes:
                    out[c][at : at + k] = p.variant if c == "variant" else axes[c]
                elif c in kinds and kinds[c] == "str":
                    out[c][at : at + k] = np.array(p.log.names, dtype=object)[got[c]]
                elif c in kinds:
                    out[c][at : at + k] = got[c]
            at += k
        for c in obj:
            out[c] = pd.array(out[c], dtype=STRING if c in self.axes else STR)
        return pd.DataFrame(out, columns=list(cols), copy=False)

    def chunks(self, columns: Sequence[str] | None = None) -> Iterator[pd.DataFrame]:
        """Every row in order as frames of at most :data:`CHUNK_ROWS` rows with ``columns``
        (default all): what :meth:`frame` holds, a slice at a time (nothing for no rows)."""
        cols = self.columns if columns is None else list(columns)
        for p, k, got in self._coded_chunks(cols):
            yield self._frame([(p, k)], cols, iter([got]))

    def arrow_chunks(self, schema: Any) -> Iterator[Any]:
        """Every row in order as ``pyarrow.Table`` s of ``schema`` (``pa.Table.from_pandas``
        of :meth:`empty`'s frame, pandas metadata included, or of some of its columns), at
        most :data:`CHUNK_ROWS` rows each: the tables ``from_pandas`` makes of :meth:`chunks`'
        frames (NaN as null), built from the logs' codes and arrays without a Python string
        or a frame per row (a str column is a ``take`` of its log's names by code). Raises
        ``KeyError`` for a field that is not a column."""
        import pyarrow as pa
        import pyarrow.compute as pc

        cols = list(schema.names)
        unknown = [c for c in cols if c not in self.columns]
        if unknown:
            raise KeyError(f"PartedTable: no column {unknown[0]!r}")
        kinds = dict(self.schema)
        for p, k, got in self._coded_chunks(cols):
            consts: dict[str, str | int | None] = {"variant": p.variant, **dict(p.axes)}
            if self.tag is not None:
                consts[self.tag] = p.tag
            arrays = []
            for field in schema:
                c = field.name
                if c in consts:  # one value on the part's rows (None: null)
                    arrays.append(pa.repeat(pa.scalar(consts[c], field.type), k))
                elif kinds[c] == "str":
                    arrays.append(pc.take(pa.array(p.log.names, field.type), got[c]))
                else:
                    arrays.append(pa.array(got[c], field.type, from_pandas=True))
            yield pa.Table.from_arrays(arrays, schema=schema)

    def _coded_chunks(self, cols: Sequence[str]) -> Iterator[tuple[Part, int, dict[str, Any]]]:
        """``(part, rows, the logs' columns of cols, str ones as codes)`` of every chunk of
        at most :data:`CHUNK_ROWS` rows, in row order."""
        logged = [n for n, _ in self.schema if n in cols]
        for p in self.parts:
            for ints, floats in p.log.chunks():
                for lo in range(0, len(ints), CHUNK_ROWS):
                    hi = lo + CHUNK_ROWS
                    part = p.log.slice_columns(ints[lo:hi], floats[lo:hi], logged, codes=True)
                    yield p, len(ints[lo:hi]), part

    def groups(self, by: str, column: str) -> Iterator[tuple[tuple[str, str], np.ndarray]]:
        """``((value of str column by, variant), column's values)`` in key order, values in row
        order (int64 / float64): the groups of ``frame().groupby([by, "variant"])[column]``,
        one concatenated at a time (what is held: the column once, and one group)."""
        acc: dict[tuple[str, str], list[np.ndarray]] = {}
        for p in self.parts:
            cols = p.log.columns((by, column), codes=True)
            key, val = cols[by], cols[column]
            for code in np.unique(key).tolist():
                acc.setdefault((p.log.names[code], p.variant), []).append(val[key == code])
            del cols, key, val
        for k in sorted(acc):
            yield k, np.concatenate(acc.pop(k))
