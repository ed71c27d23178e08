"""Medians of bootstrap resamples drawn exactly, without building the resamples.

:func:`resampled_medians` draws the medians of ``n_resamples`` ordinary (iid) resamples of a
sample; :func:`block_medians` those of block resamples, where whole blocks of values are drawn
with replacement (the same draw for two samples: paired by block); :func:`time_blocks` labels
two samples' calls by blocks of the time they ran at. Both give ``np.median`` of each resample
exactly (the mean of the two middle values for an even count) and are what
:func:`radixbench.reports.bootstrap.bootstrap_ratio` resamples a ratio of medians with: the iid
one is O(n log n + n_resamples) instead of O(n x n_resamples), the block one
O(n log n + n_resamples x blocks x log n).

Why blocks: the variants of a run are interleaved in rounds (``sim.run.run_interleaved``), and
a burst of load on the machine slows every call of one variant's slice of a round alike. Calls
resampled one by one ignore that correlation and give intervals too narrow under load: beside
``make test``, the demo's A/A noise floor read evict 1.031 [1.004-1.056] and match_prefix
0.9995 [0.9977-1.0015]; resampling 50 blocks of simulated time the same calls read
[0.984-1.087] and [0.994-1.004], both straddling 1 as identical code must.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_BLOCKS", "N_BLOCKS", "block_medians", "resampled_medians", "time_blocks"]

#: Blocks of simulated time a block bootstrap resamples (the demo runs ~140 interleaving
#: rounds: about 3 rounds a block).
N_BLOCKS = 50
#: Fewest blocks holding baseline calls for a block bootstrap (:func:`time_blocks`).
MIN_BLOCKS = 10


def resampled_medians(x: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The medians (``np.median``'s: the mean of the two middle values for even n) of
    ``n_resamples`` resamples of ``x`` (1-D, n >= 1 values, no NaN), each n values drawn with
    replacement, sampled exactly without drawing the resamples.

    Index draws ``floor(n U)`` are monotone in U and ``sort(x)`` is monotone in its index, so a
    resample's k-th smallest value is ``sort(x)[floor(n U_(k))]``: with m = ceil(n/2) the middle
    order statistic is ``U_(m) ~ Beta(m, n - m + 1)`` and, given it, the next one is
    ``U_(m) + (1 - U_(m)) Beta(1, n - m)`` (the least of the n - m uniforms above it). Returns a
    float64 array of shape ``(n_resamples,)``; draws 1 (odd n) or 2 (even n) arrays of
    ``n_resamples`` Beta variates from ``rng`` (its state is all it mutates).
    """
    s = np.sort(np.asarray(x, dtype=np.float64))
    n = s.size
    m = (n + 1) // 2
    u = rng.beta(m, n - m + 1, size=n_resamples)
    low = s[np.minimum((u * n).astype(np.int64), n - 1)]
    if n % 2:
        return low
    v = u + (1.0 - u) * rng.beta(1, n - m, size=n_resamples)
    return (low + s[np.minimum((v * n).astype(np.int64), n - 1)]) / 2.0


def time_blocks(
    t_baseline: np.ndarray, t_candidate: np.ndarray, n_blocks: int = N_BLOCKS
) -> tuple[np.ndarray, np.ndarray] | None:
    """Block labels (int64 in ``[0, n_blocks)``) of two samples' calls by the time they ran
    at (``t_*``: 1-D, any unit, e.g. ``sim_time_s``): the block edges are the baseline's time
    quantiles, so its calls fall in ``n_blocks`` blocks of about equal count (calls at one
    instant share a block) and the candidate's calls go to the block of their time. Under the
    isolated clock two variants run the same schedule: block k holds the same calls of both.
    ``None`` when the baseline's calls fill fewer than :data:`MIN_BLOCKS` blocks (its calls
    ran at a handful of instants: resampling so few blocks would understate the spread; the
    caller resamples calls one by one). Mutates nothing."""
    tb = np.asarray(t_baseline, np.float64)
    if not tb.size:
        return None
    edges = np.quantile(tb, np.linspace(0, 1, n_blocks + 1)[1:-1])
    lb = np.searchsorted(edges, tb, side="right").astype(np.int64)
    if np.unique(lb).size < MIN_BLOCKS:
        return None
    return lb, np.searchsorted(edges, t_candidate, side="right").astype(np.int64)


def block_medians(x: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``np.median`` of each block resample of ``x``: resample r holds every value of block
    k ``weights[r, k]`` times. ``x``: 1-D float values (no NaN); ``labels``: int block of
    each value, in ``[0, weights.shape[1])``; ``weights``: int array ``(n_resamples,
    n_blocks)``. Returns float64 ``(n_resamples,)``, NaN for a resample without values.

    For each resample a bisection over ``sort(x)`` finds the values at pooled positions
    ``(T-1)//2`` and ``T//2`` (T: the resample's size): the first sorted value whose weighted
    count of values at or below it, ``sum_k weights[r, k] * #(block k <= v)``, exceeds the
    position. Mutates nothing."""
    s = np.sort(np.asarray(x, np.float64))
    if not s.size:
        return np.full(weights.shape[0], np.nan)
    w = np.asarray(weights, np.int64)
    per_block = [np.sort(x[labels == k]) for k in range(w.shape[1])]
    total = w @ np.array([b.size for b in per_block], np.int64)

    def first_above(p: np.ndarray) -> np.ndarray:
        lo, hi = np.zeros(p.size, np.int64), np.full(p.size, s.size - 1, np.int64)
        while (live := lo < hi).any():
            mid = (lo + hi) // 2
            v = s[mid]
            counts = np.stack([np.searchsorted(b, v, side="right") for b in per_block], axis=1)
            above = (w * counts).sum(axis=1) > p
            hi = np.where(live & above, mid, hi)
            lo = np.where(live & ~above, mid + 1, lo)
        return lo

    med = (s[first_above((total - 1) // 2)] + s[first_above(total // 2)]) / 2.0
    med[total == 0] = np.nan
    return med
