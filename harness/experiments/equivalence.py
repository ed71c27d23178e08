"""Equivalence of variants: the algorithms must not change what the cache does.

In the isolated clock mode every variant sees the same schedule, so each request must see the
same number of prefix-hit tokens under every variant that runs the same *behaviour*: variants
that differ only in how the cache is implemented (evictor, matcher, flatten, implementation)
are checked against each other; variants whose settings change what the cache holds or which
instance a request reaches (:data:`BEHAVIOURAL_AXES`: HiCache's write policy, the router, the
instance count) are checked only within each such setting, never across. A divergence is
reported with the first differing request (lowest rid), never hidden. Where measured time
moves the schedule (the coupled clock, a router whose measured decision time delays arrivals)
variants may diverge: the result then carries why (``exempt``) and a divergence is no failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

#: Axes whose values legitimately change prefix hits: HiCache's write policy (what the cache
#: holds), the router and the instance count of a cluster run (which instance, hence which
#: cache, a request reaches). Only variants sharing their values must see identical hits.
BEHAVIOURAL_AXES = ("hicache", "router", "instances")


def exemption(clock: str | None, cluster: Any = None) -> str:
    """Why the variants of a run may diverge, "" when they may not: the coupled clock (measured
    CPU time moves simulated time), or a cluster whose router's measured decision time delays
    each arrival (``couple_router_time``). ``cluster``: a ``ClusterSpec``, its record (a dict,
    ``config.json``'s ``cluster``) or None."""
    if clock == "coupled":
        return "the clock is coupled: measured CPU time moves each variant's schedule"
    couple = (
        cluster.get("couple_router_time")
        if isinstance(cluster, Mapping)
        else getattr(cluster, "couple_router_time", False)
    )
    if couple:
        return "the router's measured decision time delays each arrival (--couple-router-time)"
    return ""


def check_equivalence(requests: pd.DataFrame, exempt: str = "") -> dict[str, Any]:
    """Compare ``prefix_hit_tokens`` (and the request's status) per rid across variants that
    share the values of :data:`BEHAVIOURAL_AXES` (e.g. within the ``cache-aware`` router its
    ``heapify`` and ``lru-list`` variants, never ``cache-aware`` against ``round-robin``).

    ``requests``: the per-request table of all variants (docs/CONTRACTS.md). Returns ``{"ok":
    bool, "n_requests": int, "variants": [...], "first_diff": None | {"rid": int, "values":
    {variant: prefix_hit_tokens or None when the variant lacks the request}}, "axes": [the
    behavioural axes whose values differ among the variants], "groups": [[variant, ...], ...]
    (the variants checked against each other; one group, every variant, when ``axes`` is
    empty; a group of one variant has nothing to be checked against), "exempt": ``exempt``
    (:func:`exemption`: why a divergence is allowed, "" when it is not)}``. Mutates nothing.
    """
    variants = list(dict.fromkeys(requests["variant"]))
    axes = [
        a
        for a in BEHAVIOURAL_AXES
        if a in requests.columns and requests[a].nunique(dropna=False) > 1
    ]
    if not axes:
        return {**_check(requests), "axes": [], "groups": [variants], "exempt": exempt}
    groups = [
        list(dict.fromkeys(g["variant"]))
        for _, g in requests.groupby(axes, dropna=False, sort=False)
    ]
    results = [_check(requests[requests["variant"].isin(g)]) for g in groups]
    bad = next((r for r in results if not r["ok"]), None)
    return {
        "ok": bad is None,
        "n_requests": max(r["n_requests"] for r in results),
        "variants": variants,
        "first_diff": None if bad is None else bad["first_diff"],
        "axes": axes,
        "groups": groups,
        "exempt": exempt,
    }


def _check(requests: pd.DataFrame) -> dict[str, Any]:
    variants = list(dict.fromkeys(requests["variant"]))
    hits = requests.pivot(index="rid", columns="variant", values="prefix_hit_tokens")
    status = requests.pivot(index="rid", columns="variant", values="status")
    hits, status = hits[variants], status[variants]
    base = variants[0]
    differs = (
        hits.ne(hits[base], axis=0).any(axis=1)
        | hits.isna().any(axis=1)
        | status.ne(status[base], axis=0).any(axis=1)
    )
    first_diff = None
    if bool(differs.any()):
        rid = int(differs[differs].index.min())
        row = hits.loc[rid]
        values = {v: (None if pd.isna(row[v]) else int(row[v])) for v in variants}
        first_diff = {"rid": rid, "values": values}
    return {
        "ok": first_diff is None,
        "n_requests": len(hits),
        "variants": variants,
        "first_diff": first_diff,
    }
