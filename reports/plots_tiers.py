"""HiCache plots of one run: prefix hits by tier over time, link traffic and host occupancy.

Inputs are the run tables with HiCache on (docs/CONTRACTS.md): the per-request table's tier
columns (``device_hit_tokens``, ``host_hit_tokens``, ``storage_hit_tokens``; tokens), the
``transfers`` table (one row per transfer: ``link``, ``kind``, ``bytes``, ``start_s``,
``end_s``) and the ``tiers`` table (per step: ``host_used_tokens``, ``host_capacity_tokens``).
Times are simulated seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from radixbench.reports.plotaxes import fixed_layout
from radixbench.reports.plots import no_data, save_figure

__all__ = ["plot_links_over_time", "plot_tier_hits_over_time"]

_BINS = 40
_TIERS = (("device_hit_tokens", "device"), ("host_hit_tokens", "host (L2)"),
          ("storage_hit_tokens", "storage (L3)"))  # fmt: skip
_KINDS = (("d2h", "device->host"), ("h2d", "host->device"), ("l3_read", "storage read"),
          ("l3_write", "storage write"))  # fmt: skip


def plot_tier_hits_over_time(
    requests: pd.DataFrame, path: Path | str, *, svg: bool = False
) -> Path:
    """Per variant (one panel each), the prefix hit rate of the requests arriving in each of
    40 time bins, stacked by the tier the hit tokens came from (fraction of the bin's input
    tokens)."""
    done = requests[requests["status"] == "finished"]
    variants = list(dict.fromkeys(done["variant"])) if len(done) else []
    n = max(1, len(variants))
    fig = Figure(figsize=(8.0, 2.6 * n + 0.6))
    axes = np.atleast_1d(fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0])
    fixed_layout(fig, n, 1)
    if not variants:
        no_data(axes[0], "prefix hits by tier")
        return save_figure(fig, path, svg=svg)
    edges = np.linspace(
        float(done["arrival_s"].min()), float(done["arrival_s"].max()) + 1e-9, _BINS + 1
    )
    mids = (edges[:-1] + edges[1:]) / 2
    for ax, variant in zip(axes, variants, strict=True):
        g = done[done["variant"] == variant]
        idx = np.clip(np.digitize(g["arrival_s"].to_numpy(), edges) - 1, 0, _BINS - 1)
        inp = np.bincount(idx, g["input_len"].to_numpy(np.float64), _BINS)
        rates = [
            np.divide(np.bincount(idx, g[col].to_numpy(np.float64), _BINS), inp,
                      out=np.zeros(_BINS), where=inp > 0)
            for col, _ in _TIERS
        ]  # fmt: skip
        ax.stackplot(mids, *rates, labels=[label for _, label in _TIERS], alpha=0.8)
        ax.set_ylim(0.0, 1.0)
        ax.set_ylabel("hit rate")
        ax.set_title(str(variant), fontsize="small")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="x-small", loc="upper left")
    axes[-1].set_xlabel("arrival time (s, simulated)")
    fig.suptitle("Prefix hits by tier over time (fraction of input tokens, per time bin)")
    return save_figure(fig, path, svg=svg)


def _rate(rows: pd.DataFrame, edges: np.ndarray) -> np.ndarray:
    """Bytes per second moved in each bin, each transfer's bytes spread evenly over its span."""
    out = np.zeros(len(edges) - 1)
    for start, end, nbytes in rows[["start_s", "end_s", "bytes"]].itertuples(index=False):
        span = max(end - start, 1e-12)
        lo = np.clip(edges[:-1], start, end)
        hi = np.clip(edges[1:], start, end)
        out += (hi - lo) / span * nbytes
    return out / np.diff(edges)


def plot_links_over_time(
    transfers: pd.DataFrame, tiers: pd.DataFrame, path: Path | str, *, svg: bool = False
) -> Path:
    """Left: GB/s moved per link and direction over simulated time (40 bins; one line per
    variant and kind). Right: host pool occupancy (used / capacity) over time per variant."""
    fig = Figure(figsize=(12.0, 4.2))
    ax_l, ax_h = fig.subplots(1, 2)
    fixed_layout(fig, 1, 2)
    if tiers.empty:
        no_data(ax_l, "links")
        no_data(ax_h, "host pool")
        return save_figure(fig, path, svg=svg)
    t_max = float(max(tiers["sim_time_s"].max(), transfers["end_s"].max() if len(transfers) else 0))
    edges = np.linspace(0.0, t_max + 1e-9, _BINS + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    for variant in dict.fromkeys(tiers["variant"]):
        rows = transfers[transfers["variant"] == variant]
        for kind, label in _KINDS:
            sel = rows[rows["kind"] == kind]
            if len(sel):
                ax_l.plot(mids, _rate(sel, edges) / 1e9, label=f"{variant}: {label}")
        t = tiers[tiers["variant"] == variant]
        util = t["host_used_tokens"] / t["host_capacity_tokens"]
        ax_h.plot(t["sim_time_s"], util, label=str(variant))
    ax_l.set_title("Traffic per link (GB/s, simulated)")
    ax_l.set_xlabel("simulated time (s)")
    ax_l.set_ylabel("GB/s")
    ax_l.grid(True, alpha=0.3)
    ax_l.legend(fontsize="xx-small")
    ax_h.set_title("Host pool occupancy")
    ax_h.set_xlabel("simulated time (s)")
    ax_h.set_ylabel("used / capacity")
    ax_h.set_ylim(0.0, 1.02)
    ax_h.grid(True, alpha=0.3)
    ax_h.legend(fontsize="x-small")
    return save_figure(fig, path, svg=svg)
