"""TOML tables onto frozen dataclasses by field introspection, with key-path errors.

Used by :mod:`radixbench.harness.config.scenario` so that any field added to a configuration
dataclass (``SimConfig``, the cost model, workload parameters) is a valid scenario key with no
other change.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import Any

__all__ = ["ScenarioError", "build_dataclass", "coerce"]


class ScenarioError(ValueError):
    """A scenario file is missing, not TOML, or invalid: ``"<file>: <key.path>: <reason>"``."""

    def __init__(self, file: str, key: str | None, reason: str) -> None:
        self.file, self.key = file, key
        self.reason = " ".join(str(reason).split())
        super().__init__(f"{file}: {key}: {self.reason}" if key else f"{file}: {self.reason}")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, key: str, file: str) -> Any:
    """Check ``value`` (from TOML) against annotation ``tp``; return it converted."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return coerce(value, a, key, file)
            except ScenarioError as e:
                errors.append(e.reason)
        raise ScenarioError(file, key, " or ".join(errors))
    if origin is typing.Literal:
        if value not in args:
            raise ScenarioError(file, key, f"must be one of {', '.join(map(repr, args))}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise ScenarioError(file, key, f"must be an array, got {type(value).__name__}")
        item = args[0] if args else Any
        seq = [coerce(v, item, f"{key}[{i}]", file) for i, v in enumerate(value)]
        return tuple(seq) if origin is tuple else seq
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise ScenarioError(file, key, f"must be a table, got {type(value).__name__}")
        return build_dataclass(tp, value, key, file)
    ok = True
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif tp is str:
        ok = isinstance(value, str)
    if not ok:
        raise ScenarioError(
            file, key, f"must be {_type_name(tp)}, got {type(value).__name__} {value!r}"
        )
    return value


def build_dataclass(
    cls: type, table: dict[str, Any], path: str, file: str, paths: dict[str, str] | None = None
) -> Any:
    """Build dataclass ``cls`` from a TOML table by field introspection.

    Keys are init-field names; values are checked against the
    annotations (resolved with ``typing.get_type_hints``), then ``cls(**table)`` runs its own
    validation. A ``ValueError`` from it is blamed on the one key that alone reproduces it,
    else on the table. Raises :class:`ScenarioError` naming ``path.key`` (or ``paths[key]``).
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    known = list(fields)

    def at(key: str) -> str:
        if paths and key in paths:
            return paths[key]
        return f"{path}.{key}" if path else key

    kwargs = {}
    for key, value in table.items():
        where = at(key)
        if key not in known:
            raise ScenarioError(file, where, f"unknown key; known: {', '.join(known)}")
        tp = hints[key]
        factory = fields[key].default_factory
        if (
            isinstance(value, dict)
            and not dataclasses.is_dataclass(tp)
            and factory is not dataclasses.MISSING
        ):
            tp = type(
                factory()
            )  # e.g. a cost model annotated by a protocol: use the default's class
        kwargs[key] = coerce(value, tp, where, file)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        for key, value in kwargs.items():
            try:
                cls(**{key: value})
            except (ValueError, TypeError) as single:
                if str(single) == str(exc):
                    raise ScenarioError(file, at(key), str(exc)) from None
        named = [(m.start(), k) for k in kwargs if (m := re.search(rf"\b{k}\b", str(exc)))]
        if named:  # cross-field check: blame the key the message names first
            raise ScenarioError(file, at(min(named)[1]), str(exc)) from None
        raise ScenarioError(file, path or ", ".join(map(at, kwargs)) or None, str(exc)) from None
