"""Profiling a compare run with scalene (CPU-only) and reading its hottest lines.

:func:`profile_compare` runs :mod:`radixbench.harness.profiling.target` as a separate
program under ``scalene run --cpu-only`` (scalene >= 2: ``scalene run [options] prog.py ---
args``),
restricted to the radixbench package folders (:func:`scalene_filters`, editable or not), then
renders the JSON to a standalone HTML page with ``scalene view --standalone``. The run folder
appears whole in ``--out`` with both files in ``<run_dir>/profile/``: ``scalene.json`` and
``scalene.html``. :func:`hottest_lines` ranks the JSON's lines by CPU
time.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radixbench.bench.sources import SOURCE_PACKAGES
from radixbench.harness.experiments.compare import CompareSpec
from radixbench.harness.experiments.rerender import rerender
from radixbench.harness.experiments.rundir import AtomicRunDir
from radixbench.harness.profiling import target as profile_target

__all__ = [
    "HotLine",
    "ProfileOutcome",
    "hottest_lines",
    "profile_compare",
    "scalene_filters",
    "simulation_lines",
]

#: The repository root of the radixbench packages (cache/, sim/, harness/, ... live in it).
SOURCE_ROOT = Path(profile_target.__file__).resolve().parents[2]
#: The radixbench packages (folders under :data:`SOURCE_ROOT`) a profile covers: all of them.
PACKAGES = SOURCE_PACKAGES


@dataclass(frozen=True)
class HotLine:
    """One source line of a scalene profile: ``cpu_percent`` = Python + native + system time
    as a percentage of the profiled program's elapsed CPU samples."""

    file: str
    lineno: int
    cpu_percent: float
    python_percent: float
    native_percent: float
    code: str


@dataclass(frozen=True)
class ProfileOutcome:
    """Where ``radixbench profile`` wrote its files and the run's equivalence verdict."""

    run_dir: Path
    scalene_json: Path
    scalene_html: Path | None
    torch_trace: Path | None
    equivalent: bool


def hottest_lines(profile: dict[str, Any], top: int = 15) -> list[HotLine]:
    """The ``top`` lines of a scalene JSON profile by total CPU percent, highest first (ties by
    file, line). Lines with no CPU time are left out; the code is shown as written (scalene's
    JSON writes ``<``, ``>``, ``&`` as the text ``\\u003c``...: undone). Raises
    :class:`ValueError` when ``profile`` lacks the ``files`` mapping of scalene's JSON format."""
    files = profile.get("files")
    if not isinstance(files, dict):
        raise ValueError("scalene profile: missing 'files' (not a scalene JSON profile?)")
    rows = []
    for fname, data in files.items():
        for line in data.get("lines", []):
            py = float(line.get("n_cpu_percent_python", 0.0))
            native = float(line.get("n_cpu_percent_c", 0.0))
            total = py + native + float(line.get("n_sys_percent", 0.0))
            if total > 0:
                code = _unescape(str(line.get("line", ""))).strip()
                rows.append(HotLine(str(fname), int(line["lineno"]), total, py, native, code))
    rows.sort(key=lambda r: (-r.cpu_percent, r.file, r.lineno))
    return rows[:top]


def _unescape(code: str) -> str:
    """``code`` with scalene's ``\\uXXXX`` escapes (of ``&``, ``<``, ``>``) turned back into
    the characters."""
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), code)


#: Why a hot line is not the simulation's own: its reason, by the file's package under
#: :data:`SOURCE_ROOT` or the line's code. Report writing (matplotlib's savefig, pandas
#: writers) and module imports run once per run, whatever the cache algorithm.
_NOT_SIMULATION = {
    "report writing (reports/: tables, plots, savefig)": lambda path, code: path.is_relative_to(
        SOURCE_ROOT / "reports"
    ),
    "imports (import lines: module loading)": lambda path, code: bool(
        re.match(r"(import |from \S+ import )", code)
    ),
}


def simulation_lines(lines: list[HotLine]) -> tuple[list[HotLine], dict[str, tuple[int, float]]]:
    """``lines`` split into the simulation's own (in order) and what was left out: reason ->
    (lines, their summed CPU %), for report writing and module imports
    (:data:`_NOT_SIMULATION`; reasons with no line are not listed)."""
    kept: list[HotLine] = []
    left: dict[str, tuple[int, float]] = {}
    for h in lines:
        why = next((w for w, f in _NOT_SIMULATION.items() if f(Path(h.file), h.code)), None)
        if why is None:
            kept.append(h)
        else:
            n, cpu = left.get(why, (0, 0.0))
            left[why] = (n + 1, cpu + h.cpu_percent)
    return kept, left


def _scalene() -> list[str]:
    """Command prefix running the scalene of this interpreter's environment."""
    exe = Path(sys.executable).with_name("scalene")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "scalene"]


def scalene_filters(source_root: Path = SOURCE_ROOT) -> list[str]:
    """``scalene run`` options that profile exactly the radixbench packages under
    ``source_root`` (``cache/``, ``sim/``, ``workloads/``, ``reports/``, ``harness/``),
    wherever they are installed.

    By default scalene skips every file under the interpreter's library folders, which after a
    non-editable install include the radixbench package itself (``site-packages/radixbench``):
    ``--profile-all`` lifts that rule and ``--profile-only`` (substring match, each package
    folder with a trailing separator) narrows the profile back to our packages, so neither
    torch nor a virtual environment inside the checkout is profiled.
    """
    dirs = [f"{source_root / name}{os.sep}" for name in PACKAGES]
    return ["--profile-all", "--profile-only", ",".join(dirs)]


def _samples_in_packages(profile: dict[str, Any], source_root: Path = SOURCE_ROOT) -> int:
    """Number of lines with CPU time in the radixbench packages under ``source_root``."""
    roots = [source_root / name for name in PACKAGES]
    lines = hottest_lines(profile, 10**9)
    return sum(1 for h in lines if any(Path(h.file).is_relative_to(r) for r in roots))


def _fail(proc: subprocess.CompletedProcess[str], what: str) -> RuntimeError:
    """One-line error for a failed profiled run: ``what`` plus the last line of its output."""
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    bad_input = [ln for ln in lines if ln.startswith(profile_target.ERROR_PREFIX)]
    if bad_input:  # the run's own one-line error (e.g. an impossible --kv-capacity)
        return RuntimeError(bad_input[-1][len(profile_target.ERROR_PREFIX) :])
    tail = lines[-1:] or ["no output"]
    return RuntimeError(f"{what} (exit {proc.returncode}): {tail[0]}")


def profile_compare(
    spec: CompareSpec, torch_profiler: bool = False, html: bool = True
) -> ProfileOutcome:
    """Run ``spec`` under scalene (CPU only) and store the profile in the new run folder.

    ``torch_profiler``: also record a torch profiler Chrome trace of the batch builder
    (:func:`~radixbench.harness.profiling.target.run_target`). ``html``: also render
    ``scalene.html``. ``spec.out`` is resolved against the current folder before the program
    starts (it runs in a temporary folder). The run is staged in a temporary folder and moved
    to ``spec.out`` (:class:`~radixbench.harness.experiments.rundir.AtomicRunDir`) only once its
    profile is complete. Raises :class:`RuntimeError` (one line, with the tail of scalene's output)
    when the profiled run fails or scalene recorded no samples in the radixbench packages; a
    failure leaves no run folder and no profile files.
    """
    spec = dataclasses.replace(spec, out=spec.out.resolve())
    with tempfile.TemporaryDirectory(prefix="radixbench-profile-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "spec.pkl").write_bytes(pickle.dumps(spec))
        cmd = [
            *_scalene(),
            "run",
            "--cpu-only",
            "--no-stacks",
            "--program-path",
            str(SOURCE_ROOT),
            *scalene_filters(),
            "-o",
            str(tmp / "scalene.json"),
            profile_target.__file__,
            "---",
            str(tmp / "spec.pkl"),
            str(tmp / "staging"),
            str(tmp / "result.json"),
            *(["--torch-profiler"] if torch_profiler else []),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp)
        if proc.returncode != 0 or not (tmp / "result.json").is_file():
            raise _fail(proc, "profiled run failed")
        if not (tmp / "scalene.json").is_file():
            raise _fail(proc, "scalene wrote no profile")
        if _samples_in_packages(json.loads((tmp / "scalene.json").read_text())) == 0:
            raise RuntimeError(
                f"scalene recorded no samples in the radixbench packages under {SOURCE_ROOT} "
                "(too short a run? try more --requests)"
            )
        result = json.loads((tmp / "result.json").read_text())
        staged = Path(result["run_dir"])
        # plots, report.md and report.html from the staged tables, here, not under scalene:
        # drawing stays out of the profile (the report's summaries are computed in both: a
        # second or two). Under scalene they once failed outright ("cannot write the run"):
        # its os._exit raises SystemExit, so each forked drawing worker unwound the writer's
        # stack and AtomicRunDir removed the staging folder; AtomicRunDir now leaves a run to
        # the process that entered it.
        rerender(staged, progress=False)
        has_html = False
        if html:
            view = subprocess.run(
                [*_scalene(), "view", "--standalone", str(tmp / "scalene.json")],
                capture_output=True,
                text=True,
                check=False,
                cwd=tmp,
            )
            has_html = view.returncode == 0 and (tmp / "scalene-profile.html").is_file()
        with AtomicRunDir(spec.out, staged.name) as run:
            for entry in staged.iterdir():
                shutil.move(entry, run.tmp / entry.name)
            (run.tmp / "profile").mkdir(exist_ok=True)
            shutil.move(tmp / "scalene.json", run.tmp / "profile" / "scalene.json")
            if has_html:
                shutil.move(tmp / "scalene-profile.html", run.tmp / "profile" / "scalene.html")
    assert run.final is not None
    trace = result.get("torch_trace")
    return ProfileOutcome(
        run_dir=run.final,
        scalene_json=run.final / "profile" / "scalene.json",
        scalene_html=run.final / "profile" / "scalene.html" if has_html else None,
        torch_trace=run.final / Path(trace).relative_to(staged) if trace else None,
        equivalent=bool(result["ok"]),
    )
