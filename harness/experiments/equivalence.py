"""Equivalence of variants: the algorithms must not change what the cache does.

In the isolated clock mode every variant sees the same schedule, so each request must see the
same number of prefix-hit tokens under every variant. A divergence is reported with the first
differing request (lowest rid), never hidden.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

#: Axes whose values legitimately change what the cache holds (HiCache's write policy): only
#: variants sharing their values must see identical prefix hits.
BEHAVIOURAL_AXES = ("hicache",)


def check_equivalence(requests: pd.DataFrame) -> dict[str, Any]:
    """Compare ``prefix_hit_tokens`` (and the request's status) per rid across variants that
    share the values of :data:`BEHAVIOURAL_AXES` (e.g. the ``write_through`` variants among
    themselves, the ``write_back`` ones among themselves).

    ``requests``: the per-request table of all variants (docs/CONTRACTS.md). Returns ``{"ok":
    bool, "n_requests": int, "variants": [...], "first_diff": None | {"rid": int, "values":
    {variant: prefix_hit_tokens or None when the variant lacks the request}}, "groups":
    [[variant, ...], ...]}``. Mutates nothing.
    """
    axes = [a for a in BEHAVIOURAL_AXES if a in requests.columns]
    if axes:
        groups = [
            list(dict.fromkeys(g["variant"]))
            for _, g in requests.groupby(axes, dropna=False, sort=False)
        ]
        results = [_check(requests[requests["variant"].isin(g)]) for g in groups]
        bad = next((r for r in results if not r["ok"]), None)
        return {
            "ok": bad is None,
            "n_requests": max(r["n_requests"] for r in results),
            "variants": list(dict.fromkeys(requests["variant"])),
            "first_diff": None if bad is None else bad["first_diff"],
            "groups": groups,
        }
    return _check(requests)


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
