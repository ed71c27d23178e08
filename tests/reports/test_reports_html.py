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
    assert rows.pop("t-summary")["rows"] > 0  # the PR-comment summary's table, first
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


def test_numbers_never_wrap_mid_digit() -> None:
    """Numeric cells, and text cells that read as a number or a ratio with its interval, are
    class ``num``, which the style sheet keeps on one line; no cell may break anywhere."""
    from radixbench.reports.html import CSS

    df = pd.DataFrame({"n": [316800], "ratio": ["1.02 [0.98–1.05]"], "t": ["12.5 %"],
                       "variant": ["heapify/linear/numpy"]})  # fmt: skip
    out = frame_html(df, "t")
    for text in ("316800", "1.02 [0.98–1.05]", "12.5 %"):
        assert f'<td class="num">{text}</td>' in out, out
    assert "<td>heapify/linear/numpy</td>" in out
    num_rule = re.search(r"td\.num \{([^}]*)\}", CSS)
    assert num_rule and "white-space: nowrap" in num_rule[1], CSS
    # only long unspaced text (paths, hashes: class brk) may break anywhere, never a number
    assert re.findall(r"([\w.]+) \{[^}]*overflow-wrap: anywhere", CSS) == ["td.brk"], CSS
    long = frame_html(pd.DataFrame({"sha": ["e0b3ac1079419f344edc791901d2f45d"]}), "t")
    assert '<td class="brk">e0b3ac1079419f344edc791901d2f45d</td>' in long


def test_run_rows_read_as_text_and_hide_empty_lists(tmp_path, meta) -> None:
    """The events row reads ``variant: count``, never a dict; an empty list (no skipped lines),
    recorded or carried in ``extra``, shows no row."""
    import dataclasses

    m = dataclasses.replace(meta, events={"heapify/linear": 581, "lru-list/linear": 590},
                            extra={"skipped_line_errors": [], "point": {}, "rate": 4})  # fmt: skip
    text = write_report_html(tmp_path, meta=m, equivalence={"ok": True}, frames={}, plots={})
    body = text.read_text(encoding="utf-8")
    rows = dict(re.findall(r"<tr><th>([^<]*)</th><td[^>]*>([^<]*)</td></tr>", body))
    assert rows["simulated events"] == "heapify/linear: 581, lru-list/linear: 590"
    assert "skipped_line_errors" not in rows and "point" not in rows and rows["rate"] == "4"
    assert "first skipped lines" not in rows
    assert not [v for v in rows.values() if "{" in v or v in ("[]", "none")], rows


#: Records, after the load event, how far each table reaches past the box it scrolls in.
_LAYOUT_PROBE = """<script>
window.addEventListener('load', () => {
  const over = [...document.querySelectorAll('table[id]')].map(t => ({id: t.id,
      over: t.parentElement.scrollWidth - t.parentElement.clientWidth,
      right: t.getBoundingClientRect().right}));
  const p = document.createElement('pre');
  p.id = 'rb-check';
  p.textContent = JSON.stringify({over, body: document.body.getBoundingClientRect().right,
                                  page: document.documentElement.scrollWidth});
  document.body.appendChild(p);
});
</script>"""


def test_wide_tables_wrap_inside_the_page(tmp_path, meta) -> None:
    """Issue 31 item 11: the Implementations table (a path, a class, a sha256) and a cluster
    run's Routers table (17 measures, long variant names) overflowed sideways in a 1,400-px
    window; the first wraps to the page (headers at ``_``, paths and hashes anywhere), the
    second shows one column per router, so neither needs its scroll bar."""
    import dataclasses

    from radixbench.reports.routing_report import router_view

    chromium = _chromium()
    names = ["round-robin", "shortest-queue", "cache-aware", "precise"]
    cols = ["instances", "completed", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_mean_s",
            "e2e_mean_s", "output_throughput", "prefix_hit_rate", "load_imbalance",
            "route_p50_us", "route_p99_us", "overloaded_instances", "predicted_share",
            "overpredicted_share", "prediction_error"]  # fmt: skip
    routers = pd.DataFrame(
        {"variant": [f"heapify/galloping/numpy/router={r}/instances=8" for r in names],
         "label": names, "router": names,
         **{c: [0.5623375863394557 * (i + 1) for i in range(4)] for c in cols}}
    )  # fmt: skip
    sha = "e0b3ac1079419f344edc791901d2f45dbd267d1a593cb19f49d4463898c8a00d"
    impl = {"impl": "radixbench", "spec": "radixbench", "version": "0.1.0",
            "origin": "/work/wt/reports/.venv/lib/python3.11/site-packages/radixbench/cache",
            "class": "radixbench.cache.radix_cache.RadixCache", "tree_core": None,
            "files": {"cache/radix_cache.py": sha}, "files_sha256": sha}  # fmt: skip
    m = dataclasses.replace(meta, implementations=[impl])
    page = write_report_html(
        tmp_path, meta=m, equivalence={"ok": True}, frames={"Routers": router_view(routers)},
        plots={},
    )  # fmt: skip
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.read_text(encoding="utf-8").replace("</body>", _LAYOUT_PROBE + "</body>"),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         "--window-size=1400,2000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    match = re.search(r'<pre id="rb-check">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"chromium rc={proc.returncode}; stderr tail: {proc.stderr[-2000:]}"
    check = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    tables = {t["id"]: t for t in check["over"]}
    assert {"t-impls", "t-0"} <= set(tables)
    for tid in ("t-impls", "t-0"):
        assert tables[tid]["over"] <= 1, (tid, check)  # no scrolling inside its box
        assert tables[tid]["right"] <= check["body"] + 1, (tid, check)
