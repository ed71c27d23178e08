"""``radixbench bench sim``: how fast the simulator itself is (a benchmark that prints figures,
never a timed test).

Four figures, each printed as measured on this machine:

- **whole trace**: the bundled Mooncake conversation trace (all 12,031 requests unless
  ``--requests``), one variant (default ``persistent-heap/galloping/numpy``), isolated clock,
  every cache operation real and timed; CPU s (``time.process_time``), wall s, simulated events
  and events per CPU-second. Each of ``--trace-reps`` runs (3; ``--quick`` 1) is a fresh Python
  process timed after it has loaded the trace; the best (least CPU) is the figure and every
  run's CPU s is printed beside it, since a shared 2-core machine varies by a few percent from
  run to run.
- **start-up to first event**: wall s from launching ``radixbench compare`` in a fresh Python
  process to the first simulated event (a marker the child prints when ``VariantSim.step`` is
  first called: interpreter start, imports, trace loading and simulator set-up included).
- **``radixbench --help``**: wall s of the whole command (best and median of ``--help-reps``).
- **report writing**: wall s of ``reports.pipeline.write_report`` (tables, summaries, plots,
  ``report.md`` / ``report.html``) for the demo run (``make demo``: ``compare``, the default
  scenario at its own size, or its first ``--demo-requests``), whose tables are simulated
  first (untimed) or read from ``--demo-run DIR``; and its share of the whole run, report
  writing over itself plus the run's own wall s up to the report (``config.json``'s
  ``wall_s``), against issue 28's target of at most :data:`REPORT_SHARE_TARGET`.

Start-up and ``--help`` are each timed ``--startup-reps`` / ``--help-reps`` times (best and
median printed): a single launch right after the whole-trace run pays a cold page cache.

``--markdown FILE`` writes the figures with the machine into the ``Simulator speed`` section of
``FILE`` (:mod:`radixbench.bench.benchmarks_md`). With ``cal`` (the run's calibration,
:mod:`radixbench.bench.calibration`, measured first) every figure is also printed as a multiple
of the calibration unit (``N cal``: the figure's seconds over the unit's), and the calibration
line closes the figures. ``radixbench bench sim``
(:mod:`radixbench.harness.cli.bench`) runs the figures one by one and prints each as it comes.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from radixbench.bench.calibration import Calibration

MARKER = "@@radixbench-first-event@@"
DEFAULT_VARIANT = "persistent-heap/galloping/numpy"

# The child of the start-up figure: patch VariantSim.step to print MARKER on its first call,
# then run the CLI as `radixbench` would.
_CHILD = f"""
import sys
import radixbench.sim.run as _run
_orig = _run.VariantSim.step
_seen = []
def _step(self, n):
    if not _seen:
        _seen.append(1)
        sys.stdout.write({MARKER!r} + "\\n")
        sys.stdout.flush()
    return _orig(self, n)
_run.VariantSim.step = _step
from radixbench.harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


#: Issue 28: report writing takes at most this share of a run's wall time.
REPORT_SHARE_TARGET = 0.20


@dataclass
class SimBench:
    """The figures (s unless named otherwise); ``None`` where a figure was skipped."""

    requests: int = 0
    variant: str = DEFAULT_VARIANT
    trace_cpu_s: float = float("nan")
    trace_wall_s: float = float("nan")
    events: int = 0
    measured_s: float = float("nan")
    trace_runs_cpu_s: list[float] = field(default_factory=list)
    startup_s: list[float] = field(default_factory=list)
    help_s: list[float] = field(default_factory=list)
    report_s: float | None = None
    report_requests: int = 0
    report_run_wall_s: float | None = None
    env: dict[str, Any] = field(default_factory=dict)
    cal: Calibration | None = None

    @property
    def events_per_cpu_s(self) -> float:
        return self.events / self.trace_cpu_s if self.trace_cpu_s > 0 else float("nan")


def time_trace(requests: int | None, variant: str) -> tuple[int, float, float, int, float]:
    """Simulate the bundled Mooncake conversation trace (first ``requests``; None = all) under
    ``variant`` (``evictor/matcher/flatten``), isolated clock, llama-3.1-8b-h100 cost model.
    Returns ``(requests, cpu_s, wall_s, events, measured_s)``, ``measured_s`` being the
    ``perf_counter_ns`` time of the timed cache operations and batch builds (top-level calls,
    the metrics' ``measured_cpu_s``); the trace is loaded before the clocks start."""
    import torch

    from radixbench.sim import SimConfig, Variant, run_variant
    from radixbench.sim.cost import load_cost_model
    from radixbench.workloads import load_mooncake

    torch.set_num_threads(1)
    trace = load_mooncake(max_requests=requests)
    cfg = SimConfig(cost=load_cost_model("llama-3.1-8b-h100"), clock="isolated")
    evictor, matcher, flatten = variant.split("/")
    v = Variant(evictor, matcher, flatten)
    w0, c0 = time.perf_counter(), time.process_time()
    res = run_variant(trace, cfg, v, torch.device("cpu"))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return len(trace), cpu, wall, res.events, float(res.metrics.get("measured_cpu_s", 0.0))


def time_trace_runs(
    requests: int | None, variant: str, reps: int
) -> list[tuple[int, float, float, int, float]]:
    """:func:`time_trace` ``reps`` times, each in a fresh Python process (no heap, cache or
    import state carried over from another run). Raises ``RuntimeError`` naming the exit status
    when a run fails."""
    code = (
        "import json, sys\n"
        "from radixbench.bench.sim import time_trace\n"
        f"print(json.dumps(time_trace({requests!r}, {variant!r})))\n"
    )
    out = []
    for _ in range(reps):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"whole-trace run exited {proc.returncode}: {tail[0]}")
        n, cpu, wall, events, measured = json.loads(proc.stdout.strip().splitlines()[-1])
        out.append((int(n), float(cpu), float(wall), int(events), float(measured)))
    return out


def time_startup(timeout_s: float = 300.0) -> float:
    """Wall s from launching ``compare --requests 50`` (default scenario, cpu) in a fresh
    interpreter to its first simulated event; the child is stopped there. Raises
    ``RuntimeError`` if it exits without reaching one."""
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        argv = ["compare", "--requests", "50", "--device", "cpu", "--no-progress", "--out", tmp]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.strip() == MARKER:
                    return time.perf_counter() - t0
                if time.perf_counter() - t0 > timeout_s:
                    break
        finally:
            proc.kill()
            proc.wait()
    raise RuntimeError("start-up benchmark: the child never reached a simulated event")


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("radixbench")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "radixbench.harness"]


def time_help(reps: int) -> list[float]:
    """Wall s of ``radixbench --help`` (the installed console script), ``reps`` times."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run([*_cli(), "--help"], capture_output=True, check=True)
        out.append(time.perf_counter() - t0)
    return out


def time_report(
    demo_run: Path | None,
    demo_requests: int | None,
    simulate: Callable[[Path, int | None], Path],
    equivalence: Callable[[pd.DataFrame], dict[str, Any]],
) -> tuple[float, int, float | None]:
    """Wall s of ``write_report`` for the demo run, into a temporary folder. The run's tables
    come from ``demo_run`` or are simulated first, untimed: ``simulate(folder,
    demo_requests)`` returns a run folder (the harness's ``bench_inputs.demo_run``: ``compare``
    on the default scenario, tables only). ``equivalence``: the check of the run's requests
    the report states (the harness's ``check_equivalence``). Returns ``(seconds, requests per
    variant, the run's own wall s up to its report)``, the last ``None`` when its
    ``config.json`` has no ``wall_s``."""
    from radixbench.reports.pipeline import write_report
    from radixbench.reports.record import read_run

    with tempfile.TemporaryDirectory(prefix="bench-sim-report-") as tmp:
        if demo_run is None:
            demo_run = simulate(Path(tmp) / "runs", demo_requests)
        run, meta = read_run(demo_run)
        requests, ops = run["requests"], run["ops"]
        assert requests is not None and ops is not None  # read_run requires both
        n = int(requests["rid"].nunique())
        eq = equivalence(requests)
        out = Path(tmp) / "report"
        out.mkdir()
        t0 = time.perf_counter()
        write_report(
            out,
            requests,
            ops,
            meta,
            eq,
            timeseries=run["timeseries"],
            metrics=run["metrics"],
        )
        return time.perf_counter() - t0, n, meta.wall_s


def lines(b: SimBench) -> list[str]:
    """The figures as printable lines (also the body of the markdown section)."""
    runs = b.trace_runs_cpu_s
    best = (
        f" (best of {len(runs)} fresh processes: {', '.join(f'{x:.2f}' for x in runs)} s)"
        if len(runs) > 1
        else ""
    )
    out = [
        f"whole trace: {b.requests:,} requests, variant {b.variant}, isolated clock: "
        f"cpu {b.trace_cpu_s:.2f} s{in_cal(b.cal, b.trace_cpu_s)}{best}, "
        f"wall {b.trace_wall_s:.2f} s, {b.events:,} events, "
        f"{b.events_per_cpu_s:,.0f} events per cpu s",
        f"  of which timed cache operations and batch builds (perf_counter_ns, wall): "
        f"{b.measured_s:.2f} s{in_cal(b.cal, b.measured_s)}; the simulator outside them: "
        f"{b.trace_cpu_s - b.measured_s:.2f} s{in_cal(b.cal, b.trace_cpu_s - b.measured_s)}",
    ]
    if b.startup_s:
        out.append(f"start-up to first simulated event: {best_of(b.startup_s, b.cal)}")
    if b.help_s:
        out.append(f"radixbench --help: {best_of(b.help_s, b.cal)}")
    if b.report_s is not None:
        out.append(
            f"report writing (demo run, {b.report_requests:,} requests x its variants): "
            f"{b.report_s:.2f} s wall{in_cal(b.cal, b.report_s)}{report_share(b)}"
        )
    if b.cal is not None:
        out.append(b.cal.line())
    return out


def report_share(b: SimBench) -> str:
    """``", N % of the run (...; target <= 20 %: met|NOT met)"``: report writing over itself
    plus the run's wall s up to the report; nothing when that wall time is unknown."""
    if b.report_s is None or b.report_run_wall_s is None:
        return ""
    share = b.report_s / (b.report_s + b.report_run_wall_s)
    met = "met" if share <= REPORT_SHARE_TARGET else "NOT met"
    return (
        f", {share:.1%} of the run (its simulation {b.report_run_wall_s:.1f} s wall; "
        f"target <= {REPORT_SHARE_TARGET:.0%}: {met})"
    )


def in_cal(cal: Calibration | None, seconds: float) -> str:
    """``" (= N cal)"`` for a time in s (N: the seconds over the calibration unit's), or
    nothing without a calibration."""
    return "" if cal is None else f" (= {cal.fmt(seconds * 1e9)})"


def best_of(times: list[float], cal: Calibration | None = None) -> str:
    """``"<min> s wall (best of N; median <median> s)"`` of wall times in s; with ``cal``,
    the best also as a multiple of the calibration unit."""
    return (
        f"{min(times):.2f} s wall{in_cal(cal, min(times))} (best of {len(times)}; "
        f"median {statistics.median(times):.2f} s)"
    )
