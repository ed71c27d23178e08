"""A scenario's ``[cluster]`` table: keys are the fields of
:class:`radixbench.cluster.spec.ClusterSpec` (types checked as every scenario table's,
:func:`~radixbench.harness.config.tomlmap.coerce`), ``router_options`` a table of tables
(router -> option -> value)."""

from __future__ import annotations

import dataclasses
from typing import Any

from radixbench.harness.config.tomlmap import ScenarioError, coerce

__all__ = ["parse_cluster"]


def parse_cluster(table: dict[str, Any], file: str) -> Any:
    """The ``[cluster]`` table as a ``ClusterSpec`` (``ScenarioError`` naming
    ``cluster.<key>``)."""
    import typing

    from radixbench.cluster.spec import ClusterError, ClusterSpec

    hints = typing.get_type_hints(ClusterSpec)
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        if key not in hints:
            known = ", ".join(f.name for f in dataclasses.fields(ClusterSpec))
            raise ScenarioError(file, f"cluster.{key}", f"unknown key; known: {known}")
        if key == "router_options":
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise ScenarioError(file, "cluster.router_options", "must be a table of tables")
            kwargs[key] = value
        else:
            kwargs[key] = coerce(value, hints[key], f"cluster.{key}", file)
    try:
        return ClusterSpec(**kwargs)
    except ClusterError as e:
        key, _, reason = str(e).partition(": ")
        raise ScenarioError(file, f"cluster.{key}", reason) from None
