"""The block a reviewer pastes into a PR comment: what was compared, how fast, how sure.

:func:`summary_block` gives Markdown lines, the first thing ``report.md`` holds and all that
``compare --summary-only`` prints: one table row per compared op (the headline's comparisons:
each axis at the baseline's other settings) with the baseline's and the candidate's p50 in
µs, the ratio with its 95 % interval and the A/A noise floor, calls, the condition the calls
saw and the verdict; under it each axis NOT COMPARED with its reason and the reference lines;
then the serving effect, the equivalence, the machine and the command that reproduces the
run. Its heading states what ran (requests, KV pool: :func:`~radixbench.reports.runmeta.
run_title`).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from radixbench.reports.diagnostics import AxisCheck
from radixbench.reports.equivalence import equivalence_sentence, equivalence_status
from radixbench.reports.markdown import markdown_table
from radixbench.reports.record import RunMeta
from radixbench.reports.runmeta import run_title
from radixbench.reports.verdicts import MIN_EFFECT

__all__ = ["summary_block"]


def _x(v: float) -> str:
    return "n/a" if math.isnan(v) else ("inf" if math.isinf(v) else f"{v:.3g}")


def _us(ns: float) -> str:
    return "n/a" if math.isnan(ns) else f"{ns / 1e3:,.2f}"


def summary_block(
    verdicts: pd.DataFrame,
    checks: Mapping[str, AxisCheck],
    serving: Sequence[str],
    equivalence: Mapping[str, Any],
    meta: RunMeta,
    main_rows: pd.DataFrame | None = None,
    reference: Sequence[str] = (),
) -> list[str]:
    """Markdown lines of the summary (module docstring). ``verdicts``: the verdict table
    (``withhold`` applied); ``main_rows``: the rows the headline states (default: every op
    row but the A/A control's); ``checks``: the axis checks (their conditions); ``serving``:
    the answer's serving lines; ``equivalence``: the check's result; ``meta``: the record
    (scenario, environment, ``command_line``); ``reference``: the answer's reference lines
    (the reference implementation's p50 and each algorithm against it, or why it did not run),
    listed under the table with the axes not compared and why, as the answer states them.
    Pure."""
    rows = main_rows if main_rows is not None else verdicts[verdicts["axis"] != "replica"]
    rows = rows[rows["metric"].str.endswith(" ns")] if len(rows) else rows
    table = []
    for _, r in rows.iterrows():
        op = str(r["metric"]).removesuffix(" ns")
        check = checks.get(str(r["axis"]))
        cond = check.conditions.get(op, check.condition) if check is not None else ""
        floor = ""
        if not math.isnan(float(r.get("aa_low", math.nan))):
            floor = f" (A/A {_x(float(r['aa_low']))}–{_x(float(r['aa_high']))})"
        table.append(
            [
                op,
                f"{r['candidate']} vs {r['baseline']}",
                _us(float(r["baseline_median"])),
                _us(float(r["candidate_median"])),
                f"{_x(float(r['ratio']))} [{_x(float(r['ci_low']))}–{_x(float(r['ci_high']))}]"
                + floor,
                f"{int(r['n_candidate']):,}",
                cond,
                str(r["verdict"]),
            ]
        )
    head = ["op", "candidate vs baseline", "baseline p50 µs", "candidate p50 µs",
            "ratio [95% CI]", "calls", "condition", "verdict"]  # fmt: skip
    out = [f"### radixbench: {run_title(meta)}", ""]
    out += [markdown_table(head, table), ""] if table else ["_no op compared_", ""]
    skipped = [f"- {axis}: NOT COMPARED — {c.reason}." for axis, c in checks.items() if not c.ok]
    listed = [*skipped, *(f"- {line}" for line in reference)]
    out += [*listed, ""] if listed else []
    out += [
        "ratio = baseline p50 / candidate p50 (> 1: the candidate is faster); intervals: "
        "bootstrap (BCa up to 1,000 calls a side; beyond, 50 blocks of simulated time "
        "resampled, the same for both sides, so load on whole slices of the run counts); "
        "a verdict needs its "
        "interval to clear both the A/A noise floor (the baseline timed against a replica of "
        f"itself) and {MIN_EFFECT:.0%} either side of 1 (the smallest effect claimed).",
        "",
    ]
    out += [f"- Serving: {s}" for s in serving[:1]]
    eq = equivalence_sentence(equivalence, names=False)
    out.append(f"- Equivalence: {equivalence_status(equivalence)} — {eq}")
    env = meta.environment
    machine = (
        f"{env.get('cpu', 'n/a')}, {env.get('cores', 'n/a')} cores, Python "
        f"{env.get('python', 'n/a')}, torch {env.get('torch', 'n/a')}, radixbench "
        f"{env.get('git_commit', 'n/a')}"
    )
    out.append(f"- Machine: {machine}")
    if meta.command_line:
        out.append(f"- Reproduce: `{shlex.join(meta.command_line)}`")
    return out
