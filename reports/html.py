"""``report.html``: a self-contained HTML twin of ``report.md``.

Same sections as :mod:`radixbench.reports.markdown` (run, verdicts, equivalence, environment,
implementations, variants, serving metrics, speed-ups, per-op latency, plots), with every plot
embedded as a base64 ``data:image/png`` URI and inline CSS, so the single file opens anywhere
with no network and no neighbouring files. Written atomically to ``<run_dir>/report.html``.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.equivalence import equivalence_sentence, equivalence_status
from radixbench.reports.headline import Answer
from radixbench.reports.impls import implementation_frames
from radixbench.reports.markdown import format_cell
from radixbench.reports.record import RunMeta
from radixbench.reports.runmeta import (
    environment_rows,
    hit_rate_text,
    run_rows,
    run_title,
    scenario_parts,
)

__all__ = ["CSS", "answer_html", "frame_html", "summary_html", "write_report_html"]

#: The inline style sheet of the HTML reports (report.html, diff.html).
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.fail { background: #fdd; border: 2px solid #c00; padding: 0.6em; font-weight: bold; }
.pass { background: #dfd; border: 1px solid #080; padding: 0.6em; }
.faster { color: #070; font-weight: bold; } .slower { color: #b00; font-weight: bold; }
img { max-width: 100%; border: 1px solid #eee; }
.scroll { overflow-x: auto; max-width: 100%; } td { overflow-wrap: break-word; }
td.brk { overflow-wrap: anywhere; min-width: 8em; }
p.sub { color: #555; margin-top: -0.5em; } pre.md { white-space: pre-wrap; font-size: 0.8em; }
.load { background: #eef; border: 1px solid #88a; padding: 0.6em; }
"""


#: A cell that reads as a number (or a ratio with its interval: "1.02 [0.98–1.05]", "12.5 %"),
#: kept on one line: a table squeezed into the page must not break "316,800" into "316,8" / "00".
_NUMBER = re.compile(
    r"[-+]?(\d[\d,]*\.?\d*|\.\d+)(e[-+]?\d+)?"  # 316,800  3.7  1e-05
    r"( ?(%|µs|us|ns|ms|s|x))?"  # a unit
    r"( \[[-+\d.,e]+–[-+\d.,e]+\])?"  # an interval
)


#: A text cell longer than this without a space (a path, a sha256, a variant name) may wrap
#: anywhere (class ``brk``) rather than push its table off the page; its text is unchanged
#: (it still copies and searches whole).
_LONG_TOKEN = 20


def _header(text: str) -> str:
    """A column header, escaped, with a line-break opportunity (``<wbr>``) after each ``_``:
    ``output_throughput`` wraps as ``output_`` / ``throughput``."""
    return html.escape(text).replace("_", "_<wbr>")


def frame_html(df: pd.DataFrame, table_id: str) -> str:
    """``df`` as an HTML ``<table id=table_id>`` (cells via ``format_cell``, numbers
    right-aligned and never wrapped (class ``num``: numeric columns and cells that read as a
    number), ``verdict`` cells classed by value, long unspaced text breakable anywhere (class
    ``brk``) and headers at ``_``, so a wide table wraps to the page before it scrolls in its
    own box); an empty frame gives ``<p>no rows</p>``."""
    if df.empty:
        return f'<p id="{html.escape(table_id)}"><em>no rows</em></p>'
    numeric = [
        pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        for c in df.columns
    ]
    head = "".join(f"<th>{_header(str(c))}</th>" for c in df.columns)
    body = []
    for row in df.itertuples(index=False, name=None):
        cells = []
        for col, value, num in zip(df.columns, row, numeric, strict=True):
            plain = format_cell(value).replace("\\|", "|")
            cls = ' class="num"' if num or _NUMBER.fullmatch(plain) else ""
            text = html.escape(plain)
            if col == "verdict":
                cls = f' class="{html.escape((str(value).split() or ["none"])[0])}"'
            elif not cls and len(plain) > _LONG_TOKEN and " " not in plain:
                cls = ' class="brk"'  # a path, a hash, a variant name
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (  # a wide table scrolls inside its own box: the page fits a 1,400-px window
        f'<div class="scroll"><table id="{html.escape(table_id)}"><thead><tr>{head}</tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def answer_html(answer: Answer | None) -> str:
    """Overload flags (class ``fail``) and the load line, then ``Answer`` (headline lines) and
    ``Serving effect`` (when it has lines) as lists; empty without an answer."""
    if answer is None:
        return ""
    out = [
        f'<p class="{"fail" if t.startswith("OVERLOADED") else "load"}">{html.escape(t)}</p>'
        for t in answer.load
    ]
    items = "".join(f"<li>{_inline(t)}</li>" for t in answer.headline)
    out.append(f"<h2>Answer</h2><ul>{items or '<li>no axis compared</li>'}</ul>")
    serving = "".join(f"<li>{_inline(t)}</li>" for t in answer.serving)
    if serving:  # a cluster's answer ranks routers by serving metrics: no section of its own
        out.append(f"<h3>Serving effect</h3><ul>{serving}</ul>")
    return "".join(out)


#: A Markdown pipe table's separator row (``|---|---:|``).
_SEPARATOR = re.compile(r"\|(\s*:?-+:?\s*\|)+")


def _cells(line: str) -> list[str]:
    """The cells of one Markdown pipe-table row (``\\|`` is a literal bar)."""
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [c.strip().replace("\\|", "|") for c in cells]


def summary_html(lines: list[str]) -> str:
    """The PR-comment block (:func:`~radixbench.reports.pr_summary.summary_block`'s Markdown
    lines) as the HTML section ``Summary (for a PR comment)``: its table (``t-summary``,
    through :func:`frame_html`), notes and bullets, then the Markdown itself to copy, in a
    collapsed ``<pre>``. Empty for no lines."""
    if not lines:
        return ""
    out = ["<h2>Summary (for a PR comment)</h2>"]
    table: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if table:
            head, *rows = table
            out.append(frame_html(pd.DataFrame(rows, columns=head), "t-summary"))
            table.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(t)}</li>" for t in items) + "</ul>")
            items.clear()

    text = "\n".join(lines)  # an element may hold several lines (a whole table)
    for line in text.split("\n")[1:]:  # the first is the block's own heading
        if line.startswith("|"):
            if not _SEPARATOR.fullmatch(line.strip()):
                table.append(_cells(line))
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush()
        if line.strip():
            out.append(f"<p>{_inline(line.strip().strip('_'))}</p>")
    flush()
    source = html.escape(text)
    out.append(
        "<details><summary>Markdown of this summary, to paste into a PR comment</summary>"
        f'<pre class="md">{source}</pre></details>'
    )
    return "".join(out)


def _hit_rate_html(variants: pd.DataFrame | None, meta: RunMeta) -> str:
    """The achieved prefix hit rate with its ceiling and Belady bound (first screen)."""
    if variants is None or not len(variants) or "prefix_hit_rate" not in variants:
        return ""
    text = hit_rate_text(float(variants["prefix_hit_rate"].median()), meta)
    return f"<p><strong>Prefix hit rate</strong>: {_inline(text)}</p>" if text else ""


def _inline(text: str) -> str:
    """``text`` escaped, with Markdown inline code (`x`) as <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _dl(rows: list[tuple[str, str]]) -> str:
    items = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<div class="scroll"><table>{items}</table></div>'


def _equivalence_html(eq: Mapping[str, Any]) -> str:
    """The equivalence verdict (:mod:`radixbench.reports.equivalence`): a red ``fail`` box
    when it failed, green ``pass`` when it passed, neutral when there was nothing to check."""
    status = equivalence_status(eq)
    text = _inline(equivalence_sentence(eq))
    if status == "FAILED":
        return (
            f'<p class="fail">EQUIVALENCE FAILED: {text}, so latency comparisons are not '
            "like-for-like.</p>"
        )
    cls = "pass" if status == "PASS" else "load"
    return f'<p class="{cls}">Equivalence: {status}: {text}.</p>'


def _img(name: str, path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (
        f'<h3>{html.escape(name)}</h3><img alt="{html.escape(name)}" '
        f'src="data:image/png;base64,{data}">'
    )


def write_report_html(
    run_dir: Path | str,
    *,
    meta: RunMeta,
    equivalence: Mapping[str, Any],
    frames: Mapping[str, pd.DataFrame | None],
    plots: Mapping[str, Path],
    answer: Answer | None = None,
    summary: list[str] | None = None,
    heading: str = "radixbench report",
) -> Path:
    """Write ``<run_dir>/report.html`` atomically and return its path.

    The title states what ran (:func:`~radixbench.reports.runmeta.run_title`: requests, KV
    pool, instances), after ``heading``; the scenario's description follows. ``summary``: the
    PR-comment block (:func:`~radixbench.reports.pr_summary.summary_block`), first, as in
    ``report.md`` (:func:`summary_html`). ``answer``
    (:func:`~radixbench.reports.headline.answer`) leads, as in ``report.md``.
    ``frames``: section title -> table (None entries are skipped), rendered in order with
    table ids ``t-<index>``; the ``Variants`` frame, when present, supplies the achieved prefix
    hit rate shown beside ``meta["hit_rate_ceiling"]``. ``plots``: name -> PNG path, each read
    and embedded (``OSError`` if one is missing).
    """
    run_dir = Path(run_dir)
    title = html.escape(run_title(meta))
    _, description = scenario_parts(meta)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>radixbench report: {title}"
        f"</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(heading)}: {title}</h1>",
        f'<p class="sub">{html.escape(description)}</p>' if description else "",
        _equivalence_html(equivalence),
        summary_html(summary or []),
        answer_html(answer),
        _hit_rate_html(frames.get("Variants"), meta),
        "<h2>Run</h2>",
        _dl(run_rows(meta)),
        "<h2>Environment</h2>",
        _dl(environment_rows(meta)),
    ]
    impls = implementation_frames(meta)
    if impls is not None:
        parts += [
            "<h2>Implementations</h2>",
            frame_html(impls[0], "t-impls"),
            "<details><summary>sha256 of every file loaded</summary>",
            frame_html(impls[1], "t-impl-files"),
            "</details>",
        ]
    for i, (section, df) in enumerate(frames.items()):
        if df is not None:
            parts += [f"<h2>{html.escape(section)}</h2>", frame_html(df, f"t-{i}")]
    parts.append("<h2>Plots</h2>")
    parts += [_img(name, path) for name, path in plots.items()]
    parts.append("</body></html>")
    path = run_dir / "report.html"
    with atomic_paths(path) as (tmp,):
        tmp.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
