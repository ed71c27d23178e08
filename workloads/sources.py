"""Workload sources by kind: trace replays (Mooncake, Azure 2023, generic) and generators.

:data:`SOURCES` maps a scenario's ``workload.kind`` to its frozen, validated parameter
dataclass; :func:`load_workload` turns kind + parameters + :class:`Arrivals` into the requests
to simulate (selected, timed, first arrival at 0 s), drawing every random choice from one seeded
``numpy.random.Generator`` (prefix synthesis or generation first, then arrival gaps).
"""

from __future__ import annotations

import csv
import json
import pathlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from radixbench.workloads.arrivals import Arrivals, apply_arrivals, select
from radixbench.workloads.generators import GENERATORS, generate
from radixbench.workloads.segments import PrefixRule
from radixbench.workloads.sessions import TIMED_GENERATORS
from radixbench.workloads.tabular import AZURE_TRACES, bundled_azure_path, load_azure, load_generic
from radixbench.workloads.tokens import HashBlocks
from radixbench.workloads.trace import MOONCAKE_BLOCK_SIZE, TraceError, TraceRequest, load_mooncake

__all__ = [
    "SOURCES",
    "AzureTrace",
    "GenericTrace",
    "MooncakeTrace",
    "detect_trace_kind",
    "load_workload",
]


@dataclass(frozen=True)
class MooncakeTrace:
    """Mooncake FAST'25 JSONL replay: ``path`` ("" = the bundled conversation trace, relative
    paths from the scenario file's folder), ``block_size`` tokens per ``hash_ids`` block."""

    path: str = ""
    block_size: int = MOONCAKE_BLOCK_SIZE

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1 token, got {self.block_size}")


@dataclass(frozen=True)
class AzureTrace(PrefixRule):
    """Azure LLM inference 2023 replay: ``trace`` "code" or "conv" (bundled) or a ``path`` to
    a CSV in that format; prefixes synthesised by the :class:`PrefixRule` fields."""

    trace: str = "code"
    path: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.trace not in AZURE_TRACES:
            raise ValueError(
                f"unknown Azure trace {self.trace!r}; known: {', '.join(AZURE_TRACES)}"
            )


@dataclass(frozen=True)
class GenericTrace(PrefixRule):
    """Generic JSONL/CSV trace at ``path`` (required); ``block_size`` is the size of its
    ``hash_ids`` blocks, and without ``hash_ids`` the :class:`PrefixRule` fields apply."""

    path: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.path:
            raise ValueError("path is required (a .jsonl or .csv trace)")


SOURCES: dict[str, type] = {
    "mooncake": MooncakeTrace,
    "azure": AzureTrace,
    "trace": GenericTrace,
    **{name: cls for name, (cls, _) in GENERATORS.items()},
    **{name: cls for name, (cls, _) in TIMED_GENERATORS.items()},
}
"""``workload.kind`` -> parameter dataclass (traces first, then generators)."""

TRACE_KINDS = ("mooncake", "azure", "trace")


def detect_trace_kind(path: pathlib.Path) -> str:
    """The ``workload.kind`` of the trace file at ``path``: "azure" (a CSV whose header has
    ``TIMESTAMP`` and ``ContextTokens``), "trace" (the generic format: any other ``.csv``, or
    JSON lines whose first record has ``arrival_s``) or "mooncake" (anything else, so a file
    that is neither is reported by the Mooncake loader with file:line).

    Reads the first non-blank line only. Raises :class:`TraceError` naming the file when it
    cannot be opened.
    """
    try:
        with open(path, "rb") as fh:
            first = next((raw for raw in fh if raw.strip()), b"")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise TraceError(str(path), None, f"cannot open trace file: {reason}") from None
    text = first.decode("utf-8", errors="replace")
    if path.suffix.lower() == ".csv":
        header = next(csv.reader([text]), [])
        return "azure" if {"TIMESTAMP", "ContextTokens"} <= set(header) else "trace"
    try:
        record = json.loads(text)
    except ValueError:
        return "mooncake"
    return "trace" if isinstance(record, dict) and "arrival_s" in record else "mooncake"


def _path(text: str, base_dir: pathlib.Path | None) -> pathlib.Path:
    p = pathlib.Path(text).expanduser()
    return p if p.is_absolute() or base_dir is None else base_dir / p


def load_workload(
    kind: str,
    params: Any,
    arrivals: Arrivals,
    rng: np.random.Generator,
    *,
    on_bad_line: str = "error",
    skipped: list[TraceError] | None = None,
    base_dir: pathlib.Path | None = None,
) -> list[TraceRequest]:
    """The requests of one workload: loaded or generated, selected, then timed.

    Raises ``ValueError`` for a bad kind/parameter combination (e.g. ``process = "trace"``
    with a generator) or an empty selection, and :class:`TraceError` on a malformed trace line
    (unless ``on_bad_line = "skip"``, which appends it to ``skipped``).
    """
    if kind not in SOURCES:
        raise ValueError(f"unknown workload kind {kind!r}; known: {', '.join(SOURCES)}")
    sel: dict[str, Any] = {
        "max_requests": arrivals.max_requests,
        "window_s": arrivals.window_s,
        "start_s": arrivals.start_s,
        "on_bad_line": on_bad_line,
        "skipped": skipped,
    }
    reqs: list[TraceRequest]
    path: pathlib.Path | None = None
    if kind == "mooncake":
        path = _path(params.path, base_dir) if params.path else None
        reqs = load_mooncake(path, block_size=params.block_size, **sel)
        if params.block_size != MOONCAKE_BLOCK_SIZE:
            reqs = [
                TraceRequest(
                    r.rid,
                    r.arrival_s,
                    r.input_length,
                    r.output_length,
                    HashBlocks(r.hash_ids, params.block_size),
                )
                for r in reqs
            ]
    elif kind == "azure":
        path = _path(params.path, base_dir) if params.path else bundled_azure_path(params.trace)
        reqs = load_azure(path, params, rng, **sel)
    elif kind == "trace":
        path = _path(params.path, base_dir)
        reqs = load_generic(
            path,
            params,
            rng,
            block_size=params.block_size,
            **sel,
        )
    elif kind in TIMED_GENERATORS:  # times its own requests (sessions with think time)
        if arrivals.process == "trace":
            raise ValueError(f"a {kind} workload draws session starts: set arrivals.process")
        reqs = select(TIMED_GENERATORS[kind][1](params, arrivals, rng), arrivals)
        arrivals = replace(arrivals, process="trace", rate=None)
    else:
        if arrivals.process == "trace":
            raise ValueError(f"a {kind} workload has no timestamps: set arrivals.process")
        reqs = generate(kind, params, rng)
    if kind in TIMED_GENERATORS:
        pass
    elif kind not in TRACE_KINDS:  # draw times, select on them, then scale like a trace
        reqs = select(
            apply_arrivals(reqs, replace(arrivals, time_scale=1.0, rate_scale=1.0), rng), arrivals
        )
        arrivals = replace(arrivals, process="trace", rate=None, stages=())
    elif arrivals.process != "trace" and reqs:
        reqs = apply_arrivals(reqs, arrivals, rng)
        arrivals = replace(
            arrivals, process="trace", rate=None, stages=(), time_scale=1.0, rate_scale=1.0
        )
    if not reqs:
        if kind in TRACE_KINDS:
            where = str(path) if path is not None else "the bundled trace"
            raise TraceError(where, None, "no request selected (an empty trace, or a selection "
                             "--start/--window outside it)")  # fmt: skip
        raise ValueError("the selection contains no request")
    return apply_arrivals(reqs, arrivals, rng)
