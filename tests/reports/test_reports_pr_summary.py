"""The PR-comment block and the titles (issue 31 item 11): ``--summary-only``'s block lists the
axes NOT COMPARED (with why) and the reference lines, report.html carries report.md's
"Summary (for a PR comment)" table, and every title states the requests and KV pool that ran,
not the scenario description's."""

from __future__ import annotations

import re

import pytest

from radixbench.reports.pipeline import write_report
from radixbench.reports.record import RunMeta

from .conftest import OP_COUNTS, make_ops

NOTE = "the reference sglang does not run here: no module named 'sglang'"


@pytest.fixture(scope="module")
def no_evicts(tmp_path_factory, requests_module):
    """A rendered run whose evict never ran (the evictor axis NOT COMPARED), with a reference
    that could not run (its note is the reference line), 200 requests of a scenario described
    as 3,000 through a 96k-token pool, run at 50,000 tokens."""
    meta = RunMeta(
        scenario="shared-prefix-serving: Served shared-prefix chat: 3,000 requests at 40 "
        "req/s, 96k-token KV pool",
        requests=200,
        kv_capacity_tokens=50_000,
        seed=1,
        clock="isolated",
        reference_note=NOTE,
        command_line=["radixbench", "compare", "--requests", "200"],
    )
    ops = make_ops(counts={op: n for op, n in OP_COUNTS.items() if op != "evict"})
    run_dir = tmp_path_factory.mktemp("pr")
    eq = {
        "ok": True,
        "n_requests": 300,
        "variants": sorted(set(ops["variant"])),
        "first_diff": None,
    }
    return write_report(run_dir, requests_module, ops, meta, eq, n_resamples=50)


@pytest.fixture(scope="module")
def requests_module():
    from .conftest import make_requests

    return make_requests()


def test_block_lists_axes_not_compared_and_the_reference(no_evicts) -> None:
    block = "\n".join(no_evicts["summary"])
    assert "- evictor: NOT COMPARED — evict ran 0 times" in block
    assert f"- Reference: {NOTE}." in block
    assert "| match_prefix |" in block  # the compared axis keeps its row
    md = no_evicts["report_md"].read_text(encoding="utf-8")
    section = md.split("## Summary (for a PR comment)")[1].split("\n---\n")[0]
    assert "evictor: NOT COMPARED" in section and NOTE in section


def test_html_has_the_summary_table(no_evicts) -> None:
    page = no_evicts["report_html"].read_text(encoding="utf-8")
    assert "<h2>Summary (for a PR comment)</h2>" in page
    table = re.search(r'<table id="t-summary">(.*?)</table>', page, re.S)
    assert table and "match_prefix" in table[1] and "candidate p50 µs" in table[1]
    assert "evictor: NOT COMPARED" in page and "Reproduce: <code>radixbench compare" in page
    assert page.index("Summary (for a PR comment)") < page.index("<h2>Answer</h2>")
    # the Markdown itself, to paste
    assert "### radixbench: shared-prefix-serving" in page and "|---|" in page


def test_titles_state_what_ran(no_evicts) -> None:
    what = "shared-prefix-serving — 200 requests, KV pool 50,000 tokens"
    md = no_evicts["report_md"].read_text(encoding="utf-8")
    page = no_evicts["report_html"].read_text(encoding="utf-8")
    assert md.splitlines()[0] == f"# radixbench report: {what}"
    assert f"<h1>radixbench report: {what}</h1>" in page
    assert f"<title>radixbench report: {what}</title>" in page
    assert no_evicts["summary"][0] == f"### radixbench: {what}"
    for title in (md.splitlines()[0], no_evicts["summary"][0]):
        assert "3,000" not in title and "96k" not in title
