"""A scenario's ``[cluster]`` table: keys are the fields of
:class:`radixbench.cluster.spec.ClusterSpec` (types checked as every scenario table's,
:func:`~radixbench.harness.config.tomlmap.coerce`), ``router_options`` a table of tables
(router -> option -> value); and the rules that span it and other tables
(:func:`check_cluster`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from radixbench.harness.config.tomlmap import ScenarioError, coerce

if TYPE_CHECKING:
    from radixbench.harness.config.scenario import Scenario

__all__ = ["check_cluster", "parse_cluster"]


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


def check_cluster(scenario: Scenario, blame: dict[str, str] | None = None) -> None:
    """The cluster rules that span tables: routers given by an override (``--routers``) need
    2 or more instances (one instance routes nothing: every router's row would be the same);
    HiCache and KV events never run together (HiCache's transfers and the events would be
    drained from the same ``take_actions``; HiCache emits no events yet), and a cluster's
    instances emit events unless ``cluster.kv_events = false`` (``--no-kv-events``), whether
    or not its routers read them. ``blame``: resolved key -> the flag that set it. Raises
    :class:`ScenarioError` naming the flags (or the file's tables) at fault."""
    blame = blame or {}
    cluster, file = scenario.cluster, scenario.file
    if cluster is None:
        return
    if "cluster.routers" in blame and cluster.instances < 2:
        raise ScenarioError(
            blame["cluster.routers"], None,
            f"routing needs 2 or more instances (--instances N); this run has "
            f"{cluster.instances}, so every router would route to it alike",
        )  # fmt: skip
    if cluster.kv_events and scenario.sim.hicache is not None:
        hicache = next(
            (f for k, f in blame.items() if k.startswith(("cache.hicache", "variants.hicache"))),
            f"{file}: [cache.hicache]",
        )
        where = next(
            (blame[k] for k in ("cluster.instances", "cluster.routers") if k in blame),
            f"{file}: [cluster]",
        )
        raise ScenarioError(
            f"{hicache} with {where}", None,
            "HiCache emits no KV events yet, and a cluster's instances do (cluster.kv_events); "
            "add --no-kv-events (routers that do not read events only) or leave out one of them",
        )  # fmt: skip
