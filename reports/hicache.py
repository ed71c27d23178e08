"""HiCache in the report: the tier split of prefix hits, and what one HiCache setting does to
serving against another (``--hicache-write-policy write_through,write_back``).

Reads the per-request table's tier columns and the ``metrics`` row's tier measures
(``radixbench.sim.tier_metrics``; docs/CONTRACTS.md). The headline gains:

* per variant, the prefix hit rate split by tier — device / host (L2) / storage (L3), tokens
  over input tokens — the bytes each link moved and its mean utilisation, the host pool's mean
  occupancy and the mean time a request waited on I/O;
* for each pair of variants that differ only on the ``hicache`` axis (the baseline: the first
  policy listed, or ``--baseline hicache=POLICY``), TTFT p50 and p99 ratios (baseline /
  candidate: > 1 = the candidate is faster) and the output-throughput ratio (candidate /
  baseline: > 1 = more tokens per second), each with a 95 % percentile-bootstrap CI: TTFT paired
  by request, throughput over blocks of consecutive requests
  (:func:`radixbench.reports.study.block_throughput_ratio`), seeded. Under either clock: a
  HiCache setting changes what is cached and how long transfers take, both in simulated time
  (the coupled clock adds the cache's measured CPU time on top).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from radixbench.reports.axes import VariantSet
from radixbench.reports.bootstrap import bootstrap_ratio
from radixbench.reports.study import block_throughput_ratio
from radixbench.reports.verdicts import verdict

__all__ = ["AXIS", "hicache_lines", "tier_table"]

AXIS = "hicache"
_TIERS = ("device", "host", "storage")


def has_tiers(requests: pd.DataFrame) -> bool:
    return "host_hit_tokens" in requests.columns


def tier_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per variant: hit rate by tier, GB moved per link, link and host-pool utilisation, mean
    I/O times (the ``metrics`` row's tier columns, renamed for reading)."""
    cols = {
        "variant": "variant",
        "prefix_hit_rate": "hit rate",
        "device_hit_rate": "device",
        "host_hit_rate": "host (L2)",
        "storage_hit_rate": "storage (L3)",
        "d2h_bytes": "D2H GB",
        "h2d_bytes": "H2D GB",
        "l3_read_bytes": "L3 read GB",
        "l3_write_bytes": "L3 write GB",
        "host_link_util": "host link util",
        "mean_host_util": "host pool util",
        "mean_load_ms": "load ms",
        "mean_prefetch_ms": "prefetch ms",
        "mean_io_wait_ms": "I/O wait ms",
    }
    out = metrics[[c for c in cols if c in metrics.columns]].rename(columns=cols).copy()
    for c in out.columns:
        if c.endswith(" GB"):
            out[c] = out[c] / 1e9
    return out


def _pct(v: object) -> str:
    return f"{v:.0%}" if isinstance(v, float) and np.isfinite(v) else "-"


def _x(v: float) -> str:
    return "n/a" if not np.isfinite(v) else f"{v:.3g}"


def _word(lo: float, hi: float) -> str:
    """``(better)`` / ``(worse)`` / ``(no significant difference)``: the verdicts' one rule
    (:func:`radixbench.reports.verdicts.verdict`)."""
    return f"({verdict(lo, hi, words=('better', 'worse'))})"


def hicache_lines(
    requests: pd.DataFrame,
    metrics: pd.DataFrame | None,
    variants: VariantSet,
    baseline: Mapping[str, str],
    seed: int = 0,
    n_resamples: int = 1000,
) -> tuple[list[str], list[str]]:
    """``(headline lines, serving lines)`` of HiCache (module docstring); empty without it."""
    if not has_tiers(requests) or metrics is None or metrics.empty:
        return [], []
    head: list[str] = []
    for _, m in metrics.iterrows():
        if "device_hit_rate" not in m:
            continue
        split = " / ".join(f"{m[f'{t}_hit_rate']:.1%}" for t in _TIERS)
        gb = (m.get("d2h_bytes", 0) + m.get("h2d_bytes", 0)) / 1e9
        l3 = (m.get("l3_read_bytes", 0) + m.get("l3_write_bytes", 0)) / 1e9
        head.append(
            f"hit rate by tier, {m['variant']}: {m['prefix_hit_rate']:.1%} = device / host / "
            f"storage {split}; host link {gb:,.1f} GB moved (util {m['host_link_util']:.1%}), "
            f"storage {l3:,.1f} GB; host pool {_pct(m.get('mean_host_util'))} full on average; "
            f"I/O wait {m['mean_io_wait_ms']:,.1f} ms per request."
        )
    serving: list[str] = []
    if AXIS not in variants.varied():
        return head, serving
    base_val = baseline.get(AXIS)
    done = requests[requests["status"] == "finished"]
    pairs = [p for name in variants.names if (p := variants.partner(name, AXIS, baseline))]
    for pair in pairs:
        name = pair.candidate
        b = done[done["variant"] == pair.baseline].sort_values("rid")
        c = done[done["variant"] == name].sort_values("rid")
        both = np.intersect1d(b["rid"], c["rid"])
        b, c = b[b["rid"].isin(both)], c[c["rid"].isin(both)]
        cl, bl = variants.value(name, AXIS), base_val
        parts = []
        for label, q in (("p50", 50), ("p99", 99)):

            def pct(x: np.ndarray, axis: int | None = None, q: int = q) -> np.ndarray:
                return np.percentile(x, q, axis=axis)

            r, lo, hi = bootstrap_ratio(
                b["ttft_s"].to_numpy(), c["ttft_s"].to_numpy(), paired=True, seed=seed,
                n_resamples=n_resamples, stat=pct,
            )  # fmt: skip
            parts.append(f"TTFT {label} {_x(r)}x [{_x(lo)}–{_x(hi)}] {_word(lo, hi)}")
        r, lo, hi = block_throughput_ratio(
            b["arrival_s"].to_numpy(), b["finish_s"].to_numpy(), c["finish_s"].to_numpy(),
            n_resamples=n_resamples, seed=seed,
        )  # fmt: skip
        parts.append(f"block output throughput {_x(r)}x [{_x(lo)}–{_x(hi)}] {_word(lo, hi)}")
        same = [p for p in pairs if variants.value(p.candidate, AXIS) == cl]
        which = f" ({name} vs {pair.baseline})" if len(same) > 1 else ""
        serving.append(
            f"HiCache {cl} vs {bl}{which}: " + ", ".join(parts) + f" (baseline/candidate for TTFT, "
            f"candidate/baseline for throughput: > 1 favours {cl}; {len(both):,} requests "
            "paired, 95 % bootstrap CIs; block throughput: tokens over each block of "
            "consecutive requests' first arrival to last finish, which the open-loop arrivals "
            "leave out of the whole run's output_throughput while every request finishes)."
        )
    return head, serving
