"""What ``--help`` says each option defaults to.

The scenario flags (:data:`~radixbench.harness.cli.scenario_args.OVERRIDES`) default to the
scenario's own value, so their help names that and the value of the scenario a command runs
when given none (read from its TOML, the simulator's and the arrivals' defaults filling the
gaps; no scenario is loaded, so ``--help`` stays fast). Every other option with a default says
it through :class:`~radixbench.harness.cli.util.DefaultsFormatter`.
"""

from __future__ import annotations

import argparse
import dataclasses
import tomllib
from typing import Any

__all__ = ["default_scenario_values", "note_scenario_defaults"]

#: Scenario values whose plain rendering would mislead: None means "all" for a request count.
_NONE = {"arrivals.max_requests": "all", "arrivals.window_s": "none", "sim.gpu_mem_gb": "none"}


def default_scenario_values(keys: list[str]) -> dict[str, str]:
    """``{scenario key: the default scenario's value as help shows it}`` for ``keys`` (dotted,
    as in ``OVERRIDES``; ``sim.`` = ``[cache]`` / ``[scheduler]``)."""
    from radixbench.harness.config.overrides import SIM_TABLES
    from radixbench.harness.config.scenario import (
        _DEFAULT_VARIANTS,
        DEFAULT_SCENARIO,
        resolve_scenario,
    )
    from radixbench.sim.config import DEFAULT_COST_MODEL, SimConfig
    from radixbench.workloads.arrivals import Arrivals

    doc = tomllib.loads(resolve_scenario(DEFAULT_SCENARIO).read_text(encoding="utf-8"))
    plain: dict[str, dict[str, Any]] = {
        "arrivals": {f.name: f.default for f in dataclasses.fields(Arrivals)},
        "sim": {f.name: f.default for f in dataclasses.fields(SimConfig)},
        "variants": dict(_DEFAULT_VARIANTS),
        "cost": {"model": DEFAULT_COST_MODEL},
    }
    plain["sim"]["seed"] = doc.get("seed", 0)
    plain["arrivals"].update(doc.get("arrivals", {}))
    plain["variants"].update(doc.get("variants", {}))
    plain["cost"].update(doc.get("cost", {}))
    for table in SIM_TABLES:
        plain["sim"].update(doc.get(table, {}))
    out = {}
    for key in keys:
        section, _, name = key.rpartition(".")
        value: Any = plain.get(section or "sim", {}).get(name, doc.get(name))
        if value is None or value is dataclasses.MISSING:
            out[key] = _NONE.get(key, "none")
        elif isinstance(value, list):
            out[key] = ",".join(map(str, value))
        else:
            out[key] = str(value)
    return out


def note_scenario_defaults(c: argparse.ArgumentParser, overrides: dict[str, str]) -> None:
    """End the help of each scenario flag of ``c`` (``overrides``: dest -> scenario key) that
    names no default with ``(default: the scenario's; <default scenario>: VALUE)``. The values
    are read (all at once) when ``--help`` is formatted: building the parser loads nothing."""
    import functools

    from radixbench.harness.cli.util import lazy_help

    actions = [a for a in c._actions if a.dest in overrides]

    @functools.cache
    def values() -> tuple[str, dict[str, str]]:
        from radixbench.harness.config.scenario import DEFAULT_SCENARIO

        return DEFAULT_SCENARIO, default_scenario_values([overrides[a.dest] for a in actions])

    def noted(text: object, key: str) -> str:
        def make() -> str:
            help_text = str(text or "")
            if "default" in help_text:  # says its own
                return help_text
            name, found = values()
            return f"{help_text} (default: the scenario's; {name}: {found[key].replace('%', '%%')})"

        return lazy_help(make)

    for a in actions:
        a.help = noted(a.help, overrides[a.dest])
