"""When variants do not behave alike: how their prefix hits differ, request by request.

In the isolated clock every variant runs the same schedule, so the cache's behaviour must not
depend on the algorithm under test; a divergence (``harness.experiments.equivalence``) means
one variant cached differently — a bug, or a policy change a patch makes on purpose. For every
compared pair (``VariantSet.pairs``) whose requests' ``prefix_hit_tokens`` differ,
:func:`behaviour_diff` gives the first differing request, the prefix hit rate of each side
(hit tokens / input tokens over the requests finished in both), the difference with a paired
bootstrap interval, and the TTFT median ratio with its interval (paired by ``rid``: a
different hit changes the prefill, and so the TTFT, even under the isolated clock).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from radixbench.reports.axes import VariantSet
from radixbench.reports.bootstrap import bootstrap_paired, bootstrap_ratio

__all__ = ["BehaviourDiff", "behaviour_diff", "behaviour_lines"]


@dataclass(frozen=True)
class BehaviourDiff:
    """One pair whose hits differ. Hit rates are fractions; ``hit_delta`` = candidate minus
    baseline with its 95 % interval; ``ttft_ratio`` = baseline / candidate TTFT median (> 1:
    the candidate's requests start sooner) with its interval; ``differing``: requests whose
    hits differ, of ``requests`` finished in both; ``first_rid``: the lowest of them."""

    axis: str
    candidate: str
    baseline: str
    requests: int
    differing: int
    first_rid: int
    hit_rate_baseline: float
    hit_rate_candidate: float
    hit_delta: tuple[float, float, float]
    ttft_ratio: tuple[float, float, float]


def _hit_delta(b: np.ndarray, c: np.ndarray, n: np.ndarray, axis: int = -1) -> np.ndarray:
    total = n.sum(axis=axis)
    return (c.sum(axis=axis) - b.sum(axis=axis)) / np.where(total > 0, total, np.nan)


def behaviour_diff(
    requests: pd.DataFrame,
    variants: VariantSet,
    baseline: Mapping[str, str],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> list[BehaviourDiff]:
    """A :class:`BehaviourDiff` per compared pair (every axis, the A/A replica included)
    whose finished requests' prefix hits differ; ``[]`` when all agree. Mutates nothing."""
    done = requests[requests["status"] == "finished"]
    axes = [a for a in variants.axes if a != "replica"] + ["replica"]
    out = []
    for axis, cand, base, _ in variants.pairs(baseline, axes):
        both = done[done["variant"] == base].merge(
            done[done["variant"] == cand], on="rid", suffixes=("_b", "_c")
        )
        hb = both["prefix_hit_tokens_b"].to_numpy(np.float64)
        hc = both["prefix_hit_tokens_c"].to_numpy(np.float64)
        differ = hb != hc
        if not differ.any():
            continue
        inputs = both["input_len_b"].to_numpy(np.float64)
        delta = bootstrap_paired((hb, hc, inputs), _hit_delta, n_resamples=n_resamples, seed=seed)
        ttft = bootstrap_ratio(
            both["ttft_s_b"].to_numpy(np.float64),
            both["ttft_s_c"].to_numpy(np.float64),
            n_resamples=n_resamples,
            seed=seed,
            paired=True,
        )
        total = inputs.sum()
        out.append(
            BehaviourDiff(
                axis,
                cand,
                base,
                len(both),
                int(differ.sum()),
                int(both.loc[differ, "rid"].min()),
                float(hb.sum() / total) if total else float("nan"),
                float(hc.sum() / total) if total else float("nan"),
                delta,
                ttft,
            )
        )
    return out


def _pp(x: float) -> str:
    return f"{100 * x:+.2f} pp"


def behaviour_lines(diffs: list[BehaviourDiff], expected: bool) -> list[str]:
    """One line per :class:`BehaviourDiff`: the behaviour change (``expected``: the user said
    so with ``--expect-divergence``) or the divergence to explain."""
    out = []
    for d in diffs:
        what = "Behaviour change (expected)" if expected else "DIVERGED"
        v, lo, hi = d.hit_delta
        r, rlo, rhi = d.ttft_ratio
        out.append(
            f"{what}: {d.candidate} vs {d.baseline} ({d.axis}): {d.differing:,} of "
            f"{d.requests:,} requests hit differently, the first rid {d.first_rid}; prefix hit "
            f"rate {d.hit_rate_baseline:.4f} -> {d.hit_rate_candidate:.4f} ({_pp(v)} "
            f"[{_pp(lo)}, {_pp(hi)}]); TTFT median ratio {r:.3g} [{rlo:.3g}–{rhi:.3g}] "
            "(> 1: the candidate's requests start sooner)."
        )
    return out
