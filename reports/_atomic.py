"""Atomic replacement of output files.

Every file the report layer writes (Parquet/CSV tables, PNG plots, ``report.md``) goes through
:func:`atomic_paths`: the content is first written to a hidden temporary file in the *same*
directory as its target and only moved over the target with :func:`os.replace` once every
file of the group was written successfully. A failure part-way therefore leaves the previous
good files untouched and no temporary files behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_paths"]


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _temp_beside(target: Path) -> Path:
    """Create an empty hidden temporary file next to ``target`` and return its path.

    The file lives in ``target``'s directory so that the final :func:`os.replace` is a rename
    within one file system (atomic on POSIX). ``mkstemp`` creates it private (0600); it gets
    the mode an ordinary ``open()`` would give (0666 minus the umask), so published reports
    are readable like any other file.
    """
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    return Path(name)


@contextlib.contextmanager
def atomic_paths(*targets: Path) -> Iterator[tuple[Path, ...]]:
    """Stage writes to ``targets`` and publish them together.

    Yields one temporary path per target (same order). The caller writes each file's content to
    its temporary path. On a clean exit of the ``with`` block each temporary file replaces its
    target via :func:`os.replace`; if the block raises, all temporary files are deleted, the
    targets are left as they were, and the exception propagates.

    Parent directories of the targets are created if missing.

    Note: the group is published target by target, so a crash *during* the final renames (not
    an exception in the caller's serialization) may publish a prefix of the group; each single
    file is still either the old or the new complete version.
    """
    temps: list[Path] = []
    try:
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            temps.append(_temp_beside(target))
        yield tuple(temps)
        for temp, target in zip(temps, targets, strict=True):
            os.replace(temp, target)
    finally:
        for temp in temps:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
