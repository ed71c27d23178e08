"""Loaders for length-only traces: Azure LLM inference 2023 (CSV) and the generic JSONL/CSV format.

Azure (AzurePublicDataset ``AzureLLMInferenceTrace_{code,conv}.csv``, bundled): columns
``TIMESTAMP`` (``YYYY-MM-DD HH:MM:SS.fffffff``, UTC), ``ContextTokens``, ``GeneratedTokens``.
Only arrivals and lengths are published; prefixes come from a :class:`PrefixRule`.

Generic (documented in README.md): JSONL objects or CSV rows (header line) with
``arrival_s`` (seconds, non-decreasing), ``input_length`` and ``output_length`` (tokens, >= 1)
and optional ``hash_ids`` (JSON list, or space-separated ints in CSV) of ``block_size``-token
prompt blocks; other columns are ignored. Either every row has ``hash_ids`` or none has; without
them the prefixes come from a :class:`PrefixRule`.

Both loaders share the selection of :func:`radixbench.workloads.trace.load_mooncake`
(``max_requests``, ``window_s``, ``start_s`` on arrival times since the first record) and its
bad-line handling (``on_bad_line`` error|skip, errors ``"<file>:<line>: <reason>"``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import pathlib
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import numpy as np

from radixbench.workloads.segments import PrefixRule
from radixbench.workloads.tokens import HashBlocks
from radixbench.workloads.trace import TraceError, TraceRequest, check_bad_line_policy

__all__ = ["AZURE_TRACES", "bundled_azure_path", "load_azure", "load_generic"]

AZURE_TRACES = {
    "code": "AzureLLMInferenceTrace_code.csv",
    "conv": "AzureLLMInferenceTrace_conv.csv",
}
"""Bundled Azure LLM inference 2023 traces by name."""

TraceRow = tuple[float, int, int, tuple[int, ...] | None]  # arrival (s, absolute), in, out, hashes


def bundled_azure_path(name: str) -> pathlib.Path:
    """Path of the bundled Azure 2023 trace ``name`` ("code" or "conv"); ``ValueError`` else."""
    if name not in AZURE_TRACES:
        raise ValueError(f"unknown Azure trace {name!r}; known: {', '.join(AZURE_TRACES)}")
    from . import data

    res = resources.files(data).joinpath(AZURE_TRACES[name])
    if not isinstance(res, pathlib.Path):  # zipped install: not supported for the CSVs
        raise ValueError("the bundled Azure traces need a regular (unzipped) install")
    return res


def _int(value: Any, key: str, minimum: int) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"{key!r} must be an int, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key!r} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{key!r} must be >= {minimum}, got {value}")
    return value


def _azure_time(text: str) -> float:
    base, _, frac = text.strip().partition(".")
    try:
        dt = datetime.fromisoformat(base).replace(tzinfo=UTC)
        return dt.timestamp() + (float("0." + frac) if frac else 0.0)
    except ValueError:
        raise ValueError(f"bad TIMESTAMP {text!r}") from None


def _open(file_path: pathlib.Path) -> io.BufferedReader:
    try:
        return open(file_path, "rb")
    except OSError as exc:
        raise TraceError(str(file_path), None, f"cannot open trace file: {exc.strerror}") from None


def _decoded(fh: io.BufferedReader, bad: dict[int, str]) -> Iterator[str]:
    """The lines of ``fh`` as text (line endings kept). A line that is not UTF-8 is yielded
    with replacement characters and its 1-based number recorded in ``bad`` with the reason,
    so the loaders report (or skip) it like any malformed line."""
    for line, raw in enumerate(fh, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad[line] = f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"
            yield raw.decode("utf-8", errors="replace")


def _csv_rows(
    fh: io.BufferedReader, file: str, need: tuple[str, ...]
) -> Iterator[tuple[int, dict]]:
    bad: dict[int, str] = {}
    reader = csv.reader(_decoded(fh, bad))
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(file, 1, "empty file: expected a header line") from None
    except csv.Error as exc:
        raise TraceError(file, 1, f"bad CSV: {exc}") from None
    if bad:
        raise TraceError(file, 1, f"header line: {next(iter(bad.values()))}")
    missing = [k for k in need if k not in header]
    if missing:
        raise TraceError(file, 1, f"header lacks column(s) {', '.join(missing)}")
    while True:
        first = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise TraceError(file, reader.line_num, f"bad CSV: {exc}") from None
        undecodable = [bad[n] for n in range(first, reader.line_num + 1) if n in bad]
        if undecodable:
            yield reader.line_num, {"__error__": undecodable[0]}
        elif not row or not any(c.strip() for c in row):
            continue
        elif len(row) != len(header):
            yield reader.line_num, {"__error__": f"{len(row)} fields, header has {len(header)}"}
        else:
            yield reader.line_num, dict(zip(header, row))


def _select(
    rows: Iterator[tuple[int, TraceRow | str]],
    file: str,
    max_requests: int | None,
    window_s: float | None,
    start_s: float,
    on_bad_line: str,
    skipped: list[TraceError] | None,
) -> list[tuple[int, float, int, int, tuple[int, ...] | None]]:
    """Apply bad-line policy, ordering check and selection; rows get rid and relative time."""
    check_bad_line_policy(on_bad_line)
    end_s = math.inf if window_s is None else start_s + window_s
    out: list[tuple[int, float, int, int, tuple[int, ...] | None]] = []
    first: float | None = None
    prev = -math.inf
    hashed: bool | None = None
    rid = -1
    for line, row in rows:
        rid += 1
        if not isinstance(row, str):
            if row[0] < prev:
                row = f"arrival {row[0]:g} is before the previous one ({prev:g})"
            elif hashed is not None and (row[3] is not None) != hashed:
                row = "hash_ids must be given on every line or on none"
        if isinstance(row, str):
            err = TraceError(file, line, row)
            if on_bad_line == "error":
                raise err
            if skipped is not None:
                skipped.append(err)
            continue
        ts, n_in, n_out, hashes = row
        prev, hashed = ts, hashes is not None
        if first is None:
            first = ts
        t = ts - first
        if t >= end_s:
            break
        if t >= start_s:
            out.append((rid, t, n_in, n_out, hashes))
            if max_requests is not None and len(out) >= max_requests:
                break
    return out


def load_azure(
    path: str | os.PathLike[str],
    rule: PrefixRule,
    rng: np.random.Generator,
    *,
    max_requests: int | None = None,
    window_s: float | None = None,
    start_s: float = 0.0,
    on_bad_line: str = "error",
    skipped: list[TraceError] | None = None,
) -> list[TraceRequest]:
    """Load an Azure LLM inference 2023 CSV; prefixes synthesised by ``rule`` with ``rng``.

    ``rid`` is the 0-based data-row index; ``arrival_s`` seconds since the first row.
    Raises :class:`TraceError` (file:line) on a malformed row unless ``on_bad_line="skip"``
    (then appended to ``skipped``); ``ValueError`` on bad arguments.
    """
    file_path = pathlib.Path(path)
    file = str(file_path)

    def rows() -> Iterator[tuple[int, TraceRow | str]]:
        with _open(file_path) as fh:
            for line, d in _csv_rows(fh, file, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
                try:
                    if "__error__" in d:
                        raise ValueError(d["__error__"])
                    ts = _azure_time(d["TIMESTAMP"])
                    n_in = _int(d["ContextTokens"], "ContextTokens", 1)
                    n_out = _int(d["GeneratedTokens"], "GeneratedTokens", 1)
                except ValueError as exc:
                    yield line, str(exc)
                    continue
                yield line, (ts, n_in, n_out, None)

    sel = _select(rows(), file, max_requests, window_s, start_s, on_bad_line, skipped)
    return rule.apply([(r, t, i, o) for r, t, i, o, _ in sel], rng)


def _generic_row(d: dict[str, Any], csv_mode: bool) -> TraceRow:
    for key in ("arrival_s", "input_length", "output_length"):
        if key not in d:
            raise ValueError(f"missing key {key!r}")
    ts = d["arrival_s"]
    if csv_mode:
        try:
            ts = float(ts)
        except ValueError:
            raise ValueError(f"'arrival_s' must be a number of seconds, got {ts!r}") from None
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        raise ValueError(f"'arrival_s' must be a finite number of seconds, got {ts!r}")
    n_in = _int(d["input_length"], "input_length", 1)
    n_out = _int(d["output_length"], "output_length", 1)
    raw = d.get("hash_ids")
    if raw is None or (csv_mode and not raw.strip()):
        return float(ts), n_in, n_out, None
    if csv_mode:
        try:
            raw = [int(x) for x in raw.split()]
        except ValueError:
            raise ValueError(f"'hash_ids' must be space-separated ints, got {raw!r}") from None
    if not isinstance(raw, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**63 for h in raw
    ):
        raise ValueError("'hash_ids' must be a list of ints in [0, 2**63)")
    return float(ts), n_in, n_out, tuple(raw)


def load_generic(
    path: str | os.PathLike[str],
    rule: PrefixRule,
    rng: np.random.Generator,
    *,
    block_size: int = 16,
    max_requests: int | None = None,
    window_s: float | None = None,
    start_s: float = 0.0,
    on_bad_line: str = "error",
    skipped: list[TraceError] | None = None,
) -> list[TraceRequest]:
    """Load a generic trace: ``.jsonl`` (one object per line) or ``.csv`` (header line).

    With ``hash_ids`` the prompt blocks are ``block_size`` tokens and ``input_length`` must
    fit them (``(n - 1) * block_size < input_length <= n * block_size``); without, ``rule``
    synthesises prefixes. Errors as in :func:`load_azure`.
    """
    file_path = pathlib.Path(path)
    file = str(file_path)
    suffix = file_path.suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise TraceError(file, None, "a generic trace must end in .jsonl or .csv")

    def checked(line: int, d: dict[str, Any], csv_mode: bool) -> tuple[int, TraceRow | str]:
        try:
            if "__error__" in d:
                raise ValueError(d["__error__"])
            row = _generic_row(d, csv_mode)
            if row[3] is not None:
                n = len(row[3])
                if not (n - 1) * block_size < row[1] <= n * block_size:
                    raise ValueError(
                        f"input_length {row[1]} does not fit {n} hash_ids of {block_size} tokens"
                    )
        except ValueError as exc:
            return line, str(exc)
        return line, row

    def rows() -> Iterator[tuple[int, TraceRow | str]]:
        with _open(file_path) as fh:
            if suffix == ".csv":
                for line, d in _csv_rows(fh, file, ("arrival_s", "input_length", "output_length")):
                    yield checked(line, d, True)
                return
            bad: dict[int, str] = {}
            for line, text in enumerate(_decoded(fh, bad), start=1):
                if line in bad:
                    yield line, bad[line]
                    continue
                if not text.strip():
                    continue
                try:
                    d = json.loads(text)
                except ValueError as exc:
                    yield line, f"invalid JSON: {exc}"
                    continue
                if not isinstance(d, dict):
                    yield line, f"expected a JSON object, got {type(d).__name__}"
                    continue
                yield checked(line, d, False)

    sel = _select(rows(), file, max_requests, window_s, start_s, on_bad_line, skipped)
    if sel and sel[0][4] is not None:
        return [TraceRequest(r, t, i, o, HashBlocks(h or (), block_size)) for r, t, i, o, h in sel]
    return rule.apply([(r, t, i, o) for r, t, i, o, _ in sel], rng)
