"""Sweep grids: a TOML file -> the validated cells of a cartesian product over a scenario.

A grid names a base scenario (bundled name or file), overrides of its keys, the keys to vary,
the variants and the seeds::

    description = "evict p99 vs KV capacity"
    scenario = "mooncake-conversation"     # bundled name, or a path relative to this file
    [base]                                 # scenario keys (dotted or as nested tables)
    arrivals.max_requests = 300
    scheduler.max_running = 32
    [grid]                                 # each key: a list of values; "sim.<field>" reaches
    "sim.kv_capacity_tokens" = [150000, 300000, 600000]   # whichever of [cache]/[scheduler]
    [variants]                             # evictor x matcher x flatten (x impl)
    evictors = ["heapify", "persistent-heap"]
    matchers = ["galloping"]
    impls = ["radixbench", "sglang"]       # optional; an SGLang impl: flatten only
    routers = ["round-robin", "precise"]   # optional, a cluster: every variant once per router
                                           # (default: the scenario's [cluster] routers)
    seeds = [0]                            # also accepted at the top level

A grid over a cluster varies ``cluster.instances`` (and the load, e.g. ``arrivals.rate_scale``)
in ``[grid]``: routers x instances x load, each cell one point with its routers interleaved.

A cell is one grid point (one combination of the ``[grid]`` values) and one seed, running every
variant interleaved in one process, so the variants of a point are timed alike and compared
with ratios and CIs. Every cell is validated by loading its scenario with its overrides, so an
unknown key, a wrong type or an impossible value fails before any work starts. A cell is keyed
by a content hash of its canonical JSON (including the scenario file's text and the variants),
so a re-run recognises cells it already finished and a changed scenario file invalidates them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radixbench.cache.impls import RADIXBENCH  # the default impl of a grid
from radixbench.harness.config.impl import ImplError, impl_variants, resolve_impls
from radixbench.harness.config.scenario import (
    DEFAULT_SCENARIO,
    Scenario,
    bundled_scenarios,
    load_scenario,
    resolve_scenario,
)
from radixbench.sim.config import Variant

_TOP_KEYS = {"description", "scenario", "base", "grid", "variants", "seeds"}
_VARIANT_KEYS = {"evictors", "matchers", "flatten", "impls", "routers", "seeds"}


class GridError(ValueError):
    """A grid file is malformed; the message is one line naming the file and the key."""


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: one grid point — ``scenario`` with ``base`` then ``params``
    overrides (dotted scenario keys) — with every variant of the grid, timed interleaved in one
    process (one ``compare`` with its A/A replica), and one seed. ``key``: first 16 hex digits
    of the sha256 of its canonical JSON, which includes ``scenario_sha`` (sha256 of the
    scenario file's text) and the variants' axis records. ``routers``: a cluster cell runs
    every variant once per router (none: the scenario's own, or one server)."""

    scenario: str
    scenario_sha: str
    base: dict[str, Any]
    params: dict[str, Any]
    variants: tuple[Variant, ...]
    seed: int
    routers: tuple[str, ...] = ()

    def canonical(self) -> dict[str, Any]:
        """The cell as JSON-able data (the variants as their spec, label and axes; the routers
        when the grid names them)."""
        out = {
            "scenario": self.scenario,
            "scenario_sha": self.scenario_sha,
            "base": self.base,
            "params": self.params,
            "variants": [{"spec": v.impl, "name": v.name, **v.axes()} for v in self.variants],
            "seed": self.seed,
        }
        if self.routers:
            out["routers"] = list(self.routers)
        return out

    @property
    def key(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def overrides(self) -> dict[str, Any]:
        """Scenario overrides of this cell: base, then params, then the routers and seed."""
        out = {**self.base, **self.params, "seed": self.seed}
        if self.routers:
            out["cluster.routers"] = list(self.routers)
        return out

    def load(self) -> Scenario:
        """The cell's scenario, validated (``ScenarioError`` on a bad key or value), running
        exactly the cell's variants (their impl labels as the grid assigned them; in a cluster
        each once per router, with the axes ``router`` and ``instances``)."""
        scenario = load_scenario(self.scenario, self.overrides())
        variants = self.variants
        if scenario.cluster is not None:
            from radixbench.cluster.spec import router_variants

            variants = router_variants(variants, scenario.cluster)
        return dataclasses.replace(scenario, variants=variants)


@dataclass(frozen=True)
class Grid:
    """A parsed grid: its file, description, varied keys and the expanded cells."""

    path: Path
    description: str
    params: tuple[str, ...]
    cells: tuple[Cell, ...]


def _dotted(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables -> dotted keys (``{"arrivals": {"rate": 2}}`` -> ``{"arrivals.rate": 2}``)."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_dotted(v, f"{key}."))
        else:
            out[key] = v
    return out


def _scenario_flatten(scenario: bytes) -> list[str]:
    """The scenario's own ``[variants] flatten`` list (a grid that does not compare flattens
    runs the one its scenario chose, e.g. the fast numpy flatten); ``["chain"]`` when the
    scenario names none or cannot be read (``load_scenario`` reports that error itself)."""
    try:
        v = tomllib.loads(scenario.decode("utf-8")).get("variants", {}).get("flatten")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return ["chain"]
    return v if isinstance(v, list) and v and all(isinstance(x, str) for x in v) else ["chain"]


def _names(vtab: dict[str, Any], key: str, default: list[str], where: str) -> list[str]:
    v = vtab.get(key, default)
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise GridError(f"{where}: variants.{key}: expected a non-empty list of names")
    return v


def load_grid(path: Path) -> Grid:
    """Parse and validate ``path``; raises ``GridError`` (one line: file and key path)."""
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
    ref = raw.get("scenario", DEFAULT_SCENARIO)
    if not isinstance(ref, str):
        raise GridError(f"{where}: scenario: expected a bundled name or a path")
    if ref not in bundled_scenarios() and not Path(ref).is_absolute():
        ref = str((path.parent / ref).resolve())
    try:
        scenario_bytes = resolve_scenario(ref).read_bytes()
    except (ValueError, OSError) as e:
        raise GridError(f"{where}: scenario: {str(e).splitlines()[0]}") from None
    scenario_sha = hashlib.sha256(scenario_bytes).hexdigest()
    flatten_default = _scenario_flatten(scenario_bytes)
    base = raw.get("base", {})
    if not isinstance(base, dict):
        raise GridError(f"{where}: base: expected a table of scenario keys")
    base = _dotted(base)
    grid = raw.get("grid", {})
    if not isinstance(grid, dict) or not grid:
        raise GridError(f"{where}: grid: needs at least one key with a list of values")
    axes = _dotted(grid)
    for k, values in axes.items():
        if not isinstance(values, list) or not values:
            raise GridError(f"{where}: grid.{k}: expected a non-empty list")
    vtab = raw.get("variants", {})
    if not isinstance(vtab, dict):
        raise GridError(f"{where}: variants: expected a table")
    bad = sorted(set(vtab) - _VARIANT_KEYS)
    if bad:
        raise GridError(f"{where}: variants: unknown key {bad[0]!r}")
    if "seeds" in raw and "seeds" in vtab:
        raise GridError(f"{where}: seeds: given both at top level and in [variants]")
    seeds = vtab.get("seeds", raw.get("seeds", [0]))
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise GridError(f"{where}: seeds: expected a non-empty list of integers")
    evictors = _names(vtab, "evictors", ["heapify"], where)
    matchers = _names(vtab, "matchers", ["linear"], where)
    flattens = _names(vtab, "flatten", flatten_default, where)
    specs = _names(vtab, "impls", [RADIXBENCH], where)
    try:
        impls = resolve_impls(specs)
    except ImplError as e:
        raise GridError(f"{where}: variants.impls: {e}") from None
    try:
        variants = impl_variants(impls, evictors, matchers, flattens)
    except ValueError as e:
        raise GridError(f"{where}: variants: {e}") from None
    routers = tuple(_names(vtab, "routers", [], where)) if "routers" in vtab else ()
    cells = []
    for combo in itertools.product(*axes.values()):
        params = dict(zip(axes, combo, strict=True))
        for seed in seeds:
            cell = Cell(ref, scenario_sha, base, params, tuple(variants), seed, routers)
            try:
                cell.load()
            except ValueError as e:
                raise GridError(f"{where}: cell {params}: {e}") from None
            cells.append(cell)
    return Grid(path, str(raw.get("description", path.stem)), tuple(axes), tuple(cells))
