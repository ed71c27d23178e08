"""``report.md``: the human-readable run report.

:func:`write_report_md` renders the run metadata, the cross-variant equivalence verdict, the
summary tables (:mod:`radixbench.reports.summary`) as Markdown pipe tables, and relative links
to the plots and stored tables, and writes ``<run_dir>/report.md`` atomically.

Pipe tables are produced by the small :func:`pipe_table` formatter here rather than
``DataFrame.to_markdown`` (which needs the optional ``tabulate`` dependency); it and every other
Markdown table radixbench writes (study, benchmarks) go through :func:`markdown_table`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.equivalence import equivalence_sentence, equivalence_status
from radixbench.reports.headline import RANKED, Answer
from radixbench.reports.impls import implementation_frames
from radixbench.reports.record import RunMeta
from radixbench.reports.runmeta import (
    environment_rows,
    hit_rate_text,
    run_rows,
    run_title,
    scenario_parts,
)

__all__ = [
    "answer_block",
    "equivalence_block",
    "format_cell",
    "markdown_table",
    "pipe_table",
    "table_links",
    "write_report_md",
]


def format_cell(value: Any) -> str:
    """Format one table cell: floats to 6 significant digits (whole numbers, no exponent, at
    >= 1e6), non-finite floats as ``n/a``/``inf``/``-inf``, ``|`` and newlines escaped."""
    if isinstance(value, (float, np.floating)):
        x = float(value)
        if math.isnan(x):
            return "n/a"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return f"{x:.0f}" if abs(x) >= 1e6 else f"{x:.6g}"
    if value is None:
        return "n/a"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str] | None = None
) -> str:
    """A GitHub-flavoured Markdown pipe table of cells already formatted as text:
    ``| a | b |`` lines (no escaping), without a trailing newline. The separator row is
    ``|---|---|`` when ``align`` is None, else ``| <align[0]> | <align[1]> |`` (one marker per
    column, e.g. ``---:`` right-aligned)."""
    sep = "|" + "---|" * len(header) if align is None else "| " + " | ".join(align) + " |"
    lines = ["| " + " | ".join(header) + " |", sep]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def pipe_table(df: pd.DataFrame) -> str:
    """Render ``df`` (without its index) as a GitHub-flavoured Markdown pipe table.

    Numeric columns are right-aligned, others left-aligned. An empty frame renders as the
    italic line ``_no rows_``.
    """
    if df.empty:
        return "_no rows_"
    header = [format_cell(c) for c in df.columns]
    align = [
        "---:" if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        else ":---"
        for c in df.columns
    ]  # fmt: skip
    rows = ([format_cell(v) for v in row] for row in df.itertuples(index=False, name=None))
    return markdown_table(header, rows, align)


def _rel(path: Path | str, run_dir: Path) -> str:
    """``path`` relative to ``run_dir``, POSIX-style, for a Markdown link."""
    return Path(os.path.relpath(Path(path), run_dir)).as_posix()


def table_links(tables: Mapping[str, tuple[Path, Path | None]], run_dir: Path) -> list[str]:
    """One Markdown list line per stored table: its Parquet and CSV, linked relative to
    ``run_dir``; a table stored without CSV (over a spreadsheet's rows,
    :data:`~radixbench.reports.tables.CSV_MAX_ROWS`) says so."""
    lines = []
    for stem, (parquet, csv) in tables.items():
        other = (
            f"[csv]({_rel(csv, run_dir)})"
            if csv is not None
            else "no CSV (more rows than a spreadsheet holds)"
        )
        lines.append(f"- `{stem}`: [parquet]({_rel(parquet, run_dir)}) | {other}")
    return lines


def _meta_block(meta: RunMeta) -> list[str]:
    """Bullet list of the run metadata (:func:`~radixbench.reports.runmeta.run_rows`)."""
    return [f"- **{label}**: {text}" for label, text in run_rows(meta)]


def _environment_block(meta: RunMeta) -> list[str]:
    """``## Environment`` section (:func:`~radixbench.reports.runmeta.environment_rows`)."""
    return [
        "## Environment",
        "",
        *(f"- **{label}**: {text}" for label, text in environment_rows(meta)),
    ]


def _implementations_block(meta: RunMeta) -> list[str]:
    """``## Implementations`` section (:mod:`~radixbench.reports.impls`): what each cache
    implementation ran, the sha256 of every file it loaded in a collapsed table; nothing for
    runs that recorded none."""
    frames = implementation_frames(meta)
    if frames is None:
        return []
    summary, files = frames
    return [
        "## Implementations",
        "",
        "Cache code each variant ran: `files_sha256` is the sha256 of the `sha256sum`-style "
        "list of the files below.",
        "",
        pipe_table(summary),
        "",
        "<details><summary>sha256 of every file loaded</summary>",
        "",
        pipe_table(files),
        "",
        "</details>",
        "",
    ]


def answer_block(answer: Answer | None) -> list[str]:
    """The report's first lines: overload flags (a quoted warning), ``## Answer`` with one
    bullet per headline line, then ``### Serving effect`` (when it has lines); nothing when
    ``answer`` is None."""
    if answer is None:
        return []
    lines = []
    for text in answer.load:
        lines += [f"> **{text}**" if text.startswith("OVERLOADED") else f"> {text}", ">"]
    if lines:
        lines[-1] = ""
    lines += ["## Answer", ""]
    # a ranked answer's lines ("1. ...") are an ordered list already, not bullets
    lines += [t if RANKED.match(t) else f"- {t}" for t in answer.headline] or [
        "- _no axis compared: one variant per axis_"
    ]
    lines += [""]
    if answer.serving:
        lines += ["### Serving effect", "", *(f"- {t}" for t in answer.serving), ""]
    return lines


def _verdict_block(verdicts: pd.DataFrame | None) -> list[str]:
    """``## Verdicts`` section: the bootstrap comparison table, or nothing when None."""
    if verdicts is None:
        return []
    return [
        "## Verdicts",
        "",
        "Each candidate against its baseline partner (one algorithm axis changed; the baseline "
        "of an axis is the first variant listed unless `--baseline` names one). Ratio = "
        "median(baseline) / median(candidate) (> 1: candidate faster); 95 % CI from a "
        "seeded bootstrap (`ci_method`: BCa up to 1,000 calls a side; `block percentile` "
        "beyond, 50 blocks of simulated time resampled alike for both sides); verdict "
        "`faster`/`slower` only when the CI clears the A/A noise floor and 3 % either side "
        "of 1; "
        "`not compared` where the axis's op never ran or ran on trivial inputs. "
        "`evict excl. KV free ns` is the evictor's own time (the KV-slot free inside each "
        "evict call subtracted). Request latencies (TTFT/TPOT/E2E) appear under the coupled "
        "clock only.",
        "",
        pipe_table(verdicts),
        "",
    ]


def equivalence_block(equivalence: Mapping[str, Any]) -> list[str]:
    """Section stating the equivalence verdict (:mod:`radixbench.reports.equivalence`); a
    divergence shows the first differing rid with every variant's hits."""
    status = equivalence_status(equivalence)
    sentence = equivalence_sentence(equivalence)
    if status != "FAILED":
        return [f"## Equivalence: {status}", "", sentence[0].upper() + sentence[1:] + "."]
    lines = [
        "## Equivalence: FAILED",
        "",
        "> **EQUIVALENCE FAILED: the variants do NOT produce identical `prefix_hit_tokens`.**",
        "> The variants did different work, so the latency comparisons below are not "
        "like-for-like.",
        "",
        sentence[0].upper() + sentence[1:] + ".",
        "",
    ]
    first = equivalence.get("first_diff")
    if not first:
        return [*lines, "No first differing request was recorded."]
    values: Mapping[str, Any] = first.get("values", {})
    lines += [
        f"**First differing request: rid {first.get('rid')}**",
        "",
        pipe_table(
            pd.DataFrame(
                {"variant": list(values), "prefix_hit_tokens": [values[v] for v in values]}
            )
        ),
    ]
    return lines


def _hicache_block(metrics: pd.DataFrame | None) -> list[str]:
    """The HiCache section (runs with HiCache on): hit rate split by tier, traffic per link,
    host pool and I/O times per variant (:func:`radixbench.reports.hicache.tier_table`)."""
    if metrics is None or "device_hit_rate" not in metrics.columns:
        return []
    from radixbench.reports.hicache import tier_table

    return [
        "## HiCache",
        "",
        "Prefix hit rate by tier (fraction of input tokens: on the device, loaded back from the "
        "host, brought from storage by the request's prefetch), GB moved per link, mean "
        "utilisation of the host link (both directions over its capacity) and of the host "
        "pool, mean load-back / prefetch / I/O-wait time per request (ms). Plots: "
        "`tier_hits_over_time`, `links_over_time`.",
        "",
        pipe_table(tier_table(metrics)),
        "",
    ]


def write_report_md(
    run_dir: Path | str,
    *,
    meta: RunMeta,
    op_summary: pd.DataFrame,
    variant_summary: pd.DataFrame,
    speedups: pd.DataFrame,
    equivalence: Mapping[str, Any],
    plots: Mapping[str, Path],
    tables: Mapping[str, tuple[Path, Path | None]],
    verdicts: pd.DataFrame | None = None,
    metrics: pd.DataFrame | None = None,
    answer: Answer | None = None,
    summary: list[str] | None = None,
) -> Path:
    """Write ``<run_dir>/report.md`` atomically and return its path.

    ``summary``: the PR-comment block (:func:`radixbench.reports.pr_summary.summary_block`),
    first, under a rule, so it can be copied whole.
    ``meta`` is rendered by :mod:`radixbench.reports.runmeta` (run fields, clock mode,
    config hash, environment block, hit-rate ceiling; all optional). ``equivalence`` has
    ``ok`` (bool), ``n_requests`` (int), ``variants`` (list of names) and ``first_diff``
    (``None`` or ``{"rid": int, "values": {variant: prefix_hit_tokens}}``); a failed check is
    flagged at the top and detailed with the first differing request. ``plots`` maps a name to
    a PNG path and ``tables`` a stem to its ``(parquet, csv)`` paths (csv None: not written,
    :func:`table_links`); both are linked relative
    to ``run_dir``. ``verdicts`` (:func:`~radixbench.reports.verdicts.verdict_table`) and
    ``metrics`` (serving metrics per variant) are rendered when given. Latencies in the tables
    are ns (``total_ms`` ms), times s, lengths tokens. ``answer``
    (:func:`~radixbench.reports.headline.answer`) leads the report: overload flags, the
    headline line per compared axis, the serving effect.
    """
    run_dir = Path(run_dir)
    _, description = scenario_parts(meta)
    lines = [f"# radixbench report: {run_title(meta)}", ""]
    lines += [f"_{description}_", ""] if description else []
    if equivalence_status(equivalence) == "FAILED":
        lines += [
            "> **WARNING: EQUIVALENCE FAILED** - variants disagree on prefix hits "
            "(see [Equivalence](#equivalence-failed)).",
            "",
        ]
    if summary:
        body = summary[1:]  # its own heading left out; the title above says what ran
        while body and not body[0]:
            body = body[1:]
        lines += ["## Summary (for a PR comment)", "", *body, "", "---", ""]
    lines += answer_block(answer)
    achieved = float(variant_summary["prefix_hit_rate"].median()) if len(variant_summary) else None
    ceiling = hit_rate_text(achieved, meta)
    # the hit rate with its bounds belongs to the answer: on the first screen
    lines += [f"**Prefix hit rate**: {ceiling}.", ""] if ceiling else []
    lines += ["## Run", "", *_meta_block(meta), ""]
    lines += [*_verdict_block(verdicts)]
    lines += [*equivalence_block(equivalence), ""]
    lines += [*_environment_block(meta), ""]
    lines += [*_implementations_block(meta)]
    lines += [
        "## Variants",
        "",
        "Requests, prefix hits (tokens; hit rate over finished requests), TTFT and E2E (s).",
        "",
        pipe_table(variant_summary),
        "",
        *(["## Serving metrics", "", pipe_table(metrics), ""] if metrics is not None else []),
        *_hicache_block(metrics),
        "## Speed-ups",
        "",
        "Ratio = baseline / variant (> 1: the variant is faster than its baseline). `evict` "
        "compares evictors and `match_prefix` compares matchers, other axes held equal; an "
        "`<impl>/<flatten>` variant (another cache implementation) is compared with "
        "radixbench's baseline evictor/matcher on `match_prefix`, `insert` and `evict`.",
        "",
        pipe_table(speedups),
        "",
        "## Per-op latency",
        "",
        "Latency per call in ns; `total_ms` is the summed time in ms.",
        "",
        pipe_table(op_summary),
        "",
        "## Plots",
        "",
    ]
    if plots:
        for name, path in plots.items():
            lines += [f"### {name}", "", f"![{name}]({_rel(path, run_dir)})", ""]
    else:
        lines += ["_no plots_", ""]
    lines += ["## Tables", ""]
    if tables:
        lines += table_links(tables, run_dir)
    else:
        lines.append("_no tables_")
    text = "\n".join(lines) + "\n"
    path = run_dir / "report.md"
    with atomic_paths(path) as (tmp,):
        tmp.write_text(text, encoding="utf-8")
    return path
