"""Loader for the Mooncake FAST'25 request trace.

Format followed: the Mooncake FAST'25 trace (``FAST25-release/traces`` of the
kvcache-ai/Mooncake repository), one JSON object per line with ``timestamp`` (integer
milliseconds), ``input_length`` and ``output_length`` (tokens) and ``hash_ids`` (one hash
per 512-token block of the prompt; equal hash prefixes mean equal prompt prefixes).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import pathlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = [
    "BAD_LINE_POLICIES",
    "MOONCAKE_BLOCK_SIZE",
    "TraceError",
    "TraceRequest",
    "bundled_mooncake_path",
    "load_mooncake",
]

MOONCAKE_BLOCK_SIZE = 512
"""Tokens per ``hash_ids`` block in the Mooncake FAST'25 traces."""

BAD_LINE_POLICIES = ("error", "skip")
"""What a loader does with a malformed line: raise :class:`TraceError`, or skip and record it."""

_BUNDLED_NAME = "conversation_trace.jsonl"
_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
_MAX_HASH = 2**63 - 1
_resource_stack = contextlib.ExitStack()
atexit.register(_resource_stack.close)


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace.

    Attributes:
        rid: 0-based index of the record in the trace file (blank lines are not counted;
            malformed lines skipped with ``on_bad_line="skip"`` are); stable whatever window
            or limit selected it.
        arrival_s: arrival time in seconds since the timestamp of the file's first record.
        input_length: prompt length in tokens.
        output_length: number of generated tokens (>= 1).
        hash_ids: one hash per ``block_size``-token prompt block (512 for Mooncake); the
            last block may be partial. Workloads with another block size store a
            :class:`radixbench.workloads.tokens.HashBlocks`, which carries it.
        session_id: the conversation the request is a turn of (sglang's ``Req.session_id``,
            which its KV events carry), ``None`` when the source has none (the Mooncake and
            Azure traces; the ``multi-turn`` and ``chat-sessions`` generators set it).
    """

    rid: int
    arrival_s: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    session_id: str | None = None


class TraceError(ValueError):
    """A trace file is missing or malformed.

    ``str(err)`` is a single line ``"<file>:<line>: <reason>"`` (``"<file>: <reason>"``
    when the problem is not tied to a line, e.g. a missing file). The parts are kept in
    the attributes ``file`` (str), ``line`` (1-based int or None) and ``reason`` (str).
    """

    def __init__(self, file: str, line: int | None, reason: str) -> None:
        self.file = file
        self.line = line
        self.reason = " ".join(str(reason).split())
        where = file if line is None else f"{file}:{line}"
        super().__init__(f"{where}: {self.reason}")


def bundled_mooncake_path() -> pathlib.Path:
    """Return the filesystem path of the bundled Mooncake conversation trace.

    The file ships inside ``radixbench.workloads.data`` (Mooncake FAST'25
    ``conversation_trace.jsonl``, 12,031 requests, Apache-2.0; see that package's NOTICE).
    It is located with :mod:`importlib.resources`, so it works for editable and regular
    installs; from a zipped install it is extracted to a temporary file that lives until
    interpreter exit.

    Returns:
        A :class:`pathlib.Path` to the JSONL file.
    """
    from . import data

    resource = resources.files(data).joinpath(_BUNDLED_NAME)
    if isinstance(resource, pathlib.Path):
        return resource
    return pathlib.Path(_resource_stack.enter_context(resources.as_file(resource)))


def check_bad_line_policy(on_bad_line: str) -> None:
    """Raise ``ValueError`` unless ``on_bad_line`` is one of :data:`BAD_LINE_POLICIES`."""
    if on_bad_line not in BAD_LINE_POLICIES:
        raise ValueError(
            f"on_bad_line must be one of {', '.join(BAD_LINE_POLICIES)}, got {on_bad_line!r}"
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_record(raw: bytes, file: str, line: int, block_size: int) -> tuple[float, Any]:
    """Validate one JSONL line; return (timestamp_ms, record dict)."""
    try:
        rec = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"
        raise TraceError(file, line, reason) from None
    except ValueError as exc:
        raise TraceError(file, line, f"invalid JSON: {exc}") from None
    if not isinstance(rec, dict):
        raise TraceError(file, line, f"expected a JSON object, got {type(rec).__name__}")
    for key in _KEYS:
        if key not in rec:
            raise TraceError(file, line, f"missing key {key!r}")
    ts = rec["timestamp"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        raise TraceError(file, line, f"'timestamp' must be a finite number of ms, got {ts!r}")
    for key in ("input_length", "output_length"):
        value = rec[key]
        if not _is_int(value):
            raise TraceError(file, line, f"{key!r} must be an int, got {value!r}")
        if value < 0:
            raise TraceError(file, line, f"{key!r} must be non-negative, got {value}")
    if rec["output_length"] < 1:
        raise TraceError(file, line, "'output_length' must be >= 1 token, got 0")
    hashes = rec["hash_ids"]
    if not isinstance(hashes, list):
        raise TraceError(file, line, f"'hash_ids' must be a list, got {type(hashes).__name__}")
    if not hashes:
        raise TraceError(file, line, "'hash_ids' is empty")
    for h in hashes:
        if not _is_int(h) or not 0 <= h <= _MAX_HASH:
            raise TraceError(file, line, f"'hash_ids' must hold ints in [0, 2**63), got {h!r}")
    n_in, n_blocks = rec["input_length"], len(hashes)
    if not (n_blocks - 1) * block_size < n_in <= n_blocks * block_size:
        raise TraceError(
            file,
            line,
            f"input_length {n_in} does not fit {n_blocks} hash_ids of {block_size} tokens "
            f"(need {(n_blocks - 1) * block_size} < input_length <= {n_blocks * block_size})",
        )
    return float(ts), rec


def load_mooncake(
    path: str | os.PathLike[str] | None = None,
    *,
    max_requests: int | None = None,
    window_s: float | None = None,
    start_s: float = 0.0,
    block_size: int = MOONCAKE_BLOCK_SIZE,
    on_bad_line: str = "error",
    skipped: list[TraceError] | None = None,
) -> list[TraceRequest]:
    """Load requests from a Mooncake FAST'25 JSONL trace.

    Follows the Mooncake FAST'25 trace format: ``timestamp`` in ms (non-decreasing),
    ``input_length`` and ``output_length`` in tokens, ``hash_ids`` of ``block_size``-token
    (512) prompt blocks. ``arrival_s`` is ``(timestamp - first_timestamp) / 1000`` seconds,
    measured from the file's first record whatever is selected.

    The file is streamed: reading stops once ``max_requests`` requests are selected or an
    arrival reaches ``start_s + window_s``, so lines past that point are not validated.

    Args:
        path: JSONL file; ``None`` means :func:`bundled_mooncake_path`.
        max_requests: keep at most this many selected requests (> 0); ``None`` = no limit.
        window_s: keep only requests with ``start_s <= arrival_s < start_s + window_s``
            (seconds, > 0); ``None`` keeps every request with ``arrival_s >= start_s``.
        start_s: start of the selection in seconds since the first record.
        block_size: tokens per hash block (> 0), used to check ``input_length`` against
            ``hash_ids``: ``(len(hash_ids) - 1) * block_size < input_length <=
            len(hash_ids) * block_size``.
        on_bad_line: ``"error"`` raises on the first malformed line; ``"skip"`` leaves it
            out (its record index still counts for ``rid``) and appends its
            :class:`TraceError` to ``skipped``.
        skipped: list that receives the skipped lines' errors (``on_bad_line="skip"``).

    Returns:
        The selected requests in file order (``rid`` = 0-based record index in the file).

    Raises:
        ValueError: ``max_requests``, ``window_s`` or ``block_size`` is not > 0, or
            ``start_s`` is not finite (the message names the parameter).
        TraceError: the file cannot be opened (message names the file), or a line has
            invalid JSON, a missing key, a wrong type (bools are not ints), a negative
            length, ``output_length`` < 1, empty ``hash_ids``, an ``input_length``
            inconsistent with ``hash_ids``, or a timestamp smaller than the previous one
            (message ``"<file>:<line>: <reason>"``).
    """
    if max_requests is not None and (not _is_int(max_requests) or max_requests <= 0):
        raise ValueError(f"max_requests must be a positive int or None, got {max_requests!r}")
    if window_s is not None and not window_s > 0:
        raise ValueError(f"window_s must be > 0 seconds or None, got {window_s!r}")
    if not math.isfinite(start_s):
        raise ValueError(f"start_s must be a finite number of seconds, got {start_s!r}")
    if not _is_int(block_size) or block_size <= 0:
        raise ValueError(f"block_size must be a positive int (tokens), got {block_size!r}")
    check_bad_line_policy(on_bad_line)

    file_path = bundled_mooncake_path() if path is None else pathlib.Path(path)
    file = str(file_path)
    end_s = math.inf if window_s is None else start_s + window_s
    out: list[TraceRequest] = []
    try:
        fh = open(file_path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise TraceError(file, None, f"cannot open trace file: {reason}") from None
    with fh:
        first_ts: float | None = None
        prev_ts = -math.inf
        rid = 0
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                ts, rec = _parse_record(raw, file, line_no, block_size)
                if ts < prev_ts:
                    raise TraceError(
                        file, line_no, f"timestamp {rec['timestamp']} ms < previous {prev_ts:g} ms"
                    )
            except TraceError as err:
                if on_bad_line == "error":
                    raise
                if skipped is not None:
                    skipped.append(err)
                rid += 1
                continue
            prev_ts = ts
            if first_ts is None:
                first_ts = ts
            arrival_s = (ts - first_ts) / 1000.0
            if arrival_s >= end_s:
                break
            if arrival_s >= start_s:
                out.append(
                    TraceRequest(
                        rid=rid,
                        arrival_s=arrival_s,
                        input_length=rec["input_length"],
                        output_length=rec["output_length"],
                        hash_ids=tuple(rec["hash_ids"]),
                    )
                )
                if max_requests is not None and len(out) >= max_requests:
                    break
            rid += 1
    return out
