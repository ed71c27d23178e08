"""``bench peers``: radixbench's side of a case run for real (the compare command in a child
process, its figures read back), the mocker's report parsed from a report of its shape, the
hit-rate explanation from per-request data, and the mocker itself where ``make peers`` made its
venv (skipped otherwise)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from radixbench.bench.peers import (
    CASES,
    PeerRun,
    compile_sources,
    mocker_python,
    parse_mocker,
    parse_radixbench,
    run_case,
)
from radixbench.bench.peers_report import case_text, floor_line, target_line, why

CASE_A = next(c for c in CASES if c.key == "a")
CASE_C = next(c for c in CASES if c.key == "c")


def _run(tool: str, hits: list[int], inst: list[int], cpu: float = 1.0) -> PeerRun:
    return PeerRun(tool, cpu, cpu / 2, 2.0, 100.0, sum(hits) / 10_000, 1.0, 2.0, inst, hits)


def test_parse_mocker_reads_its_summary_and_per_request_lists() -> None:
    doc = {
        "summary": {"prefix_cache_reused_ratio": 0.25, "median_ttft_ms": 12.5, "p90_ttft_ms": 40},
        "sim_cpu_s": 0.3,
        "rss_mb": 181.0,
        "instance": [0, 1, None],
        "hits": [0, 512, None],
    }
    r = parse_mocker(doc, 0.6, 1.5)
    assert (r.cpu_s, r.sim_cpu_s, r.wall_s, r.rss_mb) == (0.6, 0.3, 1.5, 181.0)
    assert (r.hit_rate, r.ttft_p50_ms, r.ttft_p90_ms) == (0.25, 12.5, 40.0)
    assert r.instance == [0, 1, 0] and r.hits == [0, 512, 0]
    with pytest.raises(KeyError, match="prefix_cache_reused_ratio"):
        parse_mocker({"summary": {}, "sim_cpu_s": 0, "rss_mb": 0}, 1, 1)


def test_why_tells_routing_from_timing_from_block_mapping() -> None:
    # the same partition, instances relabelled (0<->1): request 2 differs by a whole block,
    # request 3 by part of one; request 5 ran elsewhere
    mocker = _run("mocker", [0, 512, 0, 100, 0, 0], [0, 1, 0, 1, 0, 1])
    rb = _run("radixbench", [0, 512, 512, 116, 0, 0], [1, 0, 1, 0, 1, 1])
    text = why(CASE_C, mocker, rb, "radixbench round-robin")
    assert "2 of 6 requests reused a different prefix" in text
    assert "1 requests ran on another instance" in text
    assert "1 differ by whole 512-token trace blocks" in text
    assert "1 by part of a block" in text
    same = why(CASE_C, mocker, mocker, "x")
    assert "the same hit rate" in same


def test_target_line_judges_whole_process_cpu() -> None:
    runs = {"mocker round_robin": _run("mocker", [0], [0], 1.0)}
    runs["radixbench one server"] = _run("radixbench", [0], [0], 2.5)
    assert "MET: one server 2.5x" in target_line(CASE_A, runs)
    runs["radixbench one server"] = _run("radixbench", [0], [0], 3.5)
    assert "NOT MET" in target_line(CASE_A, runs)
    assert "not measured" in target_line(
        CASE_A, {"radixbench one server": runs["radixbench one server"]}
    )


def test_floor_line_says_whether_the_target_is_out_of_reach() -> None:
    mocker = _run("mocker", [0], [0], 1.0)
    r = _run("radixbench", [0], [0], 5.0)
    r.timed_cpu_s, r.startup_cpu_s = 1.5, 1.6  # 3.1 s: over the 3x of (a), under the 4x of (c)
    over = floor_line(CASE_A, "radixbench one server", r, mocker)
    assert "1.50 s + a Python importing torch 1.60 s = 3.10 s CPU = 3.1x the mocker" in over
    assert "the 3x target is out of reach" in over
    under = floor_line(CASE_C, "radixbench round-robin", r, mocker)
    assert "out of reach" not in under
    assert "the 4x target leaves 0.90 s for the rest" in under and "took 1.90 s" in under
    text = case_text(CASE_C, {"mocker round_robin": mocker, "radixbench round-robin": r})
    assert "floor (c) round-robin" in text
    r.timed_cpu_s = math.nan  # not measured: no floor line
    assert "floor" not in case_text(CASE_C, {"mocker": mocker, "radixbench round-robin": r})


def test_parse_radixbench_leaves_out_the_read_back() -> None:
    doc = {"status": ["finished"], "hits": [5], "input": [10], "ttft_s": [0.5], "instance": [0]}
    doc |= {"sim_cpu_s": 1.0, "rss_mb": 50.0, "timed_cpu_s": 0.25, "readback_cpu_s": 0.5}
    r = parse_radixbench(doc, 3.0, 4.0)
    assert (r.cpu_s, r.timed_cpu_s, r.hit_rate) == (2.5, 0.25, 0.5)


def test_radixbench_side_of_a_case_runs_the_compare_command(tmp_path: Path) -> None:
    runs = run_case(CASE_A, 1, tmp_path, None, requests=30)
    assert list(runs) == ["radixbench one server"]
    (r,) = runs["radixbench one server"]
    assert r.cpu_s > r.sim_cpu_s > 0 and r.rss_mb > 0 and r.wall_s > 0
    assert 0 < r.timed_cpu_s < r.sim_cpu_s and 0 < r.startup_cpu_s < r.cpu_s
    assert len(r.hits) == 30 and r.instance == [0] * 30
    assert 0 <= r.hit_rate < 1 and not math.isnan(r.ttft_p50_ms)
    assert "(a) 1 instance" in case_text(CASE_A, {"radixbench one server": r})


def test_radixbench_child_loads_its_modules_as_the_command_does(tmp_path: Path) -> None:
    """The child imports torch, pandas and the simulator as ``radixbench compare`` does
    (collector paused, then frozen: harness/cli/util.py ``preload``), not before it: its CPU
    is the command's."""
    from radixbench.bench.peers import _RADIXBENCH, _child, radixbench_args

    cmd = [sys.executable, "-c", _RADIXBENCH, str(tmp_path), *radixbench_args(CASE_A, None, 10)]
    doc, _, _ = _child(cmd, 600)
    assert doc["rc"] == 0 and doc["gc_frozen"] > 100_000


@pytest.mark.skipif(mocker_python() is None, reason="no mocker venv (make peers)")
def test_mocker_and_radixbench_hit_alike_on_one_server_page_1(tmp_path: Path) -> None:
    """Where the models coincide (one instance, page 1) both tools reuse the same prompt
    tokens, request by request."""
    runs = run_case(CASE_A, 1, tmp_path, mocker_python(), requests=60)
    (m,) = runs["mocker round_robin"]
    (r,) = runs["radixbench one server"]
    assert m.hits == r.hits and m.hit_rate == pytest.approx(r.hit_rate, abs=1e-12)


def test_a_quick_case_is_titled_with_what_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--quick`` runs 200 requests: the case's heading says so (it read "first 1,000
    requests" above a 200-request run)."""
    from radixbench.bench import peers

    def fake(case, reps, work, mocker, requests=None, timeout_s=None):  # type: ignore[no-untyped-def]
        asked.append(requests)
        return {"radixbench one server": [_run("radixbench one server", [1] * 3, [0] * 3)]}

    asked: list[int | None] = []
    monkeypatch.setattr(peers, "run_case", fake)
    shown: list[str] = []
    ((case, _),) = peers.run_peers("a", quick=True, echo=shown.append)
    assert case.title.endswith("(--quick: first 200 requests)")
    assert "(--quick: first 200 requests)" in shown[0]
    ((full, _),) = peers.run_peers("a", quick=False, echo=shown.append)
    assert full.title == CASE_A.title and asked == [200, None]


def test_compile_sources_writes_the_package_folders_byte_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte code for the package folders only, written even where Python would not write it
    (``PYTHONDONTWRITEBYTECODE``: ``sys.dont_write_bytecode``)."""
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "mod_x.py").write_text("X = 1\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "mod_y.py").write_text("Y = 1\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert compile_sources(tmp_path)
    tag = sys.implementation.cache_tag
    assert [p.name for p in (tmp_path / "sim" / "__pycache__").iterdir()] == [f"mod_x.{tag}.pyc"]
    assert not (tmp_path / "other" / "__pycache__").exists()
