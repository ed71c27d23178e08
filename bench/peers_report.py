"""``bench peers``' text: each case's table rows, its CPU ratios against the issue's targets,
radixbench's floor (:func:`floor_line`), why its hit rates differ (from the runs' per-request
data), and its section of BENCHMARKS.md (between :data:`START` and :data:`END`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from radixbench.bench.benchmarks_md import PEERS_END, PEERS_START
from radixbench.bench.peers import TARGETS, Case, PeerRun

if TYPE_CHECKING:
    from radixbench.bench.calibration import Calibration

START, END = PEERS_START, PEERS_END
BLOCK = 512  # tokens per hash block of the Mooncake trace

HEAD = (
    f"{'tool':<26} {'CPU s':>7} {'sim CPU s':>9} {'wall s':>7} {'peak RSS MB':>11} "
    f"{'hit rate':>9} {'TTFT p50 ms':>12} {'p90 ms':>10} {'CPU x mocker':>12}"
)


def _row(label: str, r: PeerRun, mocker: PeerRun | None) -> str:
    ratio = f"{r.cpu_s / mocker.cpu_s:.1f}x" if mocker is not None and r is not mocker else ""
    return (
        f"{label:<26} {r.cpu_s:>7.2f} {r.sim_cpu_s:>9.2f} {r.wall_s:>7.1f} {r.rss_mb:>11,.0f} "
        f"{r.hit_rate:>9.4f} {r.ttft_p50_ms:>12,.1f} {r.ttft_p90_ms:>10,.1f} {ratio:>12}"
    )


def _mocker(runs: dict[str, PeerRun]) -> PeerRun | None:
    return next((r for label, r in runs.items() if label.startswith("mocker")), None)


def target_line(case: Case, runs: dict[str, PeerRun]) -> str:
    """``target (a) <= 3x: MET/NOT MET (...)``, over radixbench's runs of the case; the
    simulation-only ratio beside it."""
    mocker = _mocker(runs)
    if mocker is None:
        return f"target ({case.key}) <= {TARGETS[case.key]:g}x: not measured (no mocker venv)"
    parts, ok = [], True
    for label, r in runs.items():
        if r is mocker:
            continue
        x, sim = r.cpu_s / mocker.cpu_s, r.sim_cpu_s / max(mocker.sim_cpu_s, 1e-9)
        ok = ok and x <= TARGETS[case.key]
        parts.append(f"{label.removeprefix('radixbench ')} {x:.1f}x (simulation alone {sim:.1f}x)")
    status = "MET" if ok else "NOT MET"
    return f"target ({case.key}) CPU <= {TARGETS[case.key]:g}x the mocker: {status}: " + ", ".join(
        parts
    )


def floor_line(case: Case, label: str, r: PeerRun, mocker: PeerRun) -> str:
    """What no speed-up outside the cache can remove from ``r``: the CPU of its timed real-cache
    calls and batch builds (``timed_cpu_s``) plus a Python that imports torch
    (``startup_cpu_s``), against the mocker's whole run and the case's target. Over the target:
    out of reach while those stay real; under it: what the target leaves for everything else
    (scheduler, routers, other imports, trace loading, report) and what that took."""
    target = TARGETS[case.key]
    floor = r.timed_cpu_s + r.startup_cpu_s
    text = (
        f"floor ({case.key}) {label.removeprefix('radixbench ')}: its timed cache calls and "
        f"batch builds {r.timed_cpu_s:.2f} s + a Python importing torch {r.startup_cpu_s:.2f} s "
        f"= {floor:.2f} s CPU = {floor / mocker.cpu_s:.1f}x the mocker"
    )
    if floor > target * mocker.cpu_s:
        return text + (
            f": the {target:g}x target is out of reach while every cache call is real and "
            "timed and the batch builder makes torch tensors"
        )
    left = target * mocker.cpu_s - floor
    return text + (
        f"; the {target:g}x target leaves {left:.2f} s for the rest (scheduler, routers, "
        f"other imports, trace, report), which took {r.cpu_s - floor:.2f} s"
    )


def why(case: Case, mocker: PeerRun, rb: PeerRun, label: str) -> str:
    """Why ``rb``'s hit rate differs from ``mocker``'s, from the per-request data: requests
    placed on other instances (routing; the partition compared up to relabelling the
    instances), and among those placed alike, reuse differing by whole 512-token trace blocks
    (a block cached in one run and not the other when the request came: timing and eviction,
    the tools' step times differing) or by part of one (block mapping: page rounding, a
    request's partial last block)."""
    d = rb.hit_rate - mocker.hit_rate
    if d == 0:
        return f"{label}: the same hit rate as the mocker, to the last digit"
    n = min(len(mocker.hits), len(rb.hits))
    if n == 0:
        return f"{label}: hit rate {d:+.4f} vs the mocker (no per-request data to say why)"
    pairs = Counter(zip(mocker.instance[:n], rb.instance[:n]))
    best: dict[int, tuple[int, int]] = {}
    for (m, r), c in pairs.items():
        if c > best.get(m, (0, -1))[0]:
            best[m] = (c, r)
    alike = [best[mocker.instance[i]][1] == rb.instance[i] for i in range(n)]
    moved = n - sum(alike)
    differ = [i for i in range(n) if mocker.hits[i] != rb.hits[i]]
    d_alike = [i for i in differ if alike[i]]
    whole = sum(1 for i in d_alike if (rb.hits[i] - mocker.hits[i]) % BLOCK == 0)
    more = sum(1 for i in d_alike if rb.hits[i] > mocker.hits[i])
    text = (
        f"{label}: hit rate {d:+.4f} vs the mocker; {len(differ):,} of {n:,} requests reused "
        f"a different prefix. Placement: {moved:,} requests ran on another instance than the "
        f"mocker's partition (up to relabelling) puts them"
    )
    if moved:
        text += " (the routers decide differently)"
    text += (
        f"; of the {len(d_alike):,} placed alike that differ, {whole:,} differ by whole "
        f"{BLOCK}-token trace blocks (cached in one run, not yet or no longer in the other: "
        f"the tools' step times and so their eviction timing differ) and "
        f"{len(d_alike) - whole:,} by part of a block (block mapping: page rounding, partial "
        f"last blocks); radixbench reused more in {more:,} of them."
    )
    return text


def case_text(case: Case, runs: dict[str, PeerRun]) -> str:
    """The case's block of ``bench peers``' output."""
    mocker = _mocker(runs)
    lines = [f"({case.key}) {case.title}", HEAD]
    lines += [_row(label, r, mocker) for label, r in runs.items()]
    lines.append(target_line(case, runs))
    if mocker is not None:
        ours = [(label, r) for label, r in runs.items() if r is not mocker]
        for label, r in ours:
            if not (math.isnan(r.timed_cpu_s) or math.isnan(r.startup_cpu_s)):
                lines.append(floor_line(case, label, r, mocker))
        for label, r in ours:
            lines.append(why(case, mocker, r, label))
    return "\n".join(lines)


def markdown(
    blocks: Sequence[str], cal: Calibration, machine: str, command: str, notes: Sequence[str]
) -> str:
    """The ``Against NVIDIA Dynamo's mocker`` section of BENCHMARKS.md, markers included."""
    body = [START, "## Against NVIDIA Dynamo's mocker", "", f"Regenerate: `{command}`", ""]
    body += [
        "Figures of `radixbench bench peers` (bench/peers.py): NVIDIA Dynamo 1.6.1's mocker "
        "(`run_trace_replay`, its own venv from `make peers`) and `radixbench compare ... "
        "--reference none --no-aa` (one variant, every cache operation real and timed) on the "
        "same Mooncake slice and configuration, alternating. CPU s: the whole process (start-up, "
        "imports, run, radixbench's report); sim CPU s: the simulation alone. Only hit rates "
        "are comparable, not latencies (the mocker's step times are a fixed polynomial). "
        "Floor: the CPU of a run's timed real-cache calls and batch builds (its ops table's "
        "top-level ns) plus a Python that only imports torch: what no speed-up of the "
        "simulator around the cache can remove.",
        "",
        "```",
        *blocks,
        *notes,
        "```",
        "",
        f"Machine: {machine}; {cal.line()}",
        END,
    ]
    return "\n".join(body) + "\n"
