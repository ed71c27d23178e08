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


class RunDirError(ValueError):
    """The parent of a run folder cannot hold one (a file, read-only), or writing the run
    failed (a full disk): one line naming the path."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


def remove_stale(parent: Path) -> list[Path]:
    """Remove the hidden ``.tmp-<name>-<pid>`` folders under ``parent`` whose process is gone
    (a run killed by SIGKILL or a power cut leaves its temporary folder behind); returns them.
    A folder whose process still runs is left alone."""
    removed = []
    for tmp in parent.glob(".tmp-*-*"):
        pid = tmp.name.rpartition("-")[2]
        if tmp.is_dir() and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


class AtomicRunDir:
    """A run folder that appears whole or not at all.

    ``with AtomicRunDir(parent) as run:`` writes go to ``run.tmp`` (hidden, under ``parent``);
    on success it is renamed to ``run.final`` = ``parent/<name or timestamp>`` (a ``-N`` suffix
    avoids clobbering an existing run); on any error, Ctrl-C and SIGTERM included (the CLI
    turns SIGTERM into an exception), it is removed, so a failed run never leaves a
    half-written folder nor touches a good one. Entering removes the temporary folders of
    earlier runs whose process is gone (:func:`remove_stale`). Raises :class:`RunDirError`
    (one line naming ``parent``) when ``parent`` is a file or cannot be written, and in place
    of an ``OSError`` raised while the run is written (a full disk: one line naming the file
    or the run folder, the folder removed). Only the process that entered finishes the run: a
    process forked inside the ``with`` that leaves it (by an exception) leaves the folder as
    it is.
    """

    def __init__(self, parent: Path, name: str | None = None) -> None:
        self.parent = parent
        self.stem = name or time.strftime("%Y%m%d-%H%M%S")
        #: the process that writes the run: only it may remove or rename ``tmp``
        self.pid = os.getpid()
        self.tmp = parent / f".tmp-{self.stem}-{self.pid}"
        self.final: Path | None = None

    def __enter__(self) -> AtomicRunDir:
        if self.parent.exists() and not self.parent.is_dir():
            raise RunDirError(f"{self.parent}: is a file, not a folder for run folders")
        try:
            self.parent.mkdir(parents=True, exist_ok=True)
            remove_stale(self.parent)
            self.tmp.mkdir()
        except OSError as e:
            why = e.strerror or type(e).__name__
            raise RunDirError(f"{self.parent}: cannot write a run folder there ({why})") from None
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, *_: object
    ) -> None:
        if os.getpid() != self.pid:
            # A process forked inside the ``with`` (the report's drawing workers) unwinding
            # the writer's stack: under scalene, whose ``os._exit`` raises ``SystemExit``,
            # every forked child ended here and removed the writer's folder. Not its run.
            return
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            if isinstance(exc, OSError):  # a full disk, a quota, a vanished folder...
                raise RunDirError(self._write_failed(exc)) from None
            return
        final, n = self.parent / self.stem, 1
        while final.exists():
            n += 1
            final = self.parent / f"{self.stem}-{n}"
        try:
            self.tmp.rename(final)
        except OSError as e:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise RunDirError(self._write_failed(e)) from None
        self.final = final

    def _write_failed(self, e: OSError) -> str:
        """One line for an ``OSError`` met while the run was written: the file (as it would
        have been named in the run folder) or the run folder, the reason, and that nothing
        was left behind."""
        path = self.parent / self.stem
        name = getattr(e, "filename", None)
        if name:
            try:
                path = path / Path(name).relative_to(self.tmp)
            except ValueError:
                path = Path(name)
        reason = e.strerror or " ".join(str(e).split()) or type(e).__name__
        return f"{path}: cannot write the run ({reason}); nothing was written"


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
