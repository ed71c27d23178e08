"""A scenario's ``[cost]`` table: the step-time model it names (``model``: linear, a preset,
``roofline:PRESET``, ``aic[:...]`` or a TOML file; default the simulator's) with the table's other
keys overriding its fields. An AIC model keeps its deployment (the roofline it falls back on) in a
nested dataclass: a key of that roofline is refused with a hint to set ``roofline:PRESET``."""

from __future__ import annotations

import dataclasses
from typing import Any

from radixbench.harness.config.tomlmap import ScenarioError, build_dataclass
from radixbench.sim.config import DEFAULT_COST_MODEL, SimConfig
from radixbench.sim.cost import load_cost_model

__all__ = ["with_cost"]


def with_cost(sim: SimConfig, table: dict[str, Any], file: str) -> SimConfig:
    """``sim`` with the cost model of a ``[cost]`` table: ``model`` names the base model (linear,
    a preset, or a TOML file; default the simulator's), the other keys override its fields."""
    model = table.pop("model", DEFAULT_COST_MODEL)
    if not isinstance(model, str):
        raise ScenarioError(file, "cost.model", "expected a model name or a TOML path")
    try:
        base = load_cost_model(model)
    except (ValueError, OSError) as e:
        raise ScenarioError(file, "cost.model", str(e).splitlines()[0]) from None
    fields = {f.name: _plain(getattr(base, f.name)) for f in dataclasses.fields(base) if f.init}
    nested = next((f.name for f in dataclasses.fields(base) if dataclasses.is_dataclass(
        getattr(base, f.name))), None)  # fmt: skip
    for key in table:  # an AIC model's deployment fields live in its roofline
        if key not in fields and nested and key in fields[nested]:
            why = f"a roofline field; {model} runs on AIC's measured kernels"
            raise ScenarioError(file, f"cost.{key}", f'{why}: set model = "roofline:{model}"')
    cost = build_dataclass(type(base), {**fields, **table}, "cost", file)
    try:
        return dataclasses.replace(sim, cost=cost)
    except ValueError as e:
        raise ScenarioError(file, "cost.model", str(e)) from None


def _plain(value: Any) -> Any:
    """A nested dataclass (an AIC model's roofline) as the table ``build_dataclass`` reads."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
    return value
