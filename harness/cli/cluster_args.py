"""The cluster flags of the simulating commands (``compare``, ``profile``): ``--instances``,
``--routers``, ``--router-option ROUTER.KEY=VALUE``, ``--event-delay``, ``--event-loss``,
``--no-kv-events``, ``--couple-router-time``, ``--gateways G[,G...]``, ``--gateway-index``,
``--unhealthy I:START-END`` — each sets a key of the scenario's ``[cluster]`` table
(:class:`radixbench.cluster.spec.ClusterSpec`), each declared once with the other knobs
(:data:`radixbench.harness.cli.knobs.KNOBS`). ``--instances`` / ``--routers`` /
``--event-delay`` / ``--event-loss`` / ``--gateway-index`` are plain overrides; the others are
made here (:func:`cluster_overrides`), and :func:`cluster_origins` lets an error in their keys
name the flag.
"""

from __future__ import annotations

import argparse
from typing import Any

from radixbench.harness.cli.util import UsageError

__all__ = ["cluster_origins", "cluster_overrides"]


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
        ("cluster.unhealthy", "--unhealthy"),
    ):
        if key in made:
            out[key] = flag
    if getattr(args, "no_kv_events", False) and "cluster.routers" not in origins:
        out["cluster.routers"] = "--no-kv-events"
    return out
