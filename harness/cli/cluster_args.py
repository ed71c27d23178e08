"""The cluster flags of the simulating commands (``compare``, ``profile``): ``--instances``,
``--routers``, ``--router-option ROUTER.KEY=VALUE``, ``--event-delay``, ``--event-loss``,
``--no-kv-events``, ``--couple-router-time`` — each sets a key of the scenario's ``[cluster]``
table (:class:`radixbench.cluster.spec.ClusterSpec`). ``--instances`` / ``--routers`` /
``--event-delay`` / ``--event-loss`` are plain overrides (``scenario_args.OVERRIDES``); the
others are made here (:func:`cluster_overrides`), and :func:`cluster_origins` lets an error in
their keys name the flag.
"""

from __future__ import annotations

import argparse
from typing import Any

from radixbench.harness.cli.util import UsageError, csv_list, lazy_help, positive_int

__all__ = ["add_cluster_arguments", "cluster_origins", "cluster_overrides"]


def add_cluster_arguments(c: argparse.ArgumentParser) -> None:
    """The cluster flags (``[cluster]`` keys, :class:`radixbench.cluster.spec.ClusterSpec`).
    The routers' names are read when ``--help`` is formatted (nothing heavy is imported)."""

    def routers() -> str:
        from radixbench.cluster.routers import ROUTERS

        return f"routing policies, one variant each: {', '.join(ROUTERS)}"

    g = c.add_argument_group("cluster (N instances behind a router; the router is a variant axis)")
    g.add_argument(
        "--instances", type=positive_int, metavar="N", help="instances behind the router"
    )
    g.add_argument(
        "--routers",
        type=csv_list,
        metavar="NAME[,NAME...]",
        help=lazy_help(routers),
    )
    g.add_argument(
        "--router-option",
        action="append",
        default=[],
        metavar="ROUTER.KEY=VALUE",
        help="a router's option, e.g. cache-aware.cache_threshold=0.5 (repeatable)",
    )
    g.add_argument(
        "--event-delay",
        type=float,
        metavar="SECONDS",
        help="simulated delay of KV events from an instance to the router (default 0)",
    )
    g.add_argument(
        "--event-loss",
        type=float,
        metavar="P",
        help="probability that a KV-event batch is lost on its way to the router (default 0)",
    )
    g.add_argument(
        "--no-kv-events",
        action="store_true",
        help="instances emit no KV events (routers fed by them cannot run)",
    )
    g.add_argument(
        "--couple-router-time",
        action="store_true",
        help="the router's measured decision time delays each request (enters TTFT)",
    )


def cluster_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--router-option``, ``--no-kv-events``, ``--couple-router-time`` as ``cluster.*``
    overrides; :class:`UsageError` for a ``--router-option`` that is not ROUTER.KEY=VALUE."""
    from radixbench.harness.config.overrides import parse_override

    out: dict[str, Any] = {}
    for text in getattr(args, "router_option", None) or []:
        head, sep, _ = text.partition("=")
        router, dot, key = head.strip().partition(".")
        if not sep or not dot or not router or not key or "." in key:
            raise UsageError(f"--router-option: expected ROUTER.KEY=VALUE, got {text!r}")
        try:
            value = parse_override(text, "--router-option")[1]
        except ValueError as e:
            raise UsageError(str(e)) from None
        out[f"cluster.router_options.{router}.{key}"] = value
    if getattr(args, "no_kv_events", False):
        out["cluster.kv_events"] = False
    if getattr(args, "couple_router_time", False):
        out["cluster.couple_router_time"] = True
    return out


def cluster_origins(args: argparse.Namespace, origins: dict[str, str]) -> dict[str, str]:
    """Override key -> the flag that set it, for the keys :func:`cluster_overrides` makes
    (``--no-kv-events`` answers for ``cluster.routers`` unless ``--routers`` set them)."""
    out = {k: "--router-option" for k in cluster_overrides(args) if ".router_options." in k}
    if getattr(args, "no_kv_events", False) and "cluster.routers" not in origins:
        out["cluster.routers"] = "--no-kv-events"
    return out
