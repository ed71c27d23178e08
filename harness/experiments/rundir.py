"""Run folders written atomically, and the environment block of a report."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch


class AtomicRunDir:
    """A run folder that appears whole or not at all.

    ``with AtomicRunDir(parent) as run:`` writes go to ``run.tmp`` (hidden, under ``parent``);
    on success it is renamed to ``run.final`` = ``parent/<name or timestamp>`` (a ``-N`` suffix
    avoids clobbering an existing run); on any error, Ctrl-C included, it is removed, so a failed
    run never leaves a half-written folder nor touches a good one.
    """

    def __init__(self, parent: Path, name: str | None = None) -> None:
        self.parent = parent
        self.stem = name or time.strftime("%Y%m%d-%H%M%S")
        self.tmp = parent / f".tmp-{self.stem}-{os.getpid()}"
        self.final: Path | None = None

    def __enter__(self) -> AtomicRunDir:
        self.parent.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        final, n = self.parent / self.stem, 1
        while final.exists():
            n += 1
            final = self.parent / f"{self.stem}-{n}"
        self.tmp.rename(final)
        self.final = final


def environment() -> dict[str, Any]:
    """CPU, cores, Python, torch, CUDA device (if any) and git commit of this checkout."""
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                cwd=Path(__file__).resolve().parent,
                check=False,
            ).stdout.strip()
            or "unknown"
        )
    except OSError:
        commit = "unknown"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "git_commit": commit,
        "platform": platform.platform(),
    }
