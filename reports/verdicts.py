"""Baseline-vs-candidate verdicts with percentile-bootstrap confidence intervals.

For every candidate variant and every variant axis on which it differs from the baseline
(evictor, matcher, flatten, impl), the *baseline partner* is the variant that differs from it on
that axis only, holding the baseline value there (the axis columns of the tables,
:class:`radixbench.reports.axes.VariantSet`), so only one algorithm changes per comparison. On
the ``impl`` axis another implementation (SGLang's cache: its evictor and matcher are its own)
is paired with radixbench's variant running the same algorithms, like for like
(:meth:`~radixbench.reports.axes.VariantSet.partner`; the row's ``note`` says how). Each pair is
compared on

* the op that axis changes (per-op wall time ``ns`` in nanoseconds): ``evict`` for evictors,
  ``match_prefix`` for matchers, ``build_extend`` and ``build_decode`` for flatten variants,
  ``match_prefix``, ``insert`` and ``evict`` for implementations;
* for evictors, also ``evict excl. KV free``: each evict call's ns minus the ns of the KV
  allocator ``free`` inside it (the ``evict_kv_free`` row recorded after it), the evictor's own
  time;
* the request latencies TTFT and E2E (``ttft_s``, ``e2e_s`` in s; finished requests only), and
  TPOT (``tpot_s``) when the per-request table has it — only with ``request_metrics`` (the
  coupled clock: under the isolated clock every variant runs the same schedule, so they are
  identical by construction).

Baselines: :meth:`~radixbench.reports.axes.VariantSet.resolve_baseline` takes, per axis, the
named value when some variant has it, else the value of the first variant listed (``impl``:
radixbench, else sglang, else the first), so any set of variants gets verdicts.

Statistic: the **median** of the samples. Ratio = median(baseline) / median(candidate), so a
ratio > 1 means the candidate is faster. The 95 % interval is the percentile bootstrap:
``n_resamples`` resamples with replacement drawn with a seeded
:func:`numpy.random.default_rng` (deterministic), and the 2.5/97.5 percentiles of the resampled
ratios are reported. Op samples are resampled independently (calls do not pair up across
variants); request metrics are paired by ``rid`` (the same request under both variants,
finished in both) and resampled jointly. Verdict: ``faster`` when the whole interval lies
above 1, ``slower`` when it lies below 1, otherwise ``no significant difference``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from radixbench.reports.axes import VariantSet

__all__ = [
    "AXIS_OPS",
    "EVICT_OWN",
    "REQUEST_METRICS",
    "VERDICT_COLUMNS",
    "bootstrap_ratio",
    "verdict",
    "verdict_table",
]

#: Axis name -> ops whose ``ns`` that axis changes, in the order verdicts are made.
AXIS_OPS: Mapping[str, tuple[str, ...]] = {
    "evictor": ("evict", "evict_host"),
    "matcher": ("match_prefix",),
    "flatten": ("build_extend", "build_decode"),
    "impl": ("match_prefix", "insert", "evict"),
}

#: Per-request latency columns compared for every pair (those present in the table).
REQUEST_METRICS: tuple[str, ...] = ("ttft_s", "tpot_s", "e2e_s")

#: Columns of :func:`verdict_table`. ``*_median`` in ``unit``; ``ratio`` = baseline /
#: candidate median; ``ci_low``/``ci_high`` the bootstrap interval of the ratio; ``note``:
#: how an ``impl`` pair was matched (``VariantSet.partner``), else empty.
VERDICT_COLUMNS = [
    "axis", "metric", "unit", "candidate", "baseline", "n_candidate", "n_baseline",
    "baseline_median", "candidate_median", "ratio", "ci_low", "ci_high", "verdict", "note",
]  # fmt: skip

#: Metric name of the evictor's own time (evict ns minus the KV free inside it).
EVICT_OWN = "evict excl. KV free ns"

#: At most this many indices are drawn per bootstrap chunk (bounds memory: ~8 bytes each).
_CHUNK_ELEMENTS = 4_000_000


def _ratio(base: float, cand: float) -> float:
    """base / cand; inf when only cand is 0, NaN when both are 0 or either is NaN."""
    if np.isnan(base) or np.isnan(cand):
        return float("nan")
    if cand == 0:
        return float("nan") if base == 0 else float("inf")
    return base / cand


def _boot_stats(
    xs: tuple[np.ndarray, ...],
    rng: np.random.Generator,
    n_resamples: int,
    stat: Callable[..., np.ndarray] = np.median,
) -> tuple[np.ndarray, ...]:
    """``stat`` (median by default) of ``n_resamples`` resamples (with replacement) of each
    equal-length sample of ``xs``, drawn with the *same* indices (a paired bootstrap when
    ``len(xs) > 1``); each result has shape ``[n_resamples]``."""
    n = xs[0].size
    outs = tuple(np.empty(n_resamples, dtype=np.float64) for _ in xs)
    chunk = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_resamples, chunk):
        k = min(chunk, n_resamples - start)
        idx = rng.integers(0, n, size=(k, n))
        for x, out in zip(xs, outs, strict=True):
            out[start : start + k] = stat(x[idx], axis=1)
    return outs


def bootstrap_ratio(
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    paired: bool = False,
    stat: Callable[..., np.ndarray] = np.median,
) -> tuple[float, float, float]:
    """Median ratio baseline/candidate and its percentile-bootstrap interval.

    ``baseline``, ``candidate``: 1-D samples (any unit, the same for both; NaNs dropped).
    ``stat``: the statistic whose ratio is taken, a reduction called as ``stat(x, axis=...)``
    (default ``np.median``; e.g. ``np.mean``, or a quantile).
    Unpaired (default): the two samples are resampled independently. ``paired``: element i of
    both samples belongs together (the same request under two variants); pairs with a NaN on
    either side are dropped and pairs are resampled jointly (``ValueError`` on unequal
    lengths).
    Returns ``(ratio, ci_low, ci_high)``; all NaN when either sample is empty. Deterministic
    for a given ``seed``. Raises :class:`ValueError` on ``n_resamples < 1`` or ``level``
    outside (0, 1).
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    if paired:
        if b.size != c.size:
            raise ValueError(f"paired samples differ in length: {b.size} vs {c.size}")
        keep = ~(np.isnan(b) | np.isnan(c))
        b, c = b[keep], c[keep]
    else:
        b, c = b[~np.isnan(b)], c[~np.isnan(c)]
    if b.size == 0 or c.size == 0:
        return float("nan"), float("nan"), float("nan")
    ratio = _ratio(float(stat(b, axis=0)), float(stat(c, axis=0)))
    rng = np.random.default_rng(seed)
    if paired:
        bb, cc = _boot_stats((b, c), rng, n_resamples, stat)
    else:
        (bb,) = _boot_stats((b,), rng, n_resamples, stat)
        (cc,) = _boot_stats((c,), rng, n_resamples, stat)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(cc == 0, np.where(bb == 0, np.nan, np.inf), bb / cc)
    ratios = ratios[~np.isnan(ratios)]
    if ratios.size == 0:
        return ratio, float("nan"), float("nan")
    tail = (1.0 - level) / 2.0 * 100.0
    # infinite ratios (candidate median 0 ns) cannot be interpolated: pick sample values then
    if np.isinf(ratios).any():
        lo, hi = np.percentile(ratios, [tail, 100.0 - tail], method="inverted_cdf")
    else:
        lo, hi = np.percentile(ratios, [tail, 100.0 - tail])
    return ratio, float(lo), float(hi)


def verdict(ci_low: float, ci_high: float) -> str:
    """``faster`` if the interval lies above 1, ``slower`` if below 1, else
    ``no significant difference`` (also for an undefined interval)."""
    if ci_low > 1.0:
        return "faster"
    if ci_high < 1.0:
        return "slower"
    return "no significant difference"


def _evict_own(ops: pd.DataFrame, variant: str) -> np.ndarray:
    """Per evict call of ``variant``: its ns minus the ns of its ``evict_kv_free`` row (the
    k-th of each, in recorded order); empty when the run recorded no KV-free rows."""
    mine = ops[ops["variant"] == variant]
    ev = mine.loc[mine["op"] == "evict", "ns"].to_numpy(np.float64)
    free = mine.loc[mine["op"] == "evict_kv_free", "ns"].to_numpy(np.float64)
    if free.size != ev.size or not ev.size:
        return np.empty(0)
    return ev - free


def verdict_table(
    requests: pd.DataFrame,
    ops: pd.DataFrame,
    baseline: Mapping[str, str],
    *,
    variants: VariantSet | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    request_metrics: bool = True,
) -> pd.DataFrame:
    """One row per (candidate, baseline partner, metric) with ratio, 95 % CI and verdict.

    ``requests``/``ops``: the per-request and per-op tables with their axis columns
    (docs/CONTRACTS.md); ``baseline`` maps axis names to baseline values
    (``VariantSet.resolve_baseline``); ``variants``: the run's variants (default: read from
    the two tables). Pairs: ``VariantSet.pairs`` over :data:`AXIS_OPS`' axes.
    ``request_metrics=False`` leaves out the per-request latency rows (isolated clock).
    Metrics are named ``<op> ns`` (unit ns) and the request columns (unit s). Rows follow axis,
    candidate, metric order; pairs whose samples are empty for a metric are left out. Returns a
    frame with :data:`VERDICT_COLUMNS`; mutates nothing. Raises ``ValueError`` when the tables
    lack the axis columns.
    """
    vs = variants if variants is not None else VariantSet.from_frames(requests, ops)
    done = requests[requests["status"] == "finished"]
    rows = []
    for axis, cand, base, note in vs.pairs(baseline, AXIS_OPS):
        samples: list[tuple[str, str, np.ndarray, np.ndarray, bool]] = []
        for op in AXIS_OPS[axis]:
            sel = ops[ops["op"] == op]
            samples.append(
                (
                    f"{op} ns",
                    "ns",
                    sel.loc[sel["variant"] == base, "ns"].to_numpy(np.float64),
                    sel.loc[sel["variant"] == cand, "ns"].to_numpy(np.float64),
                    False,
                )
            )
        if axis == "evictor":
            samples.append((EVICT_OWN, "ns", _evict_own(ops, base), _evict_own(ops, cand), False))
        # the same requests ran under both variants: pair them by rid (finished in both)
        both = done[done["variant"] == base].merge(
            done[done["variant"] == cand], on="rid", suffixes=("_b", "_c")
        )
        for col in REQUEST_METRICS:
            if request_metrics and col in done.columns:
                samples.append(
                    (
                        col,
                        "s",
                        both[f"{col}_b"].to_numpy(np.float64),
                        both[f"{col}_c"].to_numpy(np.float64),
                        True,
                    )
                )
        for metric, unit, b, c, paired in samples:
            if paired:
                keep = ~(np.isnan(b) | np.isnan(c))
                b, c = b[keep], c[keep]
            else:
                b, c = b[~np.isnan(b)], c[~np.isnan(c)]
            if b.size == 0 or c.size == 0:
                continue
            ratio, lo, hi = bootstrap_ratio(b, c, n_resamples=n_resamples, seed=seed, paired=paired)
            rows.append(
                {
                    "axis": axis,
                    "metric": metric,
                    "unit": unit,
                    "candidate": cand,
                    "baseline": base,
                    "n_candidate": int(c.size),
                    "n_baseline": int(b.size),
                    "baseline_median": float(np.median(b)),
                    "candidate_median": float(np.median(c)),
                    "ratio": ratio,
                    "ci_low": lo,
                    "ci_high": hi,
                    "verdict": verdict(lo, hi),
                    "note": note,
                }
            )
    out = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    return out.astype({"n_candidate": "int64", "n_baseline": "int64"})
