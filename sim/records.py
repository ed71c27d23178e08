"""Append-only columnar logs: the per-op and per-step tables of a run (docs/CONTRACTS.md).

The hot paths (``OpRecorder``, ``StepLog``) append every row to two flat arrays: the row's int
values (str columns as small int codes) with one ``array.extend`` and its float64 values with
one ``array('d')`` append (32-bit ints and a few int64 columns among the floats where a log
asks for compact storage). No Python object is kept per row: on the whole Mooncake trace
(~600k op rows, ~157k step rows) a list of row tuples held ~180 MB of objects, which the
cyclic collector then had to walk once, and turning them into columns took ~0.2 s; here the
frame is a reshape of two buffers.

Rows can leave memory (:meth:`RecordLog.spill`): a log that gets a row per simulated step (a
whole trace behind N instances: millions of op and step rows, ~340 MB at 8 instances) moves
its buffers to an anonymous temporary file now and then, and reads them back chunk by chunk
(:meth:`RecordLog.chunks`) when its columns are asked for; the same rows, the same columns.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: Column kinds a log holds: ``str`` (a few distinct names, stored as codes), int64, float64.
KINDS = ("str", "int64", "float64")

#: The dtype of the run tables' str columns (pandas' ``str``: NaN for missing) and of their axis
#: columns (``string``: NA for missing), both on Python objects: each such column repeats a
#: few distinct values, and there a row is a pointer to one shared ``str`` (8 bytes), where the
#: default pyarrow storage copies the characters into every row (62 bytes a row for a variant
#: name; millions of rows on a whole trace behind N instances). The same values, the same
#: missing values, the same string dtype family (``pd.StringDtype``); parquet stores them as
#: strings alike.
STR = pd.StringDtype("python", na_value=np.nan)
STRING = pd.StringDtype("python")


def repeated(value: str | None, n: int, dtype: Any = STR) -> Any:
    """A string array of ``n`` times ``value`` (None: missing) in ``dtype`` (one shared
    object)."""
    values = np.empty(n, dtype=object)
    values.fill(value)
    return pd.array(values, dtype=dtype)


class _Disk:
    """A log's rows moved out of memory: its temporary ``file`` (None until the first
    :meth:`RecordLog.spill`) and the ``rows`` of each chunk in it, in order."""

    def __init__(self) -> None:
        self.file: Any = None
        self.rows: list[int] = []


class RecordLog:
    """Rows of a fixed ``schema`` (``(name, kind)`` pairs, kind in :data:`KINDS`).

    Layout: ``ints`` holds, per row, the row's ``str`` codes and ``int64`` values in schema
    order (``int_cols``); ``floats`` its ``float64`` values in schema order (``float_cols``).
    A writer appends one row as ``ints.extend((...))`` then ``floats.append(x)`` /
    ``floats.extend((...))`` (use :meth:`code` for a str value), or calls :meth:`append_row`.

    Compact storage, for the logs that get a row per simulated step (millions on a whole trace
    behind N instances): ``int32=True`` keeps ``ints`` as 32-bit (a value outside int32 raises
    ``OverflowError`` on append), and ``wide`` names int64 columns kept in ``floats`` instead,
    in schema order among the float columns (exact: float64 holds every integer below 2**53),
    e.g. a duration in ns. :meth:`columns` gives every int column back as int64 either way.
    Raises ``ValueError`` for an unknown kind, a ``wide`` name that is not an int64 column, or
    a schema without an int or str column.
    """

    def __init__(
        self,
        schema: Sequence[tuple[str, str]],
        int32: bool = False,
        wide: Sequence[str] = (),
    ) -> None:
        self.schema = tuple(schema)
        bad = [f"{name}: {kind}" for name, kind in self.schema if kind not in KINDS]
        bad += [f"{w}: not an int64 column" for w in wide if (w, "int64") not in self.schema]
        if bad:
            raise ValueError(f"unknown column kinds {bad}; known: {', '.join(KINDS)}")
        self.wide = tuple(wide)
        in_floats = {name for name, kind in self.schema if kind == "float64"} | set(wide)
        self.int_cols = tuple(name for name, _ in self.schema if name not in in_floats)
        self.float_cols = tuple(name for name, _ in self.schema if name in in_floats)
        if not self.int_cols:
            raise ValueError("a RecordLog needs at least one int64 or str column")
        self._int_dtype = np.int32 if int32 else np.int64
        self.ints = array("i" if int32 else "q")
        self.floats = array("d")
        self.names: list[str] = []  # str values by code
        self._codes: dict[str, int] = {}
        self._disk = _Disk()  # rows moved out of memory (:meth:`spill`)

    #: What a log's rows live in: what :meth:`view` shares.
    _ROWS = ("schema", "wide", "int_cols", "float_cols", "_int_dtype", "ints", "floats",
             "names", "_codes", "_disk")  # fmt: skip

    def view(self) -> RecordLog:
        """A plain ``RecordLog`` on this log's rows: the same buffers, codes and file (it sees
        later appends and spills), without what a subclass adds (an ``OpRecorder``'s clock,
        and through it the whole simulation): a run's tables hold its rows, not the run."""
        view = RecordLog.__new__(RecordLog)
        for name in self._ROWS:
            setattr(view, name, getattr(self, name))
        return view

    def code(self, name: str) -> int:
        """The int code standing for the str value ``name`` (assigned on first use)."""
        c = self._codes.get(name)
        if c is None:
            c = self._codes[name] = len(self.names)
            self.names.append(name)
        return c

    def append_row(self, row: Sequence[Any]) -> None:
        """Append one row given in schema order (str values as str). Slower than the two
        appends the hot paths make; for tests and rare writers."""
        floats = set(self.float_cols)
        self.ints.extend(
            self.code(v) if kind == "str" else v
            for v, (name, kind) in zip(row, self.schema)
            if name not in floats
        )
        self.floats.extend(v for v, (name, _) in zip(row, self.schema) if name in floats)

    def extend_rows(self, ints: np.ndarray, floats: np.ndarray) -> None:
        """Append ``n`` rows at once: ``ints`` ``[n, len(int_cols)]`` (str columns as
        :meth:`code` values) and ``floats`` ``[n, len(float_cols)]``, in the layout's column
        order (any int / float dtype; cast here). The same buffers as ``n`` single appends.
        Raises ``ValueError`` on a shape that does not fit the layout or disagreeing row
        counts, ``OverflowError`` on an int beyond a 32-bit log's range (nothing appended)."""
        ni, nf = len(self.int_cols), len(self.float_cols)
        if ints.ndim != 2 or ints.shape[1] != ni or floats.shape != (ints.shape[0], nf):
            raise ValueError(
                f"extend_rows: ints {ints.shape} / floats {floats.shape} do not fit "
                f"{ni} int and {nf} float columns"
            )
        if self._int_dtype is np.int32 and ints.size:
            lo, hi = int(ints.min()), int(ints.max())
            if lo < -(2**31) or hi >= 2**31:
                raise OverflowError(f"extend_rows: an int value outside int32 ({lo}..{hi})")
        self.ints.frombytes(np.ascontiguousarray(ints, dtype=self._int_dtype).tobytes())
        self.floats.frombytes(np.ascontiguousarray(floats, dtype=np.float64).tobytes())

    def spill(self, min_rows: int = 1) -> bool:
        """Move the rows held in memory to the log's temporary file (anonymous: deleted with
        the log) as one chunk, if there are at least ``min_rows`` (and one); returns whether
        it did. ``ints`` / ``floats`` are emptied in place, so a writer holding their bound
        ``extend`` goes on appending. Raises ``ValueError`` when the two buffers do not hold
        the same number of rows (nothing moved); ``OSError`` from the file system."""
        ni, nf = len(self.int_cols), len(self.float_cols)
        n = len(self.ints) // ni
        if n < max(min_rows, 1):
            return False
        if len(self.ints) != n * ni or len(self.floats) != n * nf:
            raise ValueError(f"log rows disagree: {len(self.ints)} ints, {len(self.floats)} floats")
        disk = self._disk
        if disk.file is None:
            # open as long as the log lives (closed, and so deleted, with it)
            disk.file = tempfile.TemporaryFile(prefix="radixbench-log-")  # noqa: SIM115
        disk.file.seek(0, os.SEEK_END)
        self.ints.tofile(disk.file)
        self.floats.tofile(disk.file)
        disk.file.flush()  # read back by position from the descriptor (:meth:`_read`)
        del self.ints[:]
        del self.floats[:]
        disk.rows.append(n)
        return True

    def _read(self, at: int, n: int) -> tuple[int, np.ndarray, np.ndarray]:
        """The spilled chunk of ``n`` rows at byte ``at``: (next offset, ints, floats). Read by
        position: a forked process reading the same file moves no offset under this one."""
        fd = self._disk.file.fileno()
        ni, nf = len(self.int_cols), len(self.float_cols)
        ints = np.empty((n, ni), dtype=self._int_dtype)
        floats = np.empty((n, nf), dtype=np.float64)
        for buf in (ints, floats):
            view = buf.data.cast("B")
            got = 0
            while got < buf.nbytes:  # preadv may return less than asked
                k = os.preadv(fd, [view[got:]], at + got)
                if k <= 0:
                    raise OSError("a log's temporary file is shorter than its rows")
                got += k
            at += buf.nbytes
        return at, ints, floats

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every row in order, chunk by chunk (the spilled ones, then those in memory):
        ``(ints [n, len(int_cols)], floats [n, len(float_cols)])`` in the buffers' dtypes
        (int32 or int64; float64). The chunk in memory is a view of the buffers: use it before
        the next append. Raises ``ValueError`` when the buffers in memory disagree on rows."""
        at = 0
        for n in list(self._disk.rows):
            at, ints, floats = self._read(at, n)
            yield ints, floats
        ni, nf = len(self.int_cols), len(self.float_cols)
        n = len(self.ints) // ni
        if n == 0 and self._disk.rows:
            return
        floats = np.frombuffer(self.floats, dtype=np.float64)
        if floats.size != n * nf:
            raise ValueError(f"log rows disagree: {n} int rows, {floats.size} float values")
        yield np.frombuffer(self.ints, dtype=self._int_dtype).reshape(n, ni), floats.reshape(n, nf)

    def last_row(self) -> tuple[array, array]:
        """The last row's ``(ints, floats)`` (copies). Raises ``IndexError`` when empty."""
        ni, nf = len(self.int_cols), len(self.float_cols)
        if not self.ints:
            if not self._disk.rows:
                raise IndexError("last_row of an empty log")
            *_, (ints, floats) = self.chunks()
            return array(self.ints.typecode, ints[-1].tolist()), array("d", floats[-1].tolist())
        return self.ints[-ni:], (self.floats[-nf:] if nf else array("d"))

    def __len__(self) -> int:
        return sum(self._disk.rows) + len(self.ints) // len(self.int_cols)

    def columns(
        self,
        names: Collection[str] | None = None,
        where: tuple[str, Collection[str]] | None = None,
        codes: bool = False,
    ) -> dict[str, Any]:
        """Columns as arrays, schema order (all, or those in ``names``): int64 / float64 numpy
        arrays (fresh), str columns as pandas' string array (the dtype a DataFrame gives a
        column of str; ``codes=True``: their int64 codes, :attr:`names` by code). ``where``
        ``(str column, values)``: only the rows whose value is among ``values``. Peak memory:
        the columns asked for and one chunk. Raises ``ValueError`` when the buffers disagree
        on rows, ``KeyError`` for a ``where`` column that is not a str column."""
        keep = at = None
        if where is not None:
            col, values = where
            if (col, "str") not in self.schema:
                raise KeyError(f"where: {col!r} is not a str column of the log")
            keep = np.array([self._codes[v] for v in values if v in self._codes], dtype=np.int64)
            at = self.int_cols.index(col)
        pieces: list[dict[str, Any]] = []
        for ints, floats in self.chunks():  # typed copies per chunk: the chunk is let go
            rows = None if keep is None else np.isin(ints[:, at], keep)
            pieces.append(self._typed(self._views(ints, floats, names, rows)))
        return self._join(pieces, codes)

    def _typed(self, views: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``views`` as contiguous int64 / float64 copies (the columns' dtypes)."""
        kinds = dict(self.schema)
        return {name: np.array(v, dtype=np.float64 if kinds[name] == "float64" else np.int64)
                for name, v in views.items()}  # fmt: skip

    def _views(
        self, ints: np.ndarray, floats: np.ndarray, names: Collection[str] | None, rows: Any
    ) -> dict[str, np.ndarray]:
        """The raw columns of one chunk (views; ``rows``: a mask or None), schema order."""
        out = {}
        for name, _ in self.schema:
            if names is not None and name not in names:
                continue
            if name in self.float_cols:
                col = floats[:, self.float_cols.index(name)]
            else:
                col = ints[:, self.int_cols.index(name)]
            out[name] = col if rows is None else col[rows]
        return out

    def _join(self, pieces: Sequence[dict[str, Any]], codes: bool = False) -> dict[str, Any]:
        """The columns (as :meth:`columns`) of ``pieces``, one dict of :meth:`_typed` columns
        per chunk, concatenated in order."""
        labels = None if codes else pd.array(np.array(self.names, dtype=object), dtype=STR)
        kinds = dict(self.schema)
        out: dict[str, Any] = {}
        for name in pieces[0] if pieces else ():
            kind = kinds[name]
            dtype = np.float64 if kind == "float64" else np.int64
            if len(pieces) == 1 and pieces[0][name].dtype == dtype:
                col = pieces[0][name]  # a fresh copy already (:meth:`_typed`)
            else:
                col = np.concatenate([p[name] for p in pieces], dtype=dtype, casting="unsafe")
            out[name] = labels.take(col) if kind == "str" and labels is not None else col
        return out

    def slice_columns(
        self,
        ints: np.ndarray,
        floats: np.ndarray,
        names: Collection[str] | None = None,
        codes: bool = False,
    ) -> dict[str, Any]:
        """The typed columns (as :meth:`columns`, all or ``names``) of the rows ``(ints,
        floats)``: a chunk of :meth:`chunks` or a slice of one."""
        return self._join([self._typed(self._views(ints, floats, names, None))], codes)

    def column(self, name: str) -> Any:
        """One column as :meth:`columns` gives it (a fresh array), a str column as a numpy
        object array. Raises ``KeyError`` for a name not in the schema."""
        kind = dict(self.schema)[name]
        col = self.columns((name,), codes=True)[name]
        return np.array(self.names, dtype=object)[col] if kind == "str" else col

    def frame(self, variant: str) -> pd.DataFrame:
        """The rows as a DataFrame with a ``variant`` column first. Mutates nothing."""
        df = pd.DataFrame(self.columns())
        df.insert(0, "variant", repeated(variant, len(df)))
        return df

    @property
    def rows(self) -> dict[str, list[Any]]:
        """The rows by column, as Python values (a fresh dict of lists, schema order)."""
        return {
            name: col.tolist() if isinstance(col, np.ndarray) else list(col)
            for name, col in self.columns().items()
        }


def stacked_frame(
    logs: Sequence[RecordLog], variant: str, tag: str, tags: Sequence[int]
) -> pd.DataFrame:
    """The rows of ``logs`` (one schema) one log after the other as one DataFrame: ``variant``
    first, the schema's columns, then the int64 column ``tag`` holding ``tags[i]`` on log
    ``i``'s rows (e.g. each instance's index). The same frame as concatenating each log's
    :meth:`RecordLog.frame` with its tag column, built column by column so that no second copy
    of the whole table is ever held. Raises ``ValueError`` when the schemas differ or
    ``tags`` does not match ``logs``."""
    if len(tags) != len(logs) or not logs:
        raise ValueError(f"stacked_frame: {len(logs)} logs, {len(tags)} tags")
    schema = logs[0].schema
    if any(log.schema != schema for log in logs):
        raise ValueError("stacked_frame: the logs' schemas differ")
    sizes = [len(log) for log in logs]
    n = sum(sizes)
    cols: dict[str, Any] = {"variant": repeated(variant, n)}
    for name, kind in schema:
        col = np.concatenate([log.column(name) for log in logs]) if n else logs[0].column(name)
        cols[name] = pd.array(col, dtype=STR) if kind == "str" else col
    cols[tag] = np.repeat(np.asarray(tags, dtype=np.int64), sizes)
    return pd.DataFrame(cols)
