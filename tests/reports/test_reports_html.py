"""Tests for radixbench.reports.html: self-contained report.html, rendered in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pandas as pd
import pytest

from radixbench.reports.html import frame_html, write_report_html

#: Appended to a *copy* of the report: after the load event (all images decoded) it records
#: what the browser actually rendered in a <pre id="rb-check"> that --dump-dom prints.
_PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images].map(i => ({ok: i.complete && i.naturalWidth > 0,
                                              w: i.naturalWidth, h: i.naturalHeight}));
  const tables = [...document.querySelectorAll('table[id]')].map(t => ({
      id: t.id, rows: t.tBodies.length ? t.tBodies[0].rows.length : 0,
      height: t.getBoundingClientRect().height}));
  const headings = [...document.querySelectorAll('h2')].map(h => h.textContent);
  const p = document.createElement('pre');
  p.id = 'rb-check';
  p.textContent = JSON.stringify({imgs, tables, headings});
  document.body.appendChild(p);
});
</script>"""

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=10000",
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium is not installed (CI installs Debian's chromium in .ci/run)")


def test_report_html_is_self_contained(rendered_run):
    result, _ = rendered_run
    text = result["report_html"].read_text(encoding="utf-8")
    assert result["report_html"].name == "report.html"
    srcs = re.findall(r'src="([^"]*)"', text)
    assert len(srcs) == len(result["plots"])
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r'(href|src)="(?!data:)', text)  # no external or relative resource
    assert "PASS" in text and "EQUIVALENCE FAILED" not in text


def test_failed_equivalence_is_loud_in_html(tmp_path, meta, equivalence_bad):
    path = write_report_html(tmp_path, meta=meta, equivalence=equivalence_bad, frames={}, plots={})
    text = path.read_text(encoding="utf-8")
    assert "EQUIVALENCE FAILED" in text and "rid 17" in text and "PASS" not in text


def test_frame_html_escapes_and_marks_verdicts() -> None:
    df = pd.DataFrame({"name": ["<b>&|"], "verdict": ["faster"], "x": [1.5]})
    out = frame_html(df, "t")
    assert "<td>&lt;b&gt;&amp;|</td>" in out and '<td class="faster">faster</td>' in out
    assert '<td class="num">1.5</td>' in out
    assert "no rows" in frame_html(df.iloc[0:0], "t")


@pytest.mark.e2e  # headless Chromium
def test_report_renders_in_headless_chromium(tmp_path, rendered_run):
    chromium = _chromium()
    result, metrics_df = rendered_run
    probe = tmp_path / "probe.html"
    html = result["report_html"].read_text(encoding="utf-8")
    probe.write_text(html.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    match = re.search(r'<pre id="rb-check">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"chromium rc={proc.returncode}; stderr tail: {proc.stderr[-2000:]}"
    check = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert len(check["imgs"]) == len(result["plots"]) >= 9
    assert all(img["ok"] and img["w"] > 100 and img["h"] > 100 for img in check["imgs"])
    rows = {t["id"]: t for t in check["tables"]}
    expected = {
        "Verdicts": len(result["verdicts"]),
        "Variants": len(result["variant_summary"]),
        "Serving metrics": len(metrics_df),
        "Speed-ups": len(result["speedups"]),
        "Per-op latency": len(result["op_summary"]),
    }
    assert len(rows) == len(expected)
    for table, n in zip(rows.values(), expected.values(), strict=True):
        assert table["rows"] == n > 0
        assert table["height"] > 10  # laid out, not collapsed
    for heading in ("Run", "Environment", *expected, "Plots"):
        assert heading in check["headings"]
