"""Profiling a compare run with scalene (CPU-only) and reading its hottest lines.

:func:`profile_compare` runs :mod:`radixbench.harness.profile_target` as a separate program
under ``scalene run --cpu-only`` (scalene >= 2: ``scalene run [options] prog.py --- args``),
restricted to the radixbench source folders, then renders the JSON to a standalone HTML page
with ``scalene view --standalone``. Both files are moved into ``<run_dir>/profile/``:
``scalene.json`` and ``scalene.html``. :func:`hottest_lines` ranks the JSON's lines by CPU
time.
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radixbench.harness import profile_target
from radixbench.harness.compare import CompareSpec

__all__ = ["HotLine", "ProfileOutcome", "hottest_lines", "profile_compare"]

#: The repository root of the radixbench packages (cache/, sim/, harness/, ... live in it).
SOURCE_ROOT = Path(profile_target.__file__).resolve().parent.parent


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
    file, line). Lines with no CPU time are left out. Raises :class:`ValueError` when
    ``profile`` lacks the ``files`` mapping of scalene's JSON format."""
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
                code = str(line.get("line", "")).strip()
                rows.append(HotLine(str(fname), int(line["lineno"]), total, py, native, code))
    rows.sort(key=lambda r: (-r.cpu_percent, r.file, r.lineno))
    return rows[:top]


def _scalene() -> list[str]:
    """Command prefix running the scalene of this interpreter's environment."""
    exe = Path(sys.executable).with_name("scalene")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "scalene"]


def profile_compare(
    spec: CompareSpec, torch_profiler: bool = False, html: bool = True
) -> ProfileOutcome:
    """Run ``spec`` under scalene (CPU only) and store the profile in the new run folder.

    ``torch_profiler``: also record a torch profiler Chrome trace of the batch builder
    (:func:`~radixbench.harness.profile_target.run_target`). ``html``: also render
    ``scalene.html``. Raises :class:`RuntimeError` (one line, with the tail of scalene's
    output) when the profiled run fails; a failed run leaves no run folder (compare's atomic
    folder) and no profile files.
    """
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
            "--profile-exclude",
            "site-packages",
            "-o",
            str(tmp / "scalene.json"),
            profile_target.__file__,
            "---",
            str(tmp / "spec.pkl"),
            str(tmp / "result.json"),
            *(["--torch-profiler"] if torch_profiler else []),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp)
        if proc.returncode != 0 or not (tmp / "result.json").is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"profiled run failed (exit {proc.returncode}): {tail[0]}")
        result = json.loads((tmp / "result.json").read_text())
        run_dir = Path(result["run_dir"])
        out = run_dir / "profile"
        out.mkdir(exist_ok=True)
        scalene_json = Path(shutil.move(tmp / "scalene.json", out / "scalene.json"))
        scalene_html = None
        if html:
            view = subprocess.run(
                [*_scalene(), "view", "--standalone", str(scalene_json)],
                capture_output=True,
                text=True,
                check=False,
                cwd=tmp,
            )
            if view.returncode == 0 and (tmp / "scalene-profile.html").is_file():
                scalene_html = Path(shutil.move(tmp / "scalene-profile.html", out / "scalene.html"))
    trace = result.get("torch_trace")
    return ProfileOutcome(
        run_dir=run_dir,
        scalene_json=scalene_json,
        scalene_html=scalene_html,
        torch_trace=Path(trace) if trace else None,
        equivalent=bool(result["ok"]),
    )
