"""``radixbench bench served``: radixbench against SGLang's served cache in one process. The
quick run prints the calibration figure, one table with every case and all three SGLang
caches, and the three targets as measured; its Markdown section survives ``bench cache``'s
rewrite of the whole file. The targets' wording is checked on hand-made rows."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from radixbench.bench.benchmarks_md import SERVED_START, write_document
from radixbench.bench.calibration import calibrate
from radixbench.bench.served import RUST, SGLANG
from radixbench.bench.served_report import PYTHON, target_lines
from radixbench.harness.cli import main

# `import sglang` itself needs orjson, which radixbench never loads: look the package up only.
needs_sglang = pytest.mark.skipif(
    importlib.util.find_spec("sglang") is None, reason="sglang 0.5.23 is not installed"
)


@needs_sglang
def test_quick_run_prints_the_table_targets_and_calibration(tmp_path: Path, capsys) -> None:
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Cache microbenchmarks\n\nkept\n", encoding="utf-8")
    argv = ["bench", "served", "--quick", "--reps", "1", "--out", str(tmp_path)]
    code = main([*argv, "--markdown", str(md)])
    out = capsys.readouterr().out
    assert code == 0, out
    cal = re.search(
        r"pure-Python reference loop ([\d.]+) ms = 1 cal; numpy kernel ([\d.]+) ms", out
    )
    assert cal and float(cal[1]) > 0 and float(cal[2]) > 0, out
    assert "| case | size | variant | median ns | min ns | max ns | x Rust core | cal |" in out
    for case in ("match edge", "match path", "match chat", "evict", "insert", "mixed"):
        assert re.search(
            rf"^\| {case} \| .* \| {re.escape(RUST)} \| [\d,]+ \| .* \| 1\.00x \|", out, re.M
        ), case
    for column in SGLANG.values():
        assert f"| {column} |" in out
    targets = re.findall(r"^target: (.*)$", out, re.M)
    assert len(targets) == 4, out  # measured, whatever they say: the quick sizes are not theirs
    assert re.search(r"^target: the adapter adds at most 5% .*: (met|NOT met)", out, re.M), out
    assert "| adapter | op | calls | direct ns | recorded ns | overhead [95 % CI] |" in out
    for op in ("match_prefix", "insert", "evict", "checkpoint", "release"):
        assert re.search(rf"^\| {re.escape(RUST)} \| {op} \| ", out, re.M), op
    assert all(re.search(r": (met|NOT met|n/a)\b", t) for t in targets), targets
    csv_text = (tmp_path / "bench_served.csv").read_text(encoding="utf-8")
    assert csv_text.startswith("bench,case,") and "x_sglang" in csv_text
    text = md.read_text(encoding="utf-8")
    assert text.startswith("# Cache microbenchmarks\n\nkept\n")
    assert text.count(SERVED_START) == 1 and "= 1 cal" in text and "- cpu:" in text
    write_document(md, "# rewritten\n")  # bench cache rewrites the whole file
    assert md.read_text(encoding="utf-8").count(SERVED_START) == 1


def _rows(**medians: float) -> list[dict[str, object]]:
    return [
        {"case": case, "variant": v, "median_ns": ns, "min_ns": ns, "max_ns": ns, **size}
        for (case, size) in (
            ("evict", {"leaves": 50_000, "k": 16}),
            ("match path", {"tokens": 1_000, "nodes": 1_000}),
        )
        for v, ns in medians.items()
    ]


def test_targets_are_measured_not_asserted() -> None:
    rows = _rows(
        **{RUST: 2_000_000.0, PYTHON: 3_000_000.0, "radixbench persistent-heap": 100_000.0}
    )
    lines = target_lines(rows)
    assert lines[0].endswith(": met") and "20.0x" in lines[0]
    assert lines[1].endswith(": met") and "0.05x" in lines[1]
    assert lines[2].startswith("nothing in radixbench slower") and ": met" in lines[2]
    slow = _rows(**{RUST: 1_000_000.0, PYTHON: 1_500_000.0, "radixbench linear": 2_000_000.0})
    lines = target_lines(slow)
    assert "NOT met" in lines[1] and "2.00x" in lines[1]
    assert "NOT met, 2 slower" in lines[2] and "(the reference matcher)" in lines[2]
    assert "not measured" in target_lines(_rows(**{"radixbench lru-list": 1.0}))[0]


def test_calibration_is_positive_and_its_unit_is_the_reference_loop() -> None:
    cal = calibrate(samples=3)
    assert cal.python_ns > 0 and cal.numpy_ns > 0
    assert cal.cal(cal.python_ns) == 1.0 and cal.fmt(2 * cal.python_ns) == "2 cal"
    assert "= 1 cal" in cal.line()
