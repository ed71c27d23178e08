"""The report of ``radixbench bench served`` (:mod:`radixbench.bench.served`): one table of every
case (median, min and max ns per call, the ratio to the Rust core's median, the median in
calibration units), the status of issue 21's targets as measured in the run, and the
``SGLang as served`` section of ``BENCHMARKS.md`` (between the markers
``benchmarks_md.SERVED_START`` / ``SERVED_END``).

Times are ns per call (``insert``: per insert; ``mixed``: per request); ``x Rust core`` is
median / the Rust core's median in the same case (> 1: slower than the Rust core); ``cal`` is
the median as a multiple of the run's calibration unit (:mod:`radixbench.bench.calibration`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radixbench.bench.benchmarks_md import SERVED_END, SERVED_START
from radixbench.bench.calibration import Calibration
from radixbench.bench.served import RUST, SGLANG, Row
from radixbench.bench.timing import GC_METHOD
from radixbench.reports.markdown import markdown_table

__all__ = ["adapter_table", "markdown", "table", "target_lines", "write_rows"]

PYTHON = SGLANG["sglang-python"]
#: radixbench variants kept as baselines, not as candidates (named in the targets' lines).
BASELINES = {"heapify-walk": "SGLang before PR #14339", "linear": "the reference matcher"}


def _size(r: Row) -> str:
    case = str(r["case"])
    if case == "evict":
        return f"evict({r['k']}) at {int(r['leaves']):,} leaves"
    if case == "mixed":
        return f"{r['requests']:,} requests, {r['evictions']:,} evicts"
    if case == "match chat":
        return f"{r['nodes']} x {r['tokens']:,} tokens"
    if case == "insert":
        return f"{r['tokens']:,} tokens"
    nodes = int(r["nodes"])
    return f"{r['tokens']:,} tokens, {nodes:,} node{'s' if nodes > 1 else ''}"


def _ns(x: Any) -> str:
    return f"{float(x):,.0f}"


def _x(x: Any) -> str:
    v = float(x)
    return "n/a" if math.isnan(v) else f"{v:.2f}x"


def _cases(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r["case"] != "adapter"]


def table(rows: Sequence[Row], cal: Calibration) -> str:
    """Every case's rows, in run order, as a Markdown table; then the adapter's overhead
    (:func:`adapter_table`) when the run measured it."""
    head = ["case", "size", "variant", "median ns", "min ns", "max ns", "x Rust core", "cal"]
    body = [
        [str(r["case"]), _size(r), str(r["variant"]), _ns(r["median_ns"]), _ns(r["min_ns"]),
         _ns(r["max_ns"]), _x(r["x_sglang"]), f"{cal.cal(float(r['median_ns'])):.3g}"]
        for r in _cases(rows)
    ]  # fmt: skip
    adapter = adapter_table(rows)
    return markdown_table(head, body) + (f"\n\n{adapter}" if adapter else "")


def _pct(x: Any) -> str:
    return f"{100 * float(x):+.1f} %"


def adapter_table(rows: Sequence[Row]) -> str:
    """The adapter's overhead per implementation and op (``bench.served_adapter``): SGLang's
    own call (direct) and what a run records for it through ``--impl`` (median ns per call),
    the overhead (recorded / direct - 1, with its 95 % paired-bootstrap interval) and the
    adapter's whole call (conversions, shape shadow, stats read: wall time, not figures) as a
    multiple of the direct call. Empty when the run has no adapter rows."""
    ad = [r for r in rows if r["case"] == "adapter"]
    if not ad:
        return ""
    head = ["adapter", "op", "calls", "direct ns", "recorded ns", "overhead [95 % CI]",
            "adapter wall"]  # fmt: skip
    body = [
        [str(r["variant"]), str(r["op"]), f"{int(r['calls']):,}", _ns(r["direct_ns"]),
         _ns(r["recorded_ns"]), f"{_pct(r['overhead'])} [{_pct(r['overhead_lo'])}, "
         f"{_pct(r['overhead_hi'])}]", f"{float(r['wall']):.2f}x"]
        for r in ad
    ]  # fmt: skip
    return markdown_table(head, body)


def _med(rows: Sequence[Row], variant: str) -> float | None:
    got = [float(r["median_ns"]) for r in rows if r["variant"] == variant]
    return got[0] if got else None


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f} µs"


def _evict_target(rows: Sequence[Row]) -> str:
    ev = [r for r in rows if r["case"] == "evict"]
    want = "persistent-heap evict(16) >= 15x faster than the Rust core at 50,000 leaves"
    if not ev:
        return f"{want}: not measured (no evict case)"
    sizes = {int(r["leaves"]) for r in ev}
    n = 50_000 if 50_000 in sizes else max(sizes)
    at = [r for r in ev if r["leaves"] == n]
    rust, ph = _med(at, RUST), _med(at, "radixbench persistent-heap")
    if rust is None or ph is None:
        return f"{want}: not measured ({RUST} not loaded)"
    where = "" if n == 50_000 else f" (measured at {n:,} leaves: this run has no 50,000)"
    ok = "met" if rust / ph >= 15 and n == 50_000 else "NOT met" if n == 50_000 else "n/a"
    return (
        f"{want}: {rust / ph:.1f}x (Rust core {_us(rust)}, persistent-heap {_us(ph)}){where}: {ok}"
    )


def _match_target(rows: Sequence[Row]) -> str:
    want = "best radixbench matcher within 1.5x of the Rust core, 1,000-node path at 1k tokens"
    path = [r for r in rows if r["case"] == "match path"]
    if not path:
        return f"{want}: not measured (no path case)"
    nodes = max(int(r["nodes"]) for r in path)
    tokens = min(int(r["tokens"]) for r in path if r["nodes"] == nodes)
    at = [r for r in path if r["nodes"] == nodes and r["tokens"] == tokens]
    rust = _med(at, RUST)
    ours = [r for r in at if str(r["variant"]).startswith("radixbench ")]
    if rust is None or not ours:
        return f"{want}: not measured ({RUST} not loaded)"
    best = min(ours, key=lambda r: float(r["median_ns"]))
    ratio = float(best["median_ns"]) / rust
    exact = nodes == 1_000 and tokens == 1_000
    where = "" if exact else f" (measured at {nodes:,} nodes, {tokens:,} tokens)"
    ok = ("met" if ratio <= 1.5 else "NOT met") if exact else "n/a"
    return (
        f"{want}: {ratio:.2f}x ({best['variant']} {_us(float(best['median_ns']))}, "
        f"Rust core {_us(rust)}){where}: {ok}"
    )


def _python_target(rows: Sequence[Row]) -> str:
    want = "nothing in radixbench slower than the Python core"
    cases: dict[str, list[Row]] = {}
    for r in rows:
        name = _size(r) if r["case"] == "evict" else f"{r['case']} {_size(r)}"
        cases.setdefault(name, []).append(r)
    slower, seen = [], 0
    for name, rs in cases.items():
        py = _med(rs, PYTHON)
        if py is None:
            continue
        seen += 1
        for r in rs:
            v = str(r["variant"])
            if v.startswith("radixbench ") and float(r["median_ns"]) > py:
                base = [f" ({w})" for k, w in BASELINES.items() if k in v.split()[-1].split("/")]
                slower.append(f"{v}{''.join(base)} on {name}: {float(r['median_ns']) / py:.2f}x")
    if not seen:
        return f"{want}: not measured ({PYTHON} not loaded)"
    if not slower:
        return f"{want}: met (every radixbench variant at or below it in all {seen} cases)"
    return f"{want}: NOT met, {len(slower)} slower: " + "; ".join(slower)


def _adapter_target(rows: Sequence[Row]) -> str:
    from radixbench.bench.served_adapter import ADAPTER_TARGET

    want = f"the adapter adds at most {ADAPTER_TARGET:.0%} to what SGLang's calls take"
    ad = [r for r in rows if r["case"] == "adapter"]
    if not ad:
        return f"{want}: not measured ({RUST} not loaded)"
    over = [r for r in ad if float(r["overhead"]) > ADAPTER_TARGET]
    worst = max(ad, key=lambda r: float(r["overhead"]))
    most = f"largest {worst['op']} on {worst['variant']} {_pct(worst['overhead'])}"
    if not over:
        return f"{want}: met ({len(ad)} ops, {most})"
    names = "; ".join(f"{r['op']} on {r['variant']} {_pct(r['overhead'])}" for r in over)
    return f"{want}: NOT met, {len(over)} over: {names}"


def target_lines(rows: Sequence[Row]) -> list[str]:
    """Issue 21 item 6's targets and issue 31 item 5's (the adapter's overhead), each as
    measured in ``rows`` (``met``, ``NOT met``, or ``n/a`` where the run's sizes are not the
    target's)."""
    cases = _cases(rows)
    return [_evict_target(cases), _match_target(cases), _python_target(cases),
            _adapter_target(rows)]  # fmt: skip


def markdown(
    rows: Sequence[Row],
    skipped: dict[str, str],
    cal: Calibration,
    env: dict[str, object],
    command: str,
) -> str:
    """The ``SGLang as served`` section of ``BENCHMARKS.md``, markers included."""
    out = [
        SERVED_START,
        "## SGLang as served: radixbench vs the Rust core, the Python core, legacy",
        "",
    ]
    out += [f"Regenerate: `{command}`", ""]
    out += [
        "One process (bench/served.py): radixbench's evictors and matchers and sglang 0.5.23's "
        "`UnifiedRadixCache` (Rust tree core, Python tree core) and legacy `RadixCache`, all "
        "driven through the same `PrefixCache` calls on radixbench's allocator. Variants of a "
        "case are timed in interleaved rounds; figures are ns per call (insert: per insert; "
        "mixed: per request): median, min, max; `x Rust core` = median / the Rust core's "
        "median; `cal` = median / the calibration unit of this run. "
        f"{GC_METHOD[0].upper()}{GC_METHOD[1:]}.",
        "",
        f"- {cal.line()}",
    ]
    out += [f"- not loaded: {k}: {v}" for k, v in skipped.items()]
    out += ["", "Targets (issue 21 item 6, issue 31 item 5), as measured in this run:", ""]
    out += [f"- {t}" for t in target_lines(rows)]
    out += ["", table(rows, cal), "", "Machine:", ""]
    out += [f"- {k}: {v}" for k, v in env.items()]
    return "\n".join([*out, SERVED_END]) + "\n"


def write_rows(rows: Sequence[Row], out: Path) -> Path:
    """The rows as ``out/bench_served.csv`` (``out`` created if missing; times in ns); its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bench_served.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    return path
