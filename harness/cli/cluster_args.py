"""The cluster flags of the simulating commands (``compare``, ``profile``): ``--instances``,
``--routers``, ``--router-option ROUTER.KEY=VALUE``, ``--event-delay``, ``--event-loss``,
``--no-kv-events``, ``--couple-router-time``, ``--gateways G[,G...]``, ``--gateway-index``,
``--unhealthy I:START-END`` — each sets a key of the scenario's ``[cluster]`` table
(:class:`radixbench.cluster.spec.ClusterSpec`). ``--instances`` / ``--routers`` /
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
    g.add_argument(
        "--gateways",
        metavar="G[,G...]",
        help="router replicas the requests spread over (seeded), one variant per count (default 1)",
    )
    g.add_argument(
        "--gateway-index",
        choices=("own", "shared"),
        help="each gateway keeps its own router state (own, default) or all share one index",
    )
    g.add_argument(
        "--unhealthy",
        action="append",
        default=[],
        metavar="I:START-END",
        help="fault injection: instance I is unhealthy from START to END s of simulated time "
        "(no gateway routes to it; repeatable)",
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
    text = getattr(args, "gateways", None)
    if text is not None:
        try:
            out["cluster.gateways"] = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--gateways: expected G[,G...] (ints >= 1), got {text!r}") from None
    if getattr(args, "gateway_index", None) is not None:
        out["cluster.gateway_index"] = args.gateway_index
    windows = [_window(t) for t in getattr(args, "unhealthy", None) or []]
    if windows:
        out["cluster.unhealthy"] = windows
    return out


def _window(text: str) -> list[float]:
    """``--unhealthy I:START-END`` as ``[I, START, END]`` (:class:`UsageError` if malformed)."""
    inst, colon, span = text.partition(":")
    start, dash, end = span.partition("-")
    try:
        if not colon or not dash:
            raise ValueError(text)
        return [int(inst), float(start), float(end)]
    except ValueError:
        raise UsageError(f"--unhealthy: expected INSTANCE:START-END (s), got {text!r}") from None


def cluster_origins(args: argparse.Namespace, origins: dict[str, str]) -> dict[str, str]:
    """Override key -> the flag that set it, for the keys :func:`cluster_overrides` makes
    (``--no-kv-events`` answers for ``cluster.routers`` unless ``--routers`` set them)."""
    made = cluster_overrides(args)
    out = {k: "--router-option" for k in made if ".router_options." in k}
    for key, flag in (
        ("cluster.gateways", "--gateways"),
        ("cluster.gateway_index", "--gateway-index"),
        ("cluster.unhealthy", "--unhealthy"),
    ):
        if key in made:
            out[key] = flag
    if getattr(args, "no_kv_events", False) and "cluster.routers" not in origins:
        out["cluster.routers"] = "--no-kv-events"
    return out
