"""Issue 31 item 8: in a cluster run equivalence is checked within a router across cache
variants, never across routers, and report.html, report.md, the terminal and the exit code say
the same thing (report.html said "EQUIVALENCE FAILED" for a router comparison while the rest
said nothing and the exit code was 0)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.harness.experiments import compare as compare_mod

ARGV = [
    "compare", "multi-turn", "--requests", "40", "--matchers", "galloping",
    "--instances", "2", "--routers", "round-robin,cache-aware", "--no-progress",
]  # fmt: skip


def _run(tmp_path: Path, capsys, *extra: str) -> tuple[int, str, str, str]:
    """(exit code, terminal output, report.md, report.html) of one cluster compare."""
    out = tmp_path / "runs"
    code = main([*ARGV, *extra, "--out", str(out)])
    printed = capsys.readouterr().out
    (run,) = out.iterdir()
    md = (run / "report.md").read_text(encoding="utf-8")
    html = (run / "report.html").read_text(encoding="utf-8")
    return code, printed, md, html


def test_routers_alone_have_nothing_to_check(tmp_path: Path, capsys) -> None:
    code, printed, md, html = _run(tmp_path, capsys, "--evictors", "heapify")
    assert code == 0
    assert "equivalence: nothing to check — each router ran one cache variant" in printed
    assert "## Equivalence: NOTHING TO CHECK" in md and "Each router ran one cache variant" in md
    assert "Equivalence: NOTHING TO CHECK: each router ran one cache variant" in html
    for text in (printed, md, html):
        assert "FAILED" not in text and "DIVERGED" not in text
    assert "<h3>Serving effect</h3><ul></ul>" not in html  # no empty heading


def test_cache_variants_agree_within_each_router(tmp_path: Path, capsys) -> None:
    code, printed, md, html = _run(tmp_path, capsys, "--evictors", "heapify,lru-list")
    assert code == 0
    sentence = "within each router (2 + 2 variants) the variants saw identical"
    assert f"equivalence: OK — {sentence}" in printed
    assert "## Equivalence: PASS" in md and sentence.capitalize() in md
    assert '<p class="pass">Equivalence: PASS: ' + sentence in html
    for text in (printed, md, html):
        assert "FAILED" not in text and "DIVERGED" not in text


def test_a_divergence_within_a_router_fails_everywhere(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One cache variant of one router sees one token more on its last request (a broken
    evictor would): every output says so and the exit code is 1."""
    real = compare_mod.check_equivalence

    def broken(requests: pd.DataFrame, *args, **kwargs):
        r = requests.copy()
        last = r["variant"] == r["variant"].iloc[-1]
        r.loc[last & (r["rid"] == r["rid"].max()), "prefix_hit_tokens"] += 1
        return real(r, *args, **kwargs)

    monkeypatch.setattr(compare_mod, "check_equivalence", broken)
    code, printed, md, html = _run(tmp_path, capsys, "--evictors", "heapify,lru-list")
    assert code == 1
    assert "equivalence: DIVERGED — two variants of one router do NOT produce" in printed
    assert "## Equivalence: FAILED" in md and "WARNING: EQUIVALENCE FAILED" in md
    assert "EQUIVALENCE FAILED: two variants of one router" in html
    assert "lru-list/galloping/numpy/router=cache-aware/instances=2" in md
