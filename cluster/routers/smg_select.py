"""Selection steps of SMG's ``cache_aware`` policy after smg#2096, #2117 and #2161.

Pure functions over candidates ``(instance, score, load)`` (``OverlapCandidate``), following
smg-project/smg ``model_gateway/src/policies/cache_aware.rs`` @f8daa88:

* :func:`overlap_decay` (smg#2117, 3d14518; ``apply_overlap_decay`` ``:1376-1402``): each score
  divided by ``1 + decay x (backlog - min backlog) / page / request blocks``, backlog = the
  instance's waiting-prefill tokens from the last load snapshot; instances without one are
  never decayed;
* :func:`argmax_random_ties` (smg#2096, 352f77e; ``:1412-1440``): the highest score, then the
  lowest load, then uniformly at random among exact ties;
* :func:`sample_by_temperature` (smg#2117; ``:1447-1473``): softmax over min-max normalised
  scores, ``exp(((s - min) / range - 1) / T)``, inverse-CDF draw (a uniform draw when all are
  equal);
* :func:`gated` (smg#2161, e190554; ``gate_selected_candidate`` ``:1172-1186``): the selected
  instance spills to the least loaded one when its load exceeds the eligible instances' mean by
  ``balance_rel_threshold`` times AND by ``balance_abs_threshold`` requests.

Random draws come from the policy's seeded ``numpy.random.Generator`` (SMG draws from an
unseeded thread RNG): same seed, same decisions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "Candidate",
    "argmax_random_ties",
    "f32",
    "gated",
    "overlap_decay",
    "sample_by_temperature",
]

#: ``[instance, effective score, load]`` (a list: the decay rewrites the score).
Candidate = list


def f32(x: float) -> float:
    """``x`` rounded to f32 and widened back (``f64::from(x_f32)``)."""
    return float(np.float32(x))


def overlap_decay(
    cands: Sequence[Candidate],
    backlog: Mapping[int, int] | None,
    request_blocks: int,
    page: int,
    decay: float,
) -> None:
    """Divide each candidate's score in place (module docstring); ``backlog``: instance ->
    waiting-prefill tokens (None: no snapshot, nothing decays)."""
    if backlog is None or decay <= 0:
        return
    known = [backlog[c[0]] for c in cands if c[0] in backlog]
    if not known:
        return
    floor = min(known)
    d = f32(decay)
    for c in cands:
        if c[0] in backlog:
            x = (backlog[c[0]] - floor) / page / request_blocks
            c[1] /= 1.0 + d * x


def argmax_random_ties(cands: Sequence[Candidate], rng: np.random.Generator) -> int | None:
    """Highest score, then lowest load, then a uniform draw among the exact ties."""
    best: tuple[float, int] | None = None
    tied: list[int] = []
    for i, score, load in cands:
        if best is None or score > best[0] or (score == best[0] and load < best[1]):
            best, tied = (score, load), [i]
        elif score == best[0] and load == best[1]:
            tied.append(i)
    if not tied:
        return None
    return tied[0] if len(tied) == 1 else tied[int(rng.integers(len(tied)))]


def sample_by_temperature(
    cands: Sequence[Candidate], temperature: float, rng: np.random.Generator
) -> int | None:
    """A softmax draw over min-max normalised scores at ``temperature`` (> 0)."""
    if not cands:
        return None
    scores = [c[1] for c in cands]
    lo, hi = min(scores), max(scores)
    if hi - lo <= 0:
        return int(cands[int(rng.integers(len(cands)))][0])
    t = f32(temperature)
    w = [math.exp(((s - lo) / (hi - lo) - 1.0) / t) for s in scores]
    draw = float(rng.random()) * sum(w)
    acc = 0.0
    for c, wi in zip(cands, w):
        acc += wi
        if acc >= draw:
            return int(c[0])
    return int(cands[-1][0])


def gated(
    selected: int,
    load: int,
    mean_load: float,
    abs_threshold: int,
    rel_threshold: float,
    least_loaded: int,
) -> int:
    """``selected``, or ``least_loaded`` when ``load`` clears both margins over the mean."""
    if load > mean_load * f32(rel_threshold) and load > mean_load + abs_threshold:
        return least_loaded
    return selected
