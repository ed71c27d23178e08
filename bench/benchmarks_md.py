"""The sections of ``BENCHMARKS.md``: ``bench sim`` writes its ``Simulator speed`` section
between :data:`START` and :data:`END`, ``bench served`` its ``SGLang as served`` section between
:data:`SERVED_START` and :data:`SERVED_END`, ``bench cost`` its ``Step times`` section between
:data:`COST_START` and :data:`COST_END`, each leaving the rest of the file as it was
(:func:`write_section`); between :data:`ANSWERS_START` and :data:`ANSWERS_END` lie hand-written
figures (the answers under AIC and under the roofline, side by side); ``bench cache`` and
``bench alloc`` rewrite the whole file and keep those sections after their text
(:func:`write_document`). Every write is atomic, with the mode
a plain write would give (``reports._atomic.atomic_paths``)."""

from __future__ import annotations

from pathlib import Path

from radixbench.bench.sim import SimBench, lines
from radixbench.reports._atomic import atomic_paths

__all__ = [
    "ANSWERS_END", "ANSWERS_START", "COST_END", "COST_START", "END", "PEERS_END",
    "PEERS_START", "SERVED_END", "SERVED_START", "START", "markdown",
    "with_section_of",
    "write_document", "write_section",
]  # fmt: skip

START = "<!-- bench-sim:start -->"
END = "<!-- bench-sim:end -->"
SERVED_START = "<!-- bench-served:start -->"
SERVED_END = "<!-- bench-served:end -->"
PEERS_START = "<!-- bench-peers:start -->"
PEERS_END = "<!-- bench-peers:end -->"
COST_START = "<!-- bench-cost:start -->"
COST_END = "<!-- bench-cost:end -->"
ANSWERS_START = "<!-- cost-answers:start -->"
ANSWERS_END = "<!-- cost-answers:end -->"
#: The kept sections, as ``(start, end)`` markers, in the order :func:`with_section_of` appends.
SECTIONS = (
    (START, END), (SERVED_START, SERVED_END), (PEERS_START, PEERS_END),
    (COST_START, COST_END), (ANSWERS_START, ANSWERS_END),
)  # fmt: skip


def markdown(b: SimBench, command: str) -> str:
    """The ``Simulator speed`` section, markers included."""
    body = [START, "## Simulator speed", "", f"Regenerate: `{command}`", ""]
    body += [
        "Figures of `radixbench bench sim` (bench/sim.py), on the machine below; "
        "every cache operation real and timed with `perf_counter_ns`. The whole trace is the "
        "best of its fresh-process runs (each listed).",
        "",
    ]
    body += [f"  - {x.strip()}" if x.startswith(" ") else f"- {x}" for x in lines(b)]
    body += ["", "Machine:", ""]
    body += [f"- {k}: {v}" for k, v in b.env.items()]
    body += [END]
    return "\n".join(body) + "\n"


def write_section(path: Path, section: str, start: str = START, end: str = END) -> None:
    """Put ``section`` between ``start`` / ``end`` (default :data:`START` / :data:`END`) in
    ``path`` (replacing the old section, or appended after a blank line; the file is created if
    missing). Atomic, with the mode a plain write would give (``reports._atomic.atomic_paths``)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    old = _section(text, start, end)
    if old is not None:
        head, rest = text.split(old, 1)
        tail = rest.lstrip("\n")
        new = head + section + ("\n" + tail if tail else "")
    else:
        new = text + ("\n" if text and not text.endswith("\n\n") else "") + section
    with atomic_paths(path) as (tmp,):
        tmp.write_text(new, encoding="utf-8")


def with_section_of(path: Path, text: str) -> str:
    """``text`` followed by the sections of :data:`SECTIONS` that ``path`` holds now (each
    left out when the file or the section is missing): so that ``bench cache``
    / ``bench alloc``, which rewrite the whole file, keep the figures of the last ``bench
    served``, ``bench sim`` and ``bench cost`` and the hand-written answers. Reads only."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    for start, end in SECTIONS:
        section = _section(old, start, end)
        if section is not None and section not in text:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
    return text


def _section(text: str, start: str = START, end: str = END) -> str | None:
    """The first ``start ... end`` span of ``text`` (markers included), or None."""
    i = text.find(start)
    j = text.find(end, i) if i >= 0 else -1
    return text[i : j + len(end)] if j >= 0 else None


def write_document(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, keeping the file's ``SGLang as served`` and
    ``Simulator speed`` sections after it (:func:`with_section_of`)."""
    text = with_section_of(path, text)
    with atomic_paths(path) as (tmp,):
        tmp.write_text(text, encoding="utf-8")
