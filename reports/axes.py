"""Variants as records of named axes, read from the run tables' columns (docs/CONTRACTS.md).

Every run table carries, after ``variant`` (the display name), one column per axis of the
variant: ``impl``, ``evictor``, ``matcher``, ``flatten`` and whatever further axes a feature
adds (:data:`AXES` lists the known ones). A value is missing (NA) where the variant does not
have that axis — an implementation that evicts and matches with its own code (SGLang's
caches) has no ``evictor`` / ``matcher``. Reports group and pair variants by these columns
only: a display name is never split (it may contain ``/`` anywhere).

Pairing (:meth:`VariantSet.partner`): a candidate is compared with the variant that differs
from it on exactly one axis, that axis holding the baseline value. On the ``impl`` axis the
other axes must agree too, and where one side's implementation runs its own algorithm the
other side must run the same one — its *like-for-like* partner: an implementation's
``reference`` (e.g. sglang 0.5.23 evicts as radixbench's ``heapify`` and matches as
``galloping``; the run record's ``implementations[i]["reference"]``). Without such a variant in the
run, the partner is the one with the baseline values on those axes, and the pair's note
says it is not like-for-like.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pandas as pd

__all__ = ["AXES", "REPLICA", "Pair", "VariantSet", "references"]

#: Axis columns a run table may carry, in display order. A table has the ones its variants
#: use; ``impl``, ``evictor``, ``matcher`` and ``flatten`` always.
AXES: tuple[str, ...] = (
    "impl", "tree_core", "evictor", "matcher", "flatten", "hicache", "router", "instances",
    "replica",
)  # fmt: skip
#: The A/A axis: a variant holding a value here (``2``) is a replica of the variant without
#: one, run beside it to measure the noise floor; it pairs with that variant only.
REPLICA = "replica"

#: The implementation axis's default baseline, in order of preference.
_IMPL_BASELINES = ("radixbench", "sglang")


class Pair(NamedTuple):
    """A candidate and its baseline partner on ``axis``; ``note`` says how an ``impl`` pair
    was matched (empty for the other axes)."""

    axis: str
    candidate: str
    baseline: str
    note: str = ""


def references(implementations: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Implementation label -> the radixbench axis values its own code runs, from the run
    record's ``implementations`` entries (entries without a ``reference`` give none)."""
    out: dict[str, dict[str, str]] = {}
    for entry in implementations:
        if isinstance(entry, Mapping) and isinstance(entry.get("reference"), Mapping):
            out[str(entry.get("impl"))] = {str(k): str(v) for k, v in entry["reference"].items()}
    return out


def _value(v: Any) -> str | None:
    return None if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


@dataclass(frozen=True)
class VariantSet:
    """The variants of a run in the order listed: ``names``, the axis columns present
    (``axes``), each variant's value per axis (``values``: ``None`` = not an axis of that
    variant) and each implementation's ``reference`` algorithms."""

    names: tuple[str, ...]
    axes: tuple[str, ...]
    values: Mapping[str, Mapping[str, str | None]]
    reference: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def from_frames(
        cls,
        *frames: pd.DataFrame | None,
        reference: Mapping[str, Mapping[str, str]] | None = None,
    ) -> VariantSet:
        """Read the variants from the ``variant`` and axis columns of ``frames`` (first
        appearance order across them; ``None`` frames skipped). Raises ``ValueError`` when a
        frame has rows but no ``impl`` column (a table written before variants had axes:
        ``radixbench.reports.record`` adds them to old runs), or when one name has two
        different axis records in two frames (within one frame, its first row's record
        counts: the simulator writes one record per variant)."""
        axes: list[str] = []
        values: dict[str, dict[str, str | None]] = {}
        for df in frames:
            if df is None or not len(df):
                continue
            if "impl" not in df.columns:
                raise ValueError(
                    "the table has no variant axis columns (impl, evictor, matcher, flatten)"
                )
            present = [a for a in AXES if a in df.columns]
            axes += [a for a in present if a not in axes]
            unique = df[["variant", *present]].drop_duplicates(subset="variant")
            for row in unique.itertuples(index=False):
                name, *vals = row
                rec = {a: _value(v) for a, v in zip(present, vals, strict=True)}
                old = values.setdefault(str(name), rec)
                if any(old.get(a) != v for a, v in rec.items() if a in old):
                    raise ValueError(f"variant {name!r} has two axis records: {old} and {rec}")
                old.update({a: v for a, v in rec.items() if a not in old})
        order = [a for a in AXES if a in axes]
        full = {n: {a: rec.get(a) for a in order} for n, rec in values.items()}
        return cls(tuple(values), tuple(order), full, dict(reference or {}))

    # ---------------------------------------------------------------- reading
    def value(self, name: str, axis: str) -> str | None:
        """``name``'s value on ``axis`` (``None``: not an axis of that variant)."""
        return self.values.get(name, {}).get(axis)

    def group_key(self, name: str, axis: str) -> str:
        """What groups ``name`` on ``axis`` in a plot: its value, or its implementation's
        label where the implementation runs its own algorithm."""
        v = self.value(name, axis)
        return v if v is not None else str(self.value(name, "impl") or name)

    def has(self, name: str, axis: str) -> bool:
        return self.value(name, axis) is not None

    def varied(self) -> list[str]:
        """Axes on which the run's variants hold two or more values (``None`` not counted),
        in :data:`AXES` order; never :data:`REPLICA`."""
        out = []
        for axis in (a for a in self.axes if a != REPLICA):
            vals = {self.value(n, axis) for n in self.names} - {None}
            if len(vals) > 1:
                out.append(axis)
        return out

    def resolve_baseline(self, named: Mapping[str, str] | None = None) -> dict[str, str]:
        """Baseline value per axis: ``named[axis]`` when a variant has it, else (``impl``)
        ``radixbench`` or ``sglang`` when run, else the first listed variant's value; an
        axis no variant has is left out."""
        named = named or {}
        out: dict[str, str] = {}
        for axis in (a for a in self.axes if a != REPLICA):
            vals = [v for n in self.names if (v := self.value(n, axis)) is not None]
            if not vals:
                continue
            want = named.get(axis)
            if want is not None and want in vals:
                out[axis] = want
            elif axis == "impl":
                out[axis] = next((b for b in _IMPL_BASELINES if b in vals), vals[0])
            else:
                out[axis] = vals[0]
        return out

    # ---------------------------------------------------------------- pairing
    def partner(self, name: str, axis: str, baseline: Mapping[str, str]) -> Pair | None:
        """The baseline partner of ``name`` on ``axis`` (see the module docstring), or
        ``None`` when ``name`` holds the baseline value there, lacks the axis, or no such
        variant ran."""
        mine = self.values.get(name, {})
        if axis == REPLICA:  # a replica pairs with the variant it copies
            if mine.get(REPLICA) is None:
                return None
            target = {**mine, REPLICA: None}
            other = next((n for n in self.names if self.values[n] == target), None)
            return None if other is None else Pair(axis, name, other)
        want = baseline.get(axis)
        if want is None or mine.get(axis) in (None, want):
            return None
        if axis != "impl":
            target = {**mine, axis: want}
            for other in self.names:
                if self.values[other] == target:
                    return Pair(axis, name, other)
            return None
        strict = self._impl_partner(name, want, baseline, like_for_like=True)
        if strict is not None:
            return strict
        return self._impl_partner(name, want, baseline, like_for_like=False)

    def like_for_like(self, name: str, baseline: Mapping[str, str]) -> bool:
        """Whether ``name``'s ``impl`` partner (:meth:`partner`) runs the implementation's own
        algorithms (its ``reference``) on every axis one side lacks; false when it was paired
        on the baseline's values instead, or has no partner."""
        want = baseline.get("impl")
        pair = self.partner(name, "impl", baseline)
        if pair is None or want is None:
            return False
        return not pair.note or self._impl_partner(name, want, baseline, True) is not None

    def _impl_partner(
        self, name: str, want: str, baseline: Mapping[str, str], like_for_like: bool
    ) -> Pair | None:
        mine = self.values[name]
        for other in self.names:
            theirs = self.values[other]
            if theirs.get("impl") != want:
                continue
            owned: list[str] = []
            ok = True
            for b in self.axes:
                x, y = mine.get(b), theirs.get(b)
                if b == "impl" or x == y:
                    continue
                if x is not None and y is not None:
                    ok = False
                    break
                owner = mine["impl"] if x is None else want
                runs = y if x is None else x
                ref = self.reference.get(str(owner), {}).get(b)
                target = ref if like_for_like else baseline.get(b)
                if target is None or runs != target:
                    ok = False
                    break
                owned.append(f"{b} {runs}")
            if ok:
                return Pair("impl", name, other, self._note(name, other, owned, like_for_like))
        return None

    def _note(self, name: str, other: str, owned: Sequence[str], like: bool) -> str:
        if not owned:
            return ""
        impls = {self.value(n, "impl") for n in (name, other)}
        owner = next(
            (str(i) for i in impls if i is not None and i in self.reference),
            str(self.value(name, "impl")),
        )
        what = ", ".join(owned)
        if like:
            return f"paired with {other}: like-for-like, {owner} runs {what}"
        ref = self.reference.get(owner)
        runs = ", ".join(f"{k} {v}" for k, v in ref.items()) if ref else "its own algorithms"
        return (
            f"paired with {other} ({what}): not like-for-like, {owner} runs {runs}, "
            "which this run does not have"
        )

    def pairs(self, baseline: Mapping[str, str], axes: Iterable[str]) -> list[Pair]:
        """Every ``(axis, candidate, partner)`` for ``axes`` (in that order), candidates in
        name order."""
        out = []
        for axis in axes:
            for name in sorted(self.names):
                p = self.partner(name, axis, baseline)
                if p is not None:
                    out.append(p)
        return out

    def attach(self, df: pd.DataFrame, column: str = "variant") -> pd.DataFrame:
        """A copy of ``df`` with this set's axis columns (string dtype, NA where a variant
        lacks the axis) inserted after ``column`` (a column of variant names); axis columns
        ``df`` already has are left as they are. Names unknown to the set get NA."""
        out = df.copy()
        at = list(out.columns).index(column) + 1 if column in out.columns else 0
        for axis in self.axes:
            if axis in out.columns:
                continue
            vals = [self.value(str(n), axis) for n in out[column]] if len(out) else []
            out.insert(at, axis, pd.Series(vals, index=out.index, dtype="string"))
            at += 1
        return out
