"""HiCache's measures of one simulated run: per request, per run, per link (docs/CONTRACTS.md).

Per request (columns added to the ``requests`` table when HiCache is on; tokens of the first
admission, seconds of simulated time): ``device_hit_tokens`` (prefix found on the device),
``host_hit_tokens`` (loaded back from the host tier, L2 hits proper), ``storage_hit_tokens``
(loaded back after the request's own prefetch brought them from storage, L3 hits; ``host +
storage + device = prefix_hit_tokens``), ``load_s`` (its batch's load-back), ``prefetch_s``
(from its prefetch's submission to its admission), ``io_wait_s`` (time it waited on I/O: held
at admission by its prefetch, and its prefill stalled by the load beyond the compute).

Per run (columns added to the ``metrics`` row): ``{device,host,storage}_hit_rate`` (tokens /
input tokens), bytes moved per link and direction (``d2h_bytes``, ``h2d_bytes``,
``l3_read_bytes``, ``l3_write_bytes``), mean utilisation of each link over the run
(``host_link_util``: bytes over ``bandwidth x duration``, both directions over the link's
capacity; ``l3_read_util`` / ``l3_write_util``: busy time of the storage threads over
duration), host pool occupancy (``mean_host_util``, time-weighted by step, ``max_host_util``),
and the means of the per-request I/O times (ms).

``transfers`` (one row per transfer: ``link``, ``kind``, ``tokens``, ``bytes``, ``submit_s``,
``start_s``, ``end_s``) and ``tiers`` (one row per step: host pool occupancy, loads, stalls)
are the run's raw records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from radixbench.sim.request import Req

__all__ = ["REQUEST_TIER_COLUMNS", "request_columns", "run_metrics"]

#: Per-request HiCache columns and dtypes.
REQUEST_TIER_COLUMNS = {
    "device_hit_tokens": "int64",
    "host_hit_tokens": "int64",
    "storage_hit_tokens": "int64",
    "load_s": "float64",
    "prefetch_s": "float64",
    "io_wait_s": "float64",
}


def request_columns(reqs: Sequence[Req]) -> dict[str, list[Any]]:
    """The per-request HiCache columns (module docstring), in ``reqs`` order."""
    out: dict[str, list[Any]] = {c: [] for c in REQUEST_TIER_COLUMNS}
    for r in reqs:
        st = r.tier
        if st is None:
            dev = max(r.prefix_hit_tokens, 0)
            vals: tuple[Any, ...] = (dev, 0, 0, 0.0, 0.0, 0.0)
        else:
            stor = st.storage_hit
            vals = (st.device_hit, st.host_hit - stor, stor, st.load_s, st.prefetch_s, st.io_wait_s)
        for c, v in zip(REQUEST_TIER_COLUMNS, vals, strict=True):
            out[c].append(v)
    return out


def run_metrics(
    requests: pd.DataFrame,
    transfers: pd.DataFrame,
    tiers: pd.DataFrame,
    host_bytes_s: float,
    duplex: bool,
) -> dict[str, Any]:
    """The per-run HiCache measures (module docstring) from the run's ``requests`` (with the
    tier columns), ``transfers`` and ``tiers`` tables. Pure."""
    done = requests[requests["status"] == "finished"]
    n_in = float(done["input_len"].sum()) or float("nan")
    out: dict[str, Any] = {
        f"{t}_hit_rate": float(done[f"{t}_hit_tokens"].sum()) / n_in
        for t in ("device", "host", "storage")
    }
    span = float(done["finish_s"].max() - done["arrival_s"].min()) if len(done) else 0.0
    span = span if span > 0 else float("nan")
    for kind in ("d2h", "h2d", "l3_read", "l3_write"):
        out[f"{kind}_bytes"] = int(transfers.loc[transfers["kind"] == kind, "bytes"].sum())
    capacity = host_bytes_s * (2 if duplex else 1)
    out["host_link_util"] = (out["d2h_bytes"] + out["h2d_bytes"]) / (capacity * span)
    for kind in ("l3_read", "l3_write"):
        rows = transfers[transfers["kind"] == kind]
        out[f"{kind}_util"] = float((rows["end_s"] - rows["start_s"]).sum()) / span
    if len(tiers):
        util = tiers["host_used_tokens"].to_numpy() / tiers["host_capacity_tokens"].to_numpy()
        t = tiers["sim_time_s"].to_numpy()
        w = np.diff(np.append(t, t[-1])) if len(t) > 1 else np.ones(1)
        out["mean_host_util"] = (
            float(np.average(util, weights=w)) if w.sum() > 0 else float(util.mean())
        )
        out["max_host_util"] = float(util.max())
    for col in ("load_s", "prefetch_s", "io_wait_s"):
        out[f"mean_{col[:-2]}_ms"] = float(done[col].mean() * 1e3) if len(done) else float("nan")
    return out
