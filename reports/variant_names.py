"""Variant names and their axes (docs/CONTRACTS.md).

A variant of radixbench's own cache is named ``"<evictor>/<matcher>/<flatten>"``; a variant of
another cache implementation (SGLang's ``RadixCache``: ``--impl sglang``), whose evictor and
matcher are its own, is named ``"<impl>/<flatten>"`` (``sglang/chain``). Names are split
structurally (three parts or two), so the reports need nothing but the tables.

Axes: :data:`EVICTOR_AXIS`, :data:`MATCHER_AXIS`, :data:`FLATTEN_AXIS` index the parts of a
three-part name; the ``impl`` axis compares another implementation with radixbench's cache
running the baseline evictor and matcher (:func:`partner`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = [
    "AXIS_NAMES",
    "EVICTOR_AXIS",
    "FLATTEN_AXIS",
    "MATCHER_AXIS",
    "RADIXBENCH",
    "VariantName",
    "axis_value",
    "parse_variant",
    "partner",
]

EVICTOR_AXIS = 0
MATCHER_AXIS = 1
FLATTEN_AXIS = 2
#: Axis index -> name (the keys of a baseline mapping).
AXIS_NAMES = ("evictor", "matcher", "flatten")
#: The implementation a three-part name runs.
RADIXBENCH = "radixbench"


class VariantName(NamedTuple):
    """The parts of a variant name: ``impl`` (``radixbench`` for a three-part name),
    ``evictor`` / ``matcher`` (``None`` for another implementation) and ``flatten`` (``None``
    for a name of one part, or of more than three)."""

    impl: str
    evictor: str | None
    matcher: str | None
    flatten: str | None


def parse_variant(name: str) -> VariantName:
    """Split ``name``: three parts -> radixbench's ``evictor/matcher/flatten``, two ->
    ``impl/flatten``; anything else is an opaque implementation name."""
    parts = name.split("/")
    if len(parts) == 3:
        return VariantName(RADIXBENCH, parts[0], parts[1], parts[2])
    if len(parts) == 2:
        return VariantName(parts[0], None, None, parts[1])
    return VariantName(name, None, None, None)


def axis_value(name: str, axis_index: int) -> str:
    """The value of ``name`` on axis ``axis_index`` (0..2), for grouping: an axis the variant
    does not have (another implementation's evictor or matcher) reads as its impl label, an
    unparseable name as the whole name. Raises ``ValueError`` for an axis outside 0..2."""
    if axis_index not in (EVICTOR_AXIS, MATCHER_AXIS, FLATTEN_AXIS):
        raise ValueError(f"variant {name!r} has no axis {axis_index} (expected 0, 1 or 2)")
    v = parse_variant(name)
    value = (v.evictor, v.matcher, v.flatten)[axis_index]
    return v.impl if value is None else value


def partner(name: str, axis: str, baseline: Mapping[str, str]) -> str | None:
    """The baseline partner of variant ``name`` on ``axis``, or ``None`` when ``name`` is a
    baseline there or lacks that axis.

    ``evictor`` / ``matcher`` / ``flatten``: the same name with that part replaced by
    ``baseline[axis]`` (an other-implementation name has only ``flatten``). ``impl``: for an
    ``<impl>/<flatten>`` name, radixbench's ``<baseline evictor>/<baseline matcher>/<flatten>``
    (``baseline`` must then hold ``evictor`` and ``matcher``; ``None`` if it does not).
    ``baseline[axis]`` missing -> ``None``.
    """
    v = parse_variant(name)
    if axis == "impl":
        if v.impl == RADIXBENCH or v.flatten is None:
            return None
        if "evictor" not in baseline or "matcher" not in baseline:
            return None
        return f"{baseline['evictor']}/{baseline['matcher']}/{v.flatten}"
    value = baseline.get(axis)
    if value is None or axis not in AXIS_NAMES:
        return None
    current = getattr(v, axis)
    if current is None or current == value:
        return None
    if v.impl == RADIXBENCH:
        parts = [v.evictor, v.matcher, v.flatten]
        parts[AXIS_NAMES.index(axis)] = value
        return "/".join(str(p) for p in parts)
    return f"{v.impl}/{value}"  # only the flatten axis reaches here
