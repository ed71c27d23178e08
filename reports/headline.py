"""The answer a report leads with: one headline line per compared axis, then the serving effect.

A headline line reads the verdict table (:func:`radixbench.reports.verdicts.verdict_table`)
for the candidate that differs from the baseline variant on that axis only, e.g.::

    evict: persistent-heap 4.5x faster than heapify [4.3-4.8], 3,507 calls each, median 1,105
    evictable leaves

with the ratio of medians, its 95 % bootstrap CI, the calls (n) and the condition the calls
saw (:func:`radixbench.reports.diagnostics.axis_checks`). An axis that was not exercised gets
its reason instead and no claim. The serving effect follows: under the coupled clock the TTFT /
TPOT / E2E verdicts of the same pairs; under the isolated clock one sentence why they are
identical, and the measured CPU time as a share of simulated time (what coupling could add).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from radixbench.reports.axes import VariantSet
from radixbench.reports.diagnostics import AxisCheck, Load, axis_checks, load_lines
from radixbench.reports.verdicts import AXIS_OPS, EVICT_OWN, MIN_EFFECT, verdict_bars

__all__ = ["DIVERGED_CAVEAT", "DIVERGED_NOTE", "ISOLATED_NOTE", "Answer", "answer", "withhold"]

#: The sentence that replaces the serving-metric verdicts under the isolated clock.
ISOLATED_NOTE = (
    "Serving metrics (TTFT, TPOT, E2E) are identical across variants by construction: under "
    "the isolated clock measured CPU time is recorded but never added to simulated time, so "
    "every variant runs the same schedule. Rerun with `--clock coupled` to measure the "
    "serving effect."
)

#: :data:`ISOLATED_NOTE` when the variants differ in a HiCache setting.
HICACHE_NOTE = (
    "Serving metrics (TTFT, TPOT, E2E) are identical by construction only among variants of one "
    "HiCache setting (the isolated clock adds no measured CPU time); across HiCache settings "
    "they differ because the tiers hold different KV and their transfers take different "
    "simulated time (the HiCache lines above)."
)

#: The sentence that replaces :data:`ISOLATED_NOTE` when the variants' prefix hits diverged.
DIVERGED_NOTE = (
    "Serving metrics (TTFT, TPOT, E2E) differ across variants because their cache behaviour "
    "diverged (different prefix hits, so different prefills and schedules), not because of "
    "the algorithms' speed; op timings above compare calls on different trees."
)
#: Appended to every op line of a run whose variants diverged.
DIVERGED_CAVEAT = " (caveat: the variants diverged, so these calls ran on different trees)"

_PRIMARY = {"evictor": "evict ns", "matcher": "match_prefix ns", "flatten": "build_extend ns"}
_UNITS = {"evictor": "calls", "matcher": "calls", "flatten": "batches", "impl": "calls"}
_REQUEST = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "E2E"}


@dataclass(frozen=True)
class Answer:
    """``load``: overload flags and the utilisation line (top of the report); ``headline``:
    one line per compared axis and candidate; ``serving``: the serving-effect lines;
    ``checks``: the axis checks (axes not exercised are withheld from claims); ``stated``: the
    verdict rows the headline states (the PR summary's table)."""

    load: list[str]
    headline: list[str]
    serving: list[str]
    checks: dict[str, AxisCheck] = field(default_factory=dict)
    stated: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def lines(self) -> list[str]:
        return [*self.load, *self.headline, *self.serving]


def _x(r: float) -> str:
    if math.isnan(r):
        return "n/a"
    if math.isinf(r):
        return "inf"
    return f"{r:.3g}"


def _compare(row: pd.Series, cand: str, base: str) -> str:
    """``cand 4.5x faster than base [4.3-4.8]`` (or slower / no significant difference; an
    interval that clears 1 but not the A/A noise floor says so)."""
    ratio, lo, hi = float(row["ratio"]), float(row["ci_low"]), float(row["ci_high"])
    ci = f"[{_x(lo)}–{_x(hi)}]"
    if row["verdict"] == "faster":
        return f"{cand} {_x(ratio)}× faster than {base} {ci}"
    if row["verdict"] == "slower":
        inv = f"{_x(1 / ratio)}× slower" if ratio > 0 else "slower"  # ratio < 1: candidate slower
        return f"{cand} {inv} than {base} (ratio {_x(ratio)} {ci})"
    floor = ""
    aa = [float(row.get(k, math.nan)) for k in ("aa_low", "aa_high", "aa_ratio")]
    if lo > 1 or hi < 1:  # clears 1 but not the bars of the verdicts' rule
        lo_bar, hi_bar = verdict_bars(*aa)
        if (lo_bar, hi_bar) != verdict_bars():
            floor = f"; inside the A/A noise floor's bars [{_x(lo_bar)}–{_x(hi_bar)}]"
        else:
            floor = f"; within {MIN_EFFECT:.0%}, the smallest effect claimed"
    return f"{cand} vs {base}: no significant difference (ratio {_x(ratio)} {ci}{floor})"


def _noise_floor_line(verdicts: pd.DataFrame) -> list[str]:
    """The A/A control's line: each op's interval of the baseline against its replica."""
    aa = verdicts[(verdicts["axis"] == "replica") & verdicts["metric"].str.endswith(" ns")]
    if aa.empty:
        return []
    parts = [
        f"{str(r['metric']).removesuffix(' ns')} {_x(float(r['ratio']))} "
        f"[{_x(float(r['ci_low']))}–{_x(float(r['ci_high']))}]"
        for _, r in aa.iterrows()
    ]
    return [
        f"Noise floor (A/A): {aa['baseline'].iloc[0]} timed against a replica of itself, "
        f"interleaved like the others: {', '.join(parts)}; a difference is claimed only when "
        "its interval clears this one shifted by its median (its offset from 1 counted both "
        f"ways) and {MIN_EFFECT:.0%} either side of 1."
    ]


def _axis_label(variants: VariantSet, name: str, axis: str) -> str:
    """What a headline calls ``name`` on ``axis``: its value there (``impl``: the label)."""
    return variants.group_key(name, axis)


def _unlike(variants: VariantSet, cand: str, axis: str, baseline: Mapping[str, str]) -> bool:
    return axis == "impl" and not variants.like_for_like(cand, baseline)


def _comparable_first(
    rows: pd.DataFrame, axis: str, baseline: Mapping[str, str], variants: VariantSet
) -> list[str]:
    """The candidates of ``rows`` in order, those paired like for like first (``impl``)."""
    cands = [str(c) for c in dict.fromkeys(rows["candidate"])]
    return sorted(cands, key=lambda c: _unlike(variants, c, axis, baseline))


def _impl_partner_label(
    variants: VariantSet, cand: str, base: str, axis: str, baseline: Mapping[str, str]
) -> str:
    """What a line calls the baseline partner: its value on ``axis``; for an ``impl`` pair
    that is not like for like, also the algorithms it runs (``radixbench heapify/linear``),
    so no line reads as a claim about the implementation as a whole."""
    label = _axis_label(variants, base, axis)
    if not _unlike(variants, cand, axis, baseline):
        return label
    algos = [v for a in ("evictor", "matcher") if (v := variants.value(base, a)) is not None]
    return f"{label} {'/'.join(algos)} (not like-for-like)"


def _main_rows(
    verdicts: pd.DataFrame, axis: str, baseline: Mapping[str, str], variants: VariantSet
) -> pd.DataFrame:
    """Rows of ``axis`` whose baseline variant holds the baseline value on every other axis it
    has (the comparison at the baseline's settings); for ``impl`` all rows."""
    rows = verdicts[verdicts["axis"] == axis]
    if axis == "impl" or rows.empty:
        return rows
    keep = []
    for base in rows["baseline"]:
        values = {a: variants.value(str(base), a) for a in variants.axes if a != axis}
        keep.append(all(v is None or v == baseline.get(a, v) for a, v in values.items()))
    return rows[keep]


def withhold(verdicts: pd.DataFrame, checks: Mapping[str, AxisCheck]) -> pd.DataFrame:
    """A copy of ``verdicts`` whose rows on a not-exercised axis read ``not compared`` in the
    ``verdict`` column (no claim)."""
    out = verdicts.copy()
    if out.empty or "axis" not in out:
        return out
    bad = out["axis"].map(lambda a: a in checks and not checks[a].ok)
    out.loc[bad, "verdict"] = "not compared"
    return out


def answer(
    verdicts: pd.DataFrame,
    ops: pd.DataFrame,
    baseline: Mapping[str, str],
    variants: VariantSet,
    *,
    loads: Sequence[Load] = (),
    metrics: pd.DataFrame | None = None,
    clock: str = "isolated",
    behaviour: Sequence[str] = (),
    diverged: bool = False,
    reference_only: bool = False,
) -> Answer:
    """The :class:`Answer` of a run: ``verdicts`` from ``verdict_table`` (with its ``axis``
    column), ``ops`` the per-op table, ``baseline`` the resolved baseline per axis,
    ``variants`` the run's variants (their axis records), ``loads``
    from :func:`~radixbench.reports.diagnostics.load_check`, ``metrics`` the serving-metrics
    table (``measured_cpu_s`` and ``duration_s`` used when present), ``behaviour``: the
    lines of :func:`radixbench.reports.behaviour.behaviour_lines` (first, after the load) and
    ``diverged``: whether the variants' prefix hits diverged (every op line then says so, and
    the isolated-clock note is replaced by :data:`DIVERGED_NOTE`). ``reference_only``: the
    run's reference implementation (``[variants] reference``) is its only other
    implementation: the impl axis then gets no lines here (the reference lines, which pair it
    with every algorithm, say it). Pure."""
    varied = variants.varied()
    axes = [
        a
        for a in AXIS_OPS
        if a != "replica"  # the A/A control has a line of its own (the noise floor)
        and not (a == "impl" and reference_only)
        and (a in varied or (not verdicts.empty and (verdicts["axis"] == a).any()))
    ]
    checks = axis_checks(ops, axes)
    head: list[str] = []
    serving: list[str] = []
    stated: list[pd.Series] = []
    for axis in axes:
        check = checks[axis]
        if not check.ok:
            head.append(f"{axis}: NOT COMPARED — {check.reason}.")
            continue
        rows = _main_rows(verdicts, axis, baseline, variants)
        op_rows = rows[rows["metric"].str.endswith(" ns")]
        for cand in _comparable_first(op_rows, axis, baseline, variants):
            mine = op_rows[op_rows["candidate"] == cand]
            base = str(mine["baseline"].iloc[0])
            c_label = _axis_label(variants, str(cand), axis)
            b_label = _impl_partner_label(variants, str(cand), base, axis, baseline)
            note = str(mine["note"].iloc[0]) if "note" in mine and mine["note"].iloc[0] else ""
            if note:
                head.append(f"{axis}: {c_label} vs {_axis_label(variants, base, axis)}, {note}.")
            metrics_here = (
                [_PRIMARY[axis]] if axis in _PRIMARY else [f"{op} ns" for op in AXIS_OPS[axis]]
            )
            if axis == "evictor":  # and on the host tier, with HiCache
                metrics_here.append("evict_host ns")
            for metric in metrics_here:
                hit = mine[mine["metric"] == metric]
                if hit.empty:
                    continue
                r = hit.iloc[0]
                stated.append(r)
                op = metric.removesuffix(" ns")
                n_c, n_b = int(r["n_candidate"]), int(r["n_baseline"])
                unit = _UNITS[axis]
                n = f"{n_c:,} {unit} each" if n_c == n_b else f"{n_c:,} vs {n_b:,} {unit}"
                condition = check.conditions.get(op, check.condition)
                cond = f", {condition}" if condition else ""
                caveat = DIVERGED_CAVEAT if diverged else ""
                head.append(f"{op}: {_compare(r, c_label, b_label)}, {n}{cond}{caveat}.")
            own = mine[mine["metric"] == EVICT_OWN]
            if axis == "evictor" and not own.empty:
                r = own.iloc[0]
                free_b = _free_p50(ops, base)
                free_c = _free_p50(ops, str(cand))
                head.append(
                    f"evictor alone (KV free excluded): {_compare(r, c_label, b_label)}; the "
                    f"KV-slot free inside each evict call took p50 {free_b:,.0f} ns "
                    f"({b_label}) / {free_c:,.0f} ns ({c_label}), freeing the same slots in both."
                )
            if clock == "coupled":
                for col, label in _REQUEST.items():
                    req = rows[(rows["candidate"] == cand) & (rows["metric"] == col)]
                    if not req.empty:
                        serving.append(
                            f"{label} p50: {_compare(req.iloc[0], c_label, b_label)}, "
                            f"{int(req.iloc[0]['n_candidate']):,} requests paired."
                        )
    head += _noise_floor_line(verdicts)
    if diverged:
        serving.append(DIVERGED_NOTE)
    elif clock != "coupled":
        serving.append(HICACHE_NOTE if "hicache" in varied else ISOLATED_NOTE)
    if clock != "coupled":
        serving += _cpu_share(metrics)
    rows = pd.DataFrame(stated) if stated else verdicts.iloc[0:0]
    return Answer([*load_lines(loads), *behaviour], head, serving, checks, rows)


def _free_p50(ops: pd.DataFrame, variant: str) -> float:
    sel = ops[(ops["variant"] == variant) & (ops["op"] == "evict_kv_free")]
    return float(sel["ns"].median()) if len(sel) else float("nan")


def _cpu_share(metrics: pd.DataFrame | None) -> list[str]:
    """Measured CPU time of cache ops and batch builds as a share of simulated time, per
    variant: the most the coupled clock would add."""
    if metrics is None or not {"measured_cpu_s", "duration_s", "variant"} <= set(metrics):
        return []
    parts = []
    for _, m in metrics.iterrows():
        dur = float(m["duration_s"])
        if dur > 0:
            parts.append(f"{m['variant']} {float(m['measured_cpu_s']) / dur:.1%}")
    if not parts:
        return []
    return [
        "Measured CPU time of cache ops and batch builds, as a share of simulated time (what "
        "the coupled clock would add): " + ", ".join(parts) + "."
    ]
