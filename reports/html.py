"""``report.html``: a self-contained HTML twin of ``report.md``.

Same sections as :mod:`radixbench.reports.markdown` (run, verdicts, equivalence, environment,
implementations, variants, serving metrics, speed-ups, per-op latency, plots), with every plot
embedded as a base64 ``data:image/png`` URI and inline CSS, so the single file opens anywhere
with no network and no neighbouring files. Written atomically to ``<run_dir>/report.html``.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.headline import Answer
from radixbench.reports.impls import implementation_frames
from radixbench.reports.markdown import format_cell
from radixbench.reports.record import RunMeta
from radixbench.reports.runmeta import environment_rows, hit_rate_text, run_rows

__all__ = ["CSS", "answer_html", "frame_html", "write_report_html"]

#: The inline style sheet of the HTML reports (report.html, diff.html).
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.fail { background: #fdd; border: 2px solid #c00; padding: 0.6em; font-weight: bold; }
.pass { background: #dfd; border: 1px solid #080; padding: 0.6em; }
.faster { color: #070; font-weight: bold; } .slower { color: #b00; font-weight: bold; }
img { max-width: 100%; border: 1px solid #eee; }
.scroll { overflow-x: auto; max-width: 100%; } td { overflow-wrap: anywhere; }
.load { background: #eef; border: 1px solid #88a; padding: 0.6em; }
"""


def frame_html(df: pd.DataFrame, table_id: str) -> str:
    """``df`` as an HTML ``<table id=table_id>`` (cells via ``format_cell``, numbers
    right-aligned, ``verdict`` cells classed by value); an empty frame gives ``<p>no rows</p>``."""
    if df.empty:
        return f'<p id="{html.escape(table_id)}"><em>no rows</em></p>'
    numeric = [
        pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        for c in df.columns
    ]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = []
    for row in df.itertuples(index=False, name=None):
        cells = []
        for col, value, num in zip(df.columns, row, numeric, strict=True):
            cls = ' class="num"' if num else ""
            if col == "verdict":
                cls = f' class="{html.escape((str(value).split() or ["none"])[0])}"'
            text = html.escape(format_cell(value).replace("\\|", "|"))
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (  # a wide table scrolls inside its own box: the page fits a 1,400-px window
        f'<div class="scroll"><table id="{html.escape(table_id)}"><thead><tr>{head}</tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def answer_html(answer: Answer | None) -> str:
    """Overload flags (class ``fail``) and the load line, then ``Answer`` (headline lines) and
    ``Serving effect`` as lists; empty without an answer."""
    if answer is None:
        return ""
    out = [
        f'<p class="{"fail" if t.startswith("OVERLOADED") else "load"}">{html.escape(t)}</p>'
        for t in answer.load
    ]
    items = "".join(f"<li>{_inline(t)}</li>" for t in answer.headline)
    out.append(f"<h2>Answer</h2><ul>{items or '<li>no axis compared</li>'}</ul>")
    serving = "".join(f"<li>{_inline(t)}</li>" for t in answer.serving)
    out.append(f"<h3>Serving effect</h3><ul>{serving}</ul>")
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
    variants = ", ".join(map(str, eq.get("variants", [])))
    if eq.get("ok"):
        return (
            f'<p class="pass">PASS: all variants ({html.escape(variants)}) produced identical '
            f"prefix_hit_tokens for all {html.escape(str(eq.get('n_requests', 'n/a')))} "
            "requests.</p>"
        )
    first = eq.get("first_diff") or {}
    detail = (
        f" First differing request: rid {html.escape(str(first.get('rid')))}: "
        f"{html.escape(str(first.get('values')))}"
        if first
        else " No first differing request was recorded."
    )
    return (
        '<p class="fail">EQUIVALENCE FAILED: the variants do NOT produce identical '
        f"prefix_hit_tokens, so latency comparisons are not like-for-like.{detail}</p>"
    )


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
) -> Path:
    """Write ``<run_dir>/report.html`` atomically and return its path.

    ``answer`` (:func:`~radixbench.reports.headline.answer`) leads, as in ``report.md``.
    ``frames``: section title -> table (None entries are skipped), rendered in order with
    table ids ``t-<index>``; the ``Variants`` frame, when present, supplies the achieved prefix
    hit rate shown beside ``meta["hit_rate_ceiling"]``. ``plots``: name -> PNG path, each read
    and embedded (``OSError`` if one is missing).
    """
    run_dir = Path(run_dir)
    title = html.escape(str(meta.scenario))
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>radixbench report: {title}"
        f"</title><style>{CSS}</style></head><body>",
        f"<h1>radixbench report: {title}</h1>",
        _equivalence_html(equivalence),
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
