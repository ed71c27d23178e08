"""Sweep grids: a TOML file -> the validated cells of a cartesian product.

A grid file names a base comparison, the parameters to vary, the variants and the seeds::

    description = "evict p99 vs KV capacity"
    [base]                              # CompareSpec fields; [base.sim] SimConfig fields
    max_requests = 300
    [base.sim]
    max_running = 32
    [grid]                              # each key: a list of values; dotted keys reach [sim]
    "sim.kv_capacity_tokens" = [100000, 200000, 400000]
    time_scale = [1.0, 2.0]
    [variants]                          # evictor x matcher x flatten x seed
    evictors = ["heapify", "persistent-heap"]
    matchers = ["galloping"]
    seeds = [0, 1]                      # also accepted at the top level

Each cell is one (parameter values, variant, seed) and is keyed by a content hash of its
canonical JSON, so a re-run recognises cells it already finished.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import tomllib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radixbench.sim.config import SimConfig, Variant

#: CompareSpec fields a grid may set (paths and output are the sweep's business).
BASE_KEYS: dict[str, Any] = {
    "trace": str,
    "max_requests": int,
    "window_s": float,
    "start_s": float,
    "time_scale": float,
}
_SIM_TYPES = typing.get_type_hints(SimConfig)
_TOP_KEYS = {"description", "base", "grid", "variants", "seeds"}
_VARIANT_KEYS = {"evictors", "matchers", "flatten", "seeds"}


class GridError(ValueError):
    """A grid file is malformed; the message is one line naming the file and the key."""


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: ``params`` (dotted key -> value) applied to ``base``, one variant,
    one seed. ``key`` is the first 16 hex digits of the sha256 of its canonical JSON."""

    base: dict[str, Any]
    params: dict[str, Any]
    variant: Variant
    seed: int

    def canonical(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "params": self.params,
            "variant": dataclasses.asdict(self.variant),
            "seed": self.seed,
        }

    @property
    def key(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Grid:
    """A parsed grid: its file, description, parameter names and the expanded cells."""

    path: Path
    description: str
    params: tuple[str, ...]
    cells: tuple[Cell, ...]


def _check_type(value: Any, expected: Any, where: str) -> Any:
    """Return ``value`` if it fits ``expected`` (int accepted for float), else raise."""
    if expected is Any:
        return value
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(expected) if a is not type(None)]
        return _check_type(value, options[0], where)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(expected, type) and (
        not isinstance(value, expected) or (expected is int and isinstance(value, bool))
    ):
        raise GridError(f"{where}: expected {expected.__name__}, got {type(value).__name__}")
    return value


def _field_type(dotted: str, where: str) -> Any:
    if dotted.startswith("sim."):
        name = dotted[4:]
        if name not in _SIM_TYPES or name == "cost":
            raise GridError(f"{where}: unknown key {dotted!r}")
        return _SIM_TYPES[name]
    if dotted not in BASE_KEYS:
        raise GridError(f"{where}: unknown key {dotted!r}")
    return BASE_KEYS[dotted]


def _flatten_base(base: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in base.items():
        if k == "sim":
            if not isinstance(v, dict):
                raise GridError(f"{where}.sim: expected a table")
            for sk, sv in v.items():
                out[f"sim.{sk}"] = _check_type(
                    sv, _field_type(f"sim.{sk}", f"{where}.sim"), f"{where}.sim.{sk}"
                )
        else:
            out[k] = _check_type(v, _field_type(k, where), f"{where}.{k}")
    return out


def load_grid(path: Path) -> Grid:
    """Parse and validate ``path``; raises ``GridError`` (one line: file and key path).

    Every cell's configuration is validated by constructing its ``SimConfig`` and ``Variant``,
    so an impossible value fails here, before any work is submitted.
    """
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise GridError(f"{where}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{where}: invalid TOML: {e}") from None
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise GridError(f"{where}: unknown key {unknown[0]!r}")
    base = _flatten_base(raw.get("base", {}), f"{where}: base")
    grid = raw.get("grid", {})
    if not isinstance(grid, dict) or not grid:
        raise GridError(f"{where}: grid: needs at least one parameter with a list of values")
    axes: dict[str, list[Any]] = {}
    for k, values in grid.items():
        if not isinstance(values, list) or not values:
            raise GridError(f"{where}: grid.{k}: expected a non-empty list")
        t = _field_type(k, f"{where}: grid")
        axes[k] = [_check_type(v, t, f"{where}: grid.{k}[{i}]") for i, v in enumerate(values)]
    vtab = raw.get("variants", {})
    bad = sorted(set(vtab) - set(_VARIANT_KEYS))
    if bad:
        raise GridError(f"{where}: variants: unknown key {bad[0]!r}")
    names = {}
    for k, default in (("evictors", ["heapify"]), ("matchers", ["linear"]), ("flatten", ["chain"])):
        v = vtab.get(k, default)
        if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
            raise GridError(f"{where}: variants.{k}: expected a non-empty list of names")
        names[k] = v
    if "seeds" in raw and "seeds" in vtab:
        raise GridError(f"{where}: seeds: given both at top level and in [variants]")
    seeds = vtab.get("seeds", raw.get("seeds", [0]))
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise GridError(f"{where}: seeds: expected a non-empty list of integers")
    try:
        variants = [
            Variant(e, m, f)
            for e in names["evictors"]
            for m in names["matchers"]
            for f in names["flatten"]
        ]
    except ValueError as e:
        raise GridError(f"{where}: variants: {e}") from None
    cells = []
    for combo in itertools.product(*axes.values()):
        params = dict(zip(axes, combo))
        for variant in variants:
            for seed in seeds:
                cell = Cell(base, params, variant, seed)
                try:
                    sim_config(cell)
                except (ValueError, TypeError) as e:
                    raise GridError(f"{where}: cell {params}: {e}") from None
                cells.append(cell)
    return Grid(path, str(raw.get("description", path.stem)), tuple(axes), tuple(cells))


def merged(cell: Cell) -> dict[str, Any]:
    """Base values overridden by the cell's parameters (dotted keys)."""
    return {**cell.base, **cell.params}


def sim_config(cell: Cell) -> SimConfig:
    """The cell's ``SimConfig`` (validated by its ``__post_init__``)."""
    sim = {k[4:]: v for k, v in merged(cell).items() if k.startswith("sim.")}
    return SimConfig(**{**sim, "seed": cell.seed})
