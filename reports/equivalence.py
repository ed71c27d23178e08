"""How every report states the equivalence check: one status and one sentence, shared by
``report.md``, ``report.html``, the PR summary and the terminal, so they never disagree.

The check itself (:func:`radixbench.harness.experiments.equivalence.check_equivalence`) groups
the variants by the axes that change prefix hits by design (HiCache's write policy, the
router, the instance count) and compares hits only within a group. Its result reads here as:

* ``PASS``: every group of two or more variants saw identical hits;
* ``NOTHING TO CHECK``: the variants differ only on such axes (every group holds one variant,
  e.g. four routers over one cache variant): there is no pair that must agree;
* ``FAILED``: two variants of one group saw different hits (first differing request given);
* ``NOT REQUIRED``: they did, where measured time moves the schedule (the check's ``exempt``:
  the coupled clock, a router's coupled decision time), so they may.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["AXIS_NAMES", "equivalence_line", "equivalence_sentence", "equivalence_status"]

#: How the reports name a behavioural axis (one value of it: "within each router").
AXIS_NAMES: dict[str, str] = {
    "hicache": "HiCache setting",
    "router": "router",
    "instances": "instance count",
}


def _axes(eq: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in eq.get("axes") or []]


def _groups(eq: Mapping[str, Any]) -> list[Sequence[str]]:
    return list(eq.get("groups") or [eq.get("variants", [])])


def _axes_text(axes: Sequence[str], plural: bool = False) -> str:
    names = [AXIS_NAMES.get(a, a) + ("s" if plural else "") for a in axes]
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def equivalence_status(eq: Mapping[str, Any]) -> str:
    """``PASS``, ``FAILED``, ``NOT REQUIRED`` or ``NOTHING TO CHECK`` (module docstring) of a
    check result."""
    if not eq.get("ok", True):
        return "NOT REQUIRED" if eq.get("exempt") else "FAILED"
    if _axes(eq) and all(len(g) < 2 for g in _groups(eq)):
        return "NOTHING TO CHECK"
    return "PASS"


def equivalence_sentence(eq: Mapping[str, Any], names: bool = True) -> str:
    """What the check found, as one Markdown sentence without its final full stop (inline
    code in backticks), e.g. "within each router (2 + 2 variants) the variants saw identical
    `prefix_hit_tokens` for all 300 requests; hits differ across routers by design and are
    not compared across them". ``names``: list the variants of a plain pass (the reports do;
    the terminal and the PR summary, short, do not)."""
    axes = _axes(eq)
    groups = _groups(eq)
    variants = [str(v) for v in eq.get("variants", [])]
    n = eq.get("n_requests", "n/a")
    n_text = f"{n:,}" if isinstance(n, int) else str(n)
    status = equivalence_status(eq)
    if status in ("FAILED", "NOT REQUIRED"):
        first = eq.get("first_diff") or {}
        where = f"two variants of one {_axes_text(axes)}" if axes else "the variants"
        detail = (
            f"; first differing request: rid {first.get('rid')}: {first.get('values')}"
            if first
            else " (no first differing request was recorded)"
        )
        if status == "NOT REQUIRED":
            return f"{where} saw different `prefix_hit_tokens`, as they may: {eq['exempt']}{detail}"
        return f"{where} do NOT produce identical `prefix_hit_tokens`{detail}"
    if status == "NOTHING TO CHECK":
        return (
            f"each {_axes_text(axes)} ran one cache variant ({len(variants)} variants in all), "
            f"and prefix hits differ across {_axes_text(axes, plural=True)} by design, so no "
            "pair of variants must agree; equivalence is checked within each "
            f"{_axes_text(axes)} across cache variants (evictors, matchers, implementations)"
        )
    if axes:
        sizes = " + ".join(str(len(g)) for g in groups)
        return (
            f"within each {_axes_text(axes)} ({sizes} variants) the variants saw identical "
            f"`prefix_hit_tokens` for all {n_text} requests; hits differ across "
            f"{_axes_text(axes, plural=True)} by design and are not compared across them"
        )
    listed = " (" + ", ".join(f"`{v}`" for v in variants) + ")" if names and variants else ""
    who = f"all {len(variants)} variants{listed}" if variants else "the variants"
    return f"{who} saw identical `prefix_hit_tokens` for all {n_text} requests"


def equivalence_line(eq: Mapping[str, Any]) -> str:
    """The terminal's line: ``equivalence: OK — ...``, ``equivalence: DIVERGED — ...`` or
    ``equivalence: nothing to check — ...`` (:func:`equivalence_sentence`, code marks
    dropped)."""
    word = {
        "PASS": "OK",
        "FAILED": "DIVERGED",
        "NOT REQUIRED": "not required",
        "NOTHING TO CHECK": "nothing to check",
    }
    text = equivalence_sentence(eq, names=False).replace("`", "")
    return f"equivalence: {word[equivalence_status(eq)]} — {text}"
