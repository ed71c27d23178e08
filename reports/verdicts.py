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
ratios are reported (BCa up to 1,000 calls a side, :mod:`~radixbench.reports.bootstrap`).
Op samples beyond that are resampled by **blocks** of simulated time (``sim_time_s``;
:mod:`~radixbench.reports.resampled`): 50 blocks of calls drawn with replacement, the same
blocks for both variants, because load on the machine slows whole interleaved slices of a
variant at once and calls resampled one by one made identical code read different under load
(``ci_method`` ``block percentile``; tables without ``sim_time_s`` resample calls one by one);
request metrics are paired by ``rid`` (the same request under both variants, finished in both)
and resampled jointly. Verdict (:func:`verdict`, the one rule of every
verdict radixbench states): ``faster`` when the whole interval lies above the high bar (at
least ``1 + MIN_EFFECT``; with the A/A control, the A/A interval shifted by the A/A median,
:func:`verdict_bars`), ``slower`` when it lies below the low bar, otherwise ``no significant
difference``; the A/A rows themselves read ``noise floor (A/A)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from radixbench.reports.axes import REPLICA, VariantSet
from radixbench.reports.bootstrap import bootstrap_ratio, ratio_columns
from radixbench.reports.resampled import time_blocks

__all__ = [
    "AA_VERDICT",
    "AXIS_OPS",
    "EVICT_OWN",
    "NO_DIFFERENCE",
    "REQUEST_METRICS",
    "VERDICT_COLUMNS",
    "call_blocks",
    "verdict",
    "verdict_bars",
    "verdict_table",
]

#: Axis name -> ops whose ``ns`` that axis changes, in the order verdicts are made.
AXIS_OPS: Mapping[str, tuple[str, ...]] = {
    "evictor": ("evict", "evict_host"),
    "matcher": ("match_prefix",),
    "flatten": ("build_extend", "build_decode"),
    "impl": ("match_prefix", "insert", "evict"),
    # the A/A control: the baseline variant against a replica of itself, on every op
    REPLICA: (
        "match_prefix",
        "insert",
        "evict",
        "checkpoint",
        "release",
        "build_extend",
        "build_decode",
    ),
}

#: Per-request latency columns compared for every pair (those present in the table).
REQUEST_METRICS: tuple[str, ...] = ("ttft_s", "tpot_s", "e2e_s")

#: Columns of :func:`verdict_table`. ``*_median`` in ``unit``; ``ratio`` = baseline /
#: candidate median; ``ci_low``/``ci_high`` the bootstrap interval of the ratio and
#: ``ci_method`` how it was computed (``BCa`` / ``percentile`` / ``block percentile``,
#: ``reports.bootstrap``);
#: ``aa_low``/``aa_high``/``aa_ratio`` the A/A interval and median ratio of the same metric (the
#: noise floor; NaN without an A/A replica, and on the A/A rows); ``note``: how an ``impl``
#: pair was matched (``VariantSet.partner``).
VERDICT_COLUMNS = [
    "axis", "metric", "unit", "candidate", "baseline", "n_candidate", "n_baseline",
    "baseline_median", "candidate_median", "ratio", "ci_low", "ci_high", "ci_method",
    "aa_low", "aa_high", "aa_ratio", "verdict", "note",
]  # fmt: skip

#: Metric name of the evictor's own time (evict ns minus the KV free inside it).
EVICT_OWN = "evict excl. KV free ns"


#: The smallest effect a verdict claims (a ratio beyond ``1 + MIN_EFFECT`` or below its
#: inverse). Two classes running identical code in one process still differ by a couple of
#: percent (allocation, memory layout): the served-cache patch example's ``match_prefix`` read
#: 1.02 [1.02, 1.02] against upstream with an A/A interval of [0.992, 1.00], so an A/A replica
#: of one class does not bound the difference between two.
MIN_EFFECT = 0.03

#: The verdict of no claim.
NO_DIFFERENCE = "no significant difference"
#: What the A/A control's own rows hold in the ``verdict`` column: they are the noise floor
#: every other verdict must clear, not a claim about a change (drawn neutral, never as a bar
#: of "faster" / "slower").
AA_VERDICT = "noise floor (A/A)"


def _finite(*xs: float) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in xs)


def verdict_bars(
    aa_low: float = math.nan, aa_high: float = math.nan, aa_ratio: float = math.nan
) -> tuple[float, float]:
    """``(low bar, high bar)`` a ratio's interval must clear: below the low bar is a claim of
    "slower" / "worse", above the high bar of "faster" / "better".

    Always at least :data:`MIN_EFFECT` either side of 1. With the A/A control of the same
    metric (its interval ``[aa_low, aa_high]`` and median ratio ``aa_ratio``: the baseline
    against a replica of itself), the A/A interval shifted by the A/A median: its spread about
    its own median (``aa_low / aa_ratio``, ``aa_high / aa_ratio``: the sampling noise) moved
    out by the A/A's offset from 1 (``max(aa_ratio, 1 / aa_ratio)``: what identical code read
    as a difference) on *both* sides, since a candidate's own offset may go either way. E.g.
    A/A 0.95 [0.936, 0.966] gives bars [0.936, 1.07]. Without a finite A/A interval, the
    :data:`MIN_EFFECT` bars; a missing ``aa_ratio`` is taken as the interval's geometric
    middle. Pure."""
    down, up = 1.0 / (1.0 + MIN_EFFECT), 1.0 + MIN_EFFECT
    if not _finite(aa_low, aa_high):
        return down, up
    m = aa_ratio if _finite(aa_ratio) else math.sqrt(aa_low * aa_high)
    offset = max(m, 1.0 / m)
    return min(down, aa_low / m / offset), max(up, aa_high / m * offset)


def verdict(
    ci_low: float,
    ci_high: float,
    aa_low: float = math.nan,
    aa_high: float = math.nan,
    aa_ratio: float = math.nan,
    *,
    words: tuple[str, str] = ("faster", "slower"),
) -> str:
    """The one rule of every verdict radixbench states (op timings, serving metrics, the
    reference lines, router comparisons, studies, sweeps, diffs): ``words[0]`` (``faster``;
    routers: ``better``) if the ratio's interval ``[ci_low, ci_high]`` (> 1: the candidate
    ahead) lies above the high bar of :func:`verdict_bars`, ``words[1]`` (``slower`` /
    ``worse``) if it lies below the low bar, else :data:`NO_DIFFERENCE` (also for an undefined
    interval). Pure."""
    if math.isnan(ci_low) or math.isnan(ci_high):
        return NO_DIFFERENCE
    lo_bar, hi_bar = verdict_bars(aa_low, aa_high, aa_ratio)
    if ci_low > hi_bar:
        return words[0]
    if ci_high < lo_bar:
        return words[1]
    return NO_DIFFERENCE


def _evict_own(ops: pd.DataFrame, variant: str) -> tuple[np.ndarray, np.ndarray]:
    """Per evict call of ``variant``: its ns minus the ns of its ``evict_kv_free`` row (the
    k-th of each, in recorded order), and the calls' ``sim_time_s`` (empty without that
    column); both empty when the run recorded no KV-free rows."""
    mine = ops[ops["variant"] == variant]
    evict = mine[mine["op"] == "evict"]
    ev = evict["ns"].to_numpy(np.float64)
    free = mine.loc[mine["op"] == "evict_kv_free", "ns"].to_numpy(np.float64)
    if free.size != ev.size or not ev.size:
        return np.empty(0), np.empty(0)
    return ev - free, _times(evict)


def _times(rows: pd.DataFrame) -> np.ndarray:
    """The rows' ``sim_time_s`` (float64), empty when the table has none (older runs)."""
    if "sim_time_s" not in rows.columns:
        return np.empty(0)
    return rows["sim_time_s"].to_numpy(np.float64)


def call_blocks(b_rows: pd.DataFrame, c_rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """Block labels of two sets of op rows by the simulated time each call ran at
    (:func:`~radixbench.reports.resampled.time_blocks`), aligned with the rows, for the block
    bootstrap of their ``ns``; ``None`` without ``sim_time_s`` (older runs), for no rows or too
    few distinct times. Mutates nothing."""
    tb, tc = _times(b_rows), _times(c_rows)
    if not tb.size or not tc.size:
        return None
    return time_blocks(tb, tc)


def common_call_sites(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (of one op, any number of variants) kept to the call sites every variant among
    them has: the ``parent`` column, the timed op a call was made in (``""`` for the
    simulator's own calls). Implementations nest their operations differently (sglang 0.5.23's
    served cache re-anchors a checkpoint without the ``match_prefix`` that radixbench and the
    classic ``RadixCache`` make in it, docs/SGLANG-FIDELITY.md U6), and a call made in another
    place works on other inputs; for variants of one implementation the sites are the same and
    nothing is dropped. Tables without ``parent`` (runs before it) keep every row. Mutates
    nothing."""
    if "parent" not in rows.columns or rows.empty:
        return rows
    sites = [set(g) for _, g in rows.groupby("variant", sort=False)["parent"]]
    return rows[rows["parent"].isin(set.intersection(*sites))]


def same_call_sites(
    ops: pd.DataFrame, base: str, cand: str, op: str
) -> tuple[np.ndarray, np.ndarray]:
    """ns (float64) of ``op``'s calls under ``base`` and under ``cand``, kept to the call sites
    both have (:func:`common_call_sites`; none when one of them never made the call)."""
    b, c = _call_rows(ops, base, cand, op)
    return b["ns"].to_numpy(np.float64), c["ns"].to_numpy(np.float64)


def _call_rows(
    ops: pd.DataFrame, base: str, cand: str, op: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`same_call_sites`' rows: ``op``'s calls under ``base`` and under ``cand``."""
    rows = common_call_sites(ops[(ops["op"] == op) & ops["variant"].isin([base, cand])])
    return rows[rows["variant"] == base], rows[rows["variant"] == cand]


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
        # (metric, unit, baseline, candidate, paired, the calls' simulated times)
        samples: list[tuple[str, str, np.ndarray, np.ndarray, bool, tuple[np.ndarray, ...]]]
        samples = []
        for op in AXIS_OPS[axis]:
            b_rows, c_rows = _call_rows(ops, base, cand, op)
            b_ns, c_ns = b_rows["ns"].to_numpy(np.float64), c_rows["ns"].to_numpy(np.float64)
            samples.append((f"{op} ns", "ns", b_ns, c_ns, False, (_times(b_rows), _times(c_rows))))
        if axis == "evictor":
            (b_own, tb), (c_own, tc) = _evict_own(ops, base), _evict_own(ops, cand)
            samples.append((EVICT_OWN, "ns", b_own, c_own, False, (tb, tc)))
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
                        (),
                    )
                )
        for metric, unit, b, c, paired, times in samples:
            blocks = None
            if paired:
                keep = ~(np.isnan(b) | np.isnan(c))
                b, c = b[keep], c[keep]
            else:
                kb, kc = ~np.isnan(b), ~np.isnan(c)
                if times and times[0].size == b.size and times[1].size == c.size:
                    blocks = time_blocks(times[0][kb], times[1][kc])
                b, c = b[kb], c[kc]
            if b.size == 0 or c.size == 0:
                continue
            ratio, lo, hi = bootstrap_ratio(
                b, c, n_resamples=n_resamples, seed=seed, paired=paired, blocks=blocks
            )
            rows.append(
                {
                    "axis": axis,
                    "metric": metric,
                    "unit": unit,
                    "candidate": cand,
                    "baseline": base,
                    "n_candidate": int(c.size),
                    "n_baseline": int(b.size),
                    **ratio_columns(b, c, ratio, lo, hi, blocked=blocks is not None),
                    "note": note,
                }
            )
    out = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    out = _noise_floor(out)
    return out.astype({"n_candidate": "int64", "n_baseline": "int64"})


def _noise_floor(table: pd.DataFrame) -> pd.DataFrame:
    """Fill ``aa_low`` / ``aa_high`` / ``aa_ratio`` of every row from the A/A rows (axis
    :data:`REPLICA`) of the same metric, then the ``verdict`` with that floor
    (:func:`verdict`); the A/A rows themselves read :data:`AA_VERDICT` (no claim)."""
    aa = table[table["axis"] == REPLICA].drop_duplicates("metric").set_index("metric")
    is_aa = table["axis"] == REPLICA
    for col, src in (("aa_low", "ci_low"), ("aa_high", "ci_high"), ("aa_ratio", "ratio")):
        table[col] = table["metric"].map(aa[src]).astype("float64").where(~is_aa, np.nan)
    table["verdict"] = [
        AA_VERDICT if a else verdict(lo, hi, al, ah, am)
        for a, lo, hi, al, ah, am in zip(
            is_aa, table["ci_low"], table["ci_high"], table["aa_low"], table["aa_high"],
            table["aa_ratio"], strict=True,
        )
    ]  # fmt: skip
    return table
