"""The two panels an eviction study adds when its rows set every curve against the best
evictor (:func:`radixbench.reports.study.point_rows` with ``best``): the op's p50 and p99 per
curve, and each curve's throughput change against the best with its 95 % CI band. Drawn by
:func:`radixbench.reports.study_render.plot_study` beside its ratio panels."""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes

__all__ = ["curves", "draw_best_panels"]


def curves(points: pd.DataFrame) -> pd.DataFrame:
    """One row per point and curve (the baseline once, then each candidate): ``point``, the
    point's quantity (``evictable_leaves`` / ``matched_tokens``), ``curve``, ``best``,
    ``p50_ns``, ``p99_ns``, ``share`` (the op's share of step time), ``overloaded`` and
    ``throughput`` / ``ttft_p50`` ``_vs_best_{ratio,lo,hi}``. Empty without ``best``."""
    if "best" not in points:
        return pd.DataFrame()
    out = []
    for _, d in points.groupby("point", sort=True):
        first = d.iloc[0]
        pairs = [("base", first, str(first["baseline"]))]
        pairs += [("cand", r, str(r["candidate"])) for _, r in d.iterrows()]
        for who, r, name in pairs:
            row = {
                "point": r["point"], "curve": name, "best": r["best"],
                "p50_ns": r[f"op_{who}_ns"], "p99_ns": r[f"op_p99_{who}_ns"],
                "share": r[f"op_share_{who}"], "overloaded": r.get("overloaded", ""),
                **{c: r[c] for c in ("evictable_leaves", "matched_tokens") if c in r},
            }  # fmt: skip
            for m in ("throughput", "ttft_p50"):
                for k in ("ratio", "lo", "hi"):
                    row[f"{m}_vs_best_{k}"] = r[f"{who}_{m}_vs_best_{k}"]
            out.append(row)
    return pd.DataFrame(out)


def draw_best_panels(lat: Axes, thr: Axes, points: pd.DataFrame, x: str, xlabel: str,
                     op: str, colors: dict[str, str]) -> None:  # fmt: skip
    """``lat``: ``op`` p50 (solid) and p99 (dashed) in µs per curve, log-log; ``thr``: each
    curve's throughput / the best's - 1 in %, with its 95 % CI band. ``colors``: candidate ->
    colour (the other panels'); the baseline is black."""
    df = curves(points).dropna(subset=[x]).sort_values(x, kind="stable")
    for name, d in df.groupby("curve", sort=False):
        col = colors.get(str(name), "k")
        lat.plot(d[x], d["p50_ns"] / 1e3, "o-", color=col, label=f"{name} p50")
        lat.plot(d[x], d["p99_ns"] / 1e3, "o--", color=col, alpha=0.6, label=f"{name} p99")
        if (d["curve"] == d["best"]).all():
            continue
        pct = 100 * (d["throughput_vs_best_ratio"] - 1)
        thr.plot(d[x], pct, "o-", color=col, label=name)
        thr.fill_between(d[x], 100 * (d["throughput_vs_best_lo"] - 1),
                         100 * (d["throughput_vs_best_hi"] - 1), color=col, alpha=0.2,
                         linewidth=0)  # fmt: skip
    best = ", ".join(dict.fromkeys(df["best"].astype(str)))
    lat.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=f"{op} per call (µs)")
    lat.set_title(f"{op} p50 (solid) and p99 (dashed) per curve", fontsize=10)
    thr.axhline(0.0, color="0.5", linewidth=0.8)
    thr.set(xscale="log", xlabel=xlabel, ylabel="throughput vs best (%)")
    thr.set_title(f"throughput change against the best evictor ({best}), 95 % CI", fontsize=10)
    for ax in (lat, thr):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="best")
