"""``radixbench bench peers``: radixbench against the simulator users would pick instead, NVIDIA
Dynamo 1.6.1's mocker (``dynamo.replay.run_trace_replay``), on the same slice of the Mooncake
conversation trace and the same configuration (a benchmark that prints figures, never a timed
test).

The mocker lives in a virtual environment of its own (``make peers``: ``.peers/dynamo``, not a
dependency of radixbench) and runs in a subprocess of it; radixbench runs its own command,
``radixbench compare SCENARIO --reference none --no-aa`` with one variant (``heapify/galloping/
numpy``), in a subprocess of this Python. The two alternate, case by case and repetition by
repetition, so background load falls on both alike. Per run: **CPU s** of the whole process
(user + system of the child and its threads, ``RUSAGE_CHILDREN``: interpreter start-up,
imports, trace loading, the run and, for radixbench, writing its report), **sim CPU s** (the
part spent simulating: the mocker's ``run_trace_replay`` call, radixbench's interleaved run of
its variants), wall s, peak RSS (the child's ``ru_maxrss``), prefix-hit rate (reused prompt
tokens / prompt tokens of finished requests) and TTFT p50 / p90. The figure per case is the
median over repetitions; the ratio is radixbench's CPU over the mocker's. radixbench's CPU
leaves out what its child spends reading the run back for the bench. Its **floor**: the CPU of
the run's timed real-cache calls and batch builds (the ops table's top-level ns, what the
coupled clock charges) plus that of a Python that only imports torch (run right after it), the
part of radixbench's CPU no speed-up of the simulator around the cache can remove.

The cases (issue 28): (a) 1 instance, page 1, first 1,000 requests; (b) the whole trace on 1
instance; (c) 8 instances, page 16, round-robin on both; (d) 8 instances, page 16, KV-aware
(mocker ``kv_router``; radixbench ``cache-aware`` and ``precise``); (e) the whole trace on 8
instances (``kv_router`` / ``cache-aware``). Configuration on both sides: 400,000 KV tokens per
instance (``num_gpu_blocks = 400000 // page``), 64 running requests, 16,384 prefill tokens per
step, chunks of 8,192, FCFS (sglang ``fifo``), the trace's 512-token hash blocks. The mocker's
step times come from a fixed polynomial, radixbench's from its cost model: only hit rates are
comparable, not latencies. Where the hit rates differ, :func:`why` says why from the two
runs' per-request data (which instance each request went to, how many prompt tokens each
reused).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from radixbench.bench.sources import SOURCE_PACKAGES

__all__ = [
    "CASES",
    "Case",
    "PeerRun",
    "compile_sources",
    "mocker_python",
    "parse_mocker",
    "run_case",
    "run_peers",
]

TRACE = Path(__file__).resolve().parents[1] / "workloads" / "data" / "conversation_trace.jsonl"
KV_TOKENS = 400_000
VARIANT = ("--evictors", "heapify", "--matchers", "galloping", "--flatten", "numpy")
#: The issue's targets: radixbench CPU at most this many times the mocker's, per case.
TARGETS = {"a": 3.0, "b": 3.0, "c": 4.0, "d": 4.0, "e": 4.0}


@dataclass(frozen=True)
class Case:
    """One comparison: ``requests`` (None: the whole trace), ``instances``, ``page``, the
    mocker's ``router_mode`` and radixbench's routers (one run each; ``()`` for one server)."""

    key: str
    title: str
    requests: int | None
    instances: int
    page: int
    mocker_router: str
    routers: tuple[str, ...] = ()


CASES = (
    Case("a", "1 instance, page 1, first 1,000 requests", 1000, 1, 1, "round_robin"),
    Case("b", "whole trace, 1 instance, page 1", None, 1, 1, "round_robin"),
    Case("c", "8 instances, page 16, round-robin", 1000, 8, 16, "round_robin", ("round-robin",)),
    Case(
        "d", "8 instances, page 16, KV-aware", 1000, 8, 16, "kv_router", ("cache-aware", "precise")
    ),
    Case("e", "whole trace, 8 instances, page 16, KV-aware", None, 8, 16, "kv_router",
         ("cache-aware",)),
)  # fmt: skip


@dataclass
class PeerRun:
    """One run's figures (module docstring); ``instance`` / ``hits``: per request in trace
    order, the instance it ran on and the prompt tokens it reused (for :func:`why`)."""

    tool: str
    cpu_s: float
    sim_cpu_s: float
    wall_s: float
    rss_mb: float
    hit_rate: float
    ttft_p50_ms: float
    ttft_p90_ms: float
    instance: list[int] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    #: radixbench: the measured CPU of its timed real-cache calls and batch builds (the ns
    #: of the ops table's top-level rows, what the coupled clock charges), s.
    timed_cpu_s: float = math.nan
    #: radixbench: CPU s of a Python that only imports torch, run right after it.
    startup_cpu_s: float = math.nan


def mocker_python(root: Path | None = None) -> Path | None:
    """The Python of the mocker's virtual environment (``make peers``), or None if absent."""
    base = root or Path(__file__).resolve().parents[1]
    py = base / ".peers" / "dynamo" / "bin" / "python"
    return py if py.is_file() else None


# The mocker's child: one run_trace_replay, its figures as one JSON line.
_MOCKER = """
import json, resource, sys, time
trace, mode = sys.argv[1], sys.argv[4]
page, workers, kv = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[5])
from dynamo.replay import run_trace_replay
from dynamo.mocker.config import normalize_mocker_config
cfg = normalize_mocker_config({"engine": {"backend": "sglang", "block_size": page,
    "num_gpu_blocks": kv // page, "max_num_seqs": 64, "max_num_batched_tokens": 16384,
    "sglang": {"schedule_policy": "fifo", "max_prefill_tokens": 16384,
               "chunked_prefill_size": 8192}}})
c0 = time.process_time()
rep = run_trace_replay(trace, extra_engine_args=cfg, num_workers=workers, router_mode=mode,
                       trace_block_size=512, trace_format="mooncake", capture_per_request=True)
sim_cpu = time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
# the records in trace order: matched on (arrival ms, input, output length), in line order
slots = {}
with open(trace) as f:
    for i, line in enumerate(f):
        t = json.loads(line)
        key = (float(t["timestamp"]), t["input_length"], t["output_length"])
        slots.setdefault(key, []).append(i)
inst, hits = [0] * sum(map(len, slots.values())), [0] * sum(map(len, slots.values()))
for r in rep.per_request:
    key = (float(r["arrival_time_ms"]), r["input_length"], r["requested_output_length"])
    i = slots[key].pop(0)
    inst[i], hits[i] = r["decode_worker_idx"], r["reused_input_tokens"]
print(json.dumps({"summary": rep.summary, "sim_cpu_s": sim_cpu, "rss_mb": rss,
    "instance": inst, "hits": hits}, default=str))
"""

# radixbench's child: the compare command as a user runs it, the simulation's CPU measured
# around its interleaved run, then the figures read back from the run folder.
_RADIXBENCH = """
import contextlib, io, json, resource, sys, time
out, args = sys.argv[1], sys.argv[2:]
from radixbench.harness.cli.util import preload
preload(["radixbench.harness.config.scenario"])  # loaded as `radixbench compare` loads it
import radixbench.harness.experiments.compare as compare
sim = [0.0]
_run = compare.run_interleaved
def timed(sims, *a, **k):
    t = time.process_time()
    try:
        return _run(sims, *a, **k)
    finally:
        sim[0] += time.process_time() - t
compare.run_interleaved = timed
from radixbench.harness.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main([*args, "--out", out, "--no-progress"])
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
def cpu():
    return sum(u.ru_utime + u.ru_stime
               for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
read0 = cpu()  # the read-back below is the bench's, not the run's
import gc
import pandas as pd
import pyarrow.compute as pc, pyarrow.parquet as pq
from pathlib import Path
run = max((p for p in Path(out).iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
req = pd.read_parquet(run / "requests.parquet").sort_values("rid")
ops = pq.read_table(run / "ops.parquet", columns=["ns", "parent"])
timed = pc.sum(pc.filter(ops["ns"], pc.equal(ops["parent"], ""))).as_py() or 0
print(json.dumps({"rc": rc, "sim_cpu_s": sim[0], "rss_mb": rss, "gc_frozen": gc.get_freeze_count(),
    "timed_cpu_s": timed * 1e-9, "readback_cpu_s": cpu() - read0,
    "input": req["input_len"].tolist(), "hits": req["prefix_hit_tokens"].tolist(),
    "status": req["status"].tolist(), "ttft_s": req["ttft_s"].tolist(),
    "instance": req["instance"].tolist() if "instance" in req else [0] * len(req)}))
"""

# The floor's start-up: a Python that imports torch (the batch builder's tensors) and no more.
_STARTUP = "import torch; print('{}')"


def _child(cmd: list[str], timeout_s: float | None) -> tuple[dict[str, Any], float, float]:
    """Run ``cmd``; its last stdout line as JSON, its CPU s (user + system, all threads) and
    wall s. Raises ``RuntimeError`` (one line) if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{Path(cmd[0]).name} exited {proc.returncode}: {tail}")
    return json.loads(lines[-1]), cpu, wall


def parse_mocker(doc: dict[str, Any], cpu_s: float, wall_s: float) -> PeerRun:
    """A :class:`PeerRun` from the mocker child's JSON (its report's ``summary``:
    ``prefix_cache_reused_ratio``, ``median_ttft_ms``, ``p90_ttft_ms``). Raises ``KeyError``
    naming a missing field."""
    s = doc["summary"]
    return PeerRun(
        "mocker", cpu_s, float(doc["sim_cpu_s"]), wall_s, float(doc["rss_mb"]),
        float(s["prefix_cache_reused_ratio"]), float(s["median_ttft_ms"]),
        float(s["p90_ttft_ms"]), [int(i or 0) for i in doc.get("instance", [])],
        [int(h or 0) for h in doc.get("hits", [])],
    )  # fmt: skip


def parse_radixbench(doc: dict[str, Any], cpu_s: float, wall_s: float) -> PeerRun:
    """A :class:`PeerRun` from radixbench's child JSON (its run's request table and the sum
    of its ops table's top-level ns); ``cpu_s`` less what the child spent reading its run back
    (``readback_cpu_s``)."""
    import numpy as np

    ok = np.asarray(doc["status"]) == "finished"
    hits = np.asarray(doc["hits"], dtype=np.int64)
    inp = np.asarray(doc["input"], dtype=np.int64)
    ttft = np.asarray(doc["ttft_s"], dtype=np.float64)[ok] * 1e3
    p50, p90 = (float(np.percentile(ttft, q)) for q in (50, 90)) if ttft.size else (np.nan,) * 2
    return PeerRun(
        "radixbench", cpu_s - float(doc.get("readback_cpu_s", 0.0)), float(doc["sim_cpu_s"]),
        wall_s, float(doc["rss_mb"]), float(hits[ok].sum() / max(int(inp[ok].sum()), 1)), p50,
        p90, [int(i) for i in doc["instance"]], [int(h) for h in hits],
        float(doc.get("timed_cpu_s", math.nan)),
    )  # fmt: skip


def _slice(requests: int | None, folder: Path) -> Path:
    """The trace's first ``requests`` lines as a file (the whole trace: the file itself)."""
    if requests is None:
        return TRACE
    path = folder / f"trace_{requests}.jsonl"
    if not path.exists():
        with TRACE.open(encoding="utf-8") as src:
            path.write_text("".join(line for _, line in zip(range(requests), src)))
    return path


def radixbench_args(case: Case, router: str | None, requests: int | None) -> list[str]:
    """The ``radixbench compare`` words of ``case`` (one variant, no reference, no A/A)."""
    n = ["--requests", str(requests)] if requests is not None else ["--requests", "1000000"]
    args = ["compare", "mooncake-conversation" if router is None else "mooncake-cluster", *n]
    args += [*VARIANT, "--reference", "none", "--no-aa", "--kv-capacity", str(KV_TOKENS)]
    args += ["--page-size", str(case.page), "--max-running", "64"]
    args += ["--max-prefill-tokens", "16384", "--chunked-prefill-size", "8192"]
    if router is not None:
        args += ["--instances", str(case.instances), "--routers", router]
    return args


def run_case(
    case: Case,
    reps: int,
    work: Path,
    mocker: Path | None,
    requests: int | None = None,
    timeout_s: float | None = None,
) -> dict[str, list[PeerRun]]:
    """``reps`` alternating repetitions of ``case``: the mocker (skipped when ``mocker`` is
    None), then radixbench under each router, each followed by a Python that only imports
    torch (its floor's start-up); ``requests`` overrides the case's slice (quick mode).
    Returns tool label -> runs."""
    n = requests if requests is not None else case.requests
    trace = _slice(n, work)
    out: dict[str, list[PeerRun]] = {}
    for _ in range(reps):
        if mocker is not None:
            cmd = [str(mocker), "-c", _MOCKER, str(trace), str(case.page), str(case.instances)]
            doc, cpu, wall = _child([*cmd, case.mocker_router, str(KV_TOKENS)], timeout_s)
            out.setdefault(f"mocker {case.mocker_router}", []).append(parse_mocker(doc, cpu, wall))
        for router in case.routers or (None,):
            with tempfile.TemporaryDirectory(dir=work) as tmp:
                words = radixbench_args(case, router, n)
                cmd = [sys.executable, "-c", _RADIXBENCH, tmp, *words]
                doc, cpu, wall = _child(cmd, timeout_s)
            run = parse_radixbench(doc, cpu, wall)
            _, run.startup_cpu_s, _ = _child([sys.executable, "-c", _STARTUP], timeout_s)
            out.setdefault(f"radixbench {router or 'one server'}", []).append(run)
    return out


def compile_sources(root: Path | None = None) -> bool:
    """Compile radixbench's own modules (:data:`~radixbench.bench.sources.SOURCE_PACKAGES`'s
    folders under ``root``, default this
    checkout) to byte code, as pip does for an installed wheel (the mocker's venv was
    installed so). An editable install under ``PYTHONDONTWRITEBYTECODE`` never writes them
    and so compiles ~150 modules from source in every run (~0.2 s of CPU each time); Python
    ignores a ``.pyc`` older than its source, so this changes no result. Writes ``__pycache__``
    folders; returns False where one could not be written (a read-only install)."""
    import compileall

    base = root or Path(__file__).resolve().parents[1]
    ok = True
    for name in SOURCE_PACKAGES:
        if (base / name).is_dir():
            ok = bool(compileall.compile_dir(base / name, quiet=2)) and ok
    return ok


def median_run(runs: list[PeerRun]) -> PeerRun:
    """The run whose CPU s is the median (the lower middle one for an even count)."""
    return sorted(runs, key=lambda r: r.cpu_s)[(len(runs) - 1) // 2]


def run_peers(
    keys: str = "abcde",
    reps: int = 1,
    quick: bool = False,
    mocker: Path | None = None,
    echo: Any = print,
) -> list[tuple[Case, dict[str, PeerRun]]]:
    """Every case in ``keys`` (``quick``: 200 requests each, whole-trace cases too), each
    printed by ``echo`` as it ends; the median run per tool label. ``l`` in ``keys``: also
    the cluster's CPU per request against one instance's
    (:mod:`radixbench.bench.peers_cluster`); ``m``: the memory slope
    (:mod:`radixbench.bench.peers_memory`); both printed, not returned."""
    results = []
    compile_sources()  # byte code, as the mocker's pip-installed modules have
    with tempfile.TemporaryDirectory(prefix="radixbench-peers-") as tmp:
        for case in CASES:
            if case.key not in keys:
                continue
            runs = run_case(case, reps, Path(tmp), mocker, 200 if quick else None)
            med = {label: median_run(r) for label, r in runs.items()}
            if quick:  # the title says what ran, not the case's full size
                case = dataclasses.replace(
                    case, title=f"{case.title} (--quick: first 200 requests)"
                )
            results.append((case, med))
            echo(case_lines(case, med))
        if "l" in keys:  # the cluster's CPU per request against one instance's
            from radixbench.bench.peers_cluster import overhead_text, run_overhead

            echo(overhead_text(run_overhead(Path(tmp), reps, 200 if quick else 1000)))
        if "m" in keys:  # the memory slope
            from radixbench.bench.peers_memory import memory_text, run_memory

            n = 200 if quick else None
            echo(memory_text(run_memory(Path(tmp), n), n))
    return results


def case_lines(case: Case, runs: dict[str, PeerRun]) -> str:
    """The case's rows, its ratio and target status, and why hit rates differ."""
    from radixbench.bench.peers_report import case_text

    return case_text(case, runs)


def machine() -> str:
    """CPU model and cores of this machine (one line)."""
    try:
        cpu = next(
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu = "unknown CPU"
    return f"{cpu}, {os.cpu_count()} cores"
