"""Overrides of a scenario's TOML document, applied before it is validated: ``--set KEY=VALUE``
parsed (:func:`parse_override`), a dotted key set in the document (:func:`apply_override`; a
``SimConfig`` field goes to whichever of ``[cache]`` / ``[scheduler]`` sets it) and a trace file
replacing the workload, its format detected (:func:`apply_trace`). Used by
:func:`radixbench.harness.config.scenario.load_scenario`.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re
import tomllib
from typing import Any

from radixbench.harness.config.tomlmap import ScenarioError

# sim.config and workloads.sources (torch) are imported where used: the command line parses
# --set with parse_override before anything heavy is loaded.

__all__ = ["SIM_TABLES", "apply_override", "apply_trace", "parse_override"]

#: The scenario tables that hold ``SimConfig`` fields (a field may appear in one of them only).
SIM_TABLES = ("cache", "scheduler")


#: What ``--set KEY=WORD`` may give unquoted, read as a string: a bare word (letters, digits,
#: ``_ - . / : + ~ @``), e.g. ``--set workload.path=traces/a.jsonl`` or ``sim.policy=lru``.
_BARE_WORD = re.compile(r"[\w.\-/:+~@]+")


def parse_override(text: str, flag: str = "--set") -> tuple[str, Any]:
    """``"arrivals.rate=4.5"`` -> ``("arrivals.rate", 4.5)``: the value is a TOML value; a bare
    word that is no TOML value (``lru``, ``traces/a.jsonl``) is taken as a string. Raises
    ``ValueError`` (one line naming ``flag`` and the key) if there is no ``=``, or the value is
    neither TOML nor a bare word (``key=[``, ``key="open``: a malformed array or string)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{flag} expects KEY=VALUE, got {text!r}")
    key, raw = key.strip(), raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError as e:
        if not _BARE_WORD.fullmatch(raw):
            reason = str(e).split(" (at ")[0]
            raise ValueError(
                f"{flag} {key}: not a TOML value ({reason}): {raw!r}; a string with spaces or "
                f"brackets is quoted, e.g. {flag} '{key}=\"...\"'"
            ) from None
        value = raw
    return key, value


@functools.cache
def _sim_fields() -> frozenset[str]:
    from radixbench.sim.config import SimConfig

    return frozenset(f.name for f in dataclasses.fields(SimConfig)) - {"seed", "cost"}


def apply_override(doc: dict[str, Any], key: str, value: Any, file: str) -> str:
    """Set dotted ``key`` in ``doc`` (None deletes it; mutates ``doc``); returns the key path it
    resolved to (``sim.page_size`` -> ``cache.page_size``): ``sim.<field>`` or a bare
    ``SimConfig`` field goes to whichever of :data:`SIM_TABLES` already sets it (else
    ``[cache]``). Raises :class:`ScenarioError` when a parent key is not a table."""
    if key in _sim_fields():  # a bare SimConfig field, e.g. --set page_size=16
        key = f"sim.{key}"
    if key.startswith("sim."):  # the SimConfig field, in whichever table already sets it
        field = key[len("sim.") :]
        table = next((t for t in SIM_TABLES if field in doc.get(t, {})), SIM_TABLES[0])
        key = f"{table}.{field}"
    *parents, last = key.split(".")
    node = doc
    for i, part in enumerate(parents):
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ScenarioError(file, ".".join(parents[: i + 1]), "is not a table")
        node = nxt
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return key


def apply_trace(doc: dict[str, Any], trace: pathlib.Path) -> None:
    """Make ``doc`` replay the trace file ``trace`` (``--trace``; mutates ``doc``): its kind is
    detected
    (:func:`~radixbench.workloads.sources.detect_trace_kind`: Mooncake, Azure or generic
    JSONL/CSV). The same kind as the scenario's keeps the other ``[workload]`` keys; another
    kind replaces the table (keeping ``on_bad_line``), and a generator scenario's arrival
    process becomes the trace's own timestamps."""
    from radixbench.workloads.sources import TRACE_KINDS, detect_trace_kind

    work = doc.get("workload")
    work = work if isinstance(work, dict) else {}
    kind, old_kind = detect_trace_kind(trace), work.get("kind")
    if kind == old_kind:
        doc["workload"] = {**work, "path": str(trace)}
        return
    keep = {k: work[k] for k in ("on_bad_line",) if k in work}
    doc["workload"] = {"kind": kind, "path": str(trace), **keep}
    arrivals = doc.get("arrivals")
    if old_kind not in TRACE_KINDS and isinstance(arrivals, dict):
        doc["arrivals"] = {k: v for k, v in arrivals.items() if k not in ("rate", "cv")}
        doc["arrivals"]["process"] = "trace"
