"""The Implementations section of the reports: which cache code each variant ran.

``meta["implementations"]`` (written by ``radixbench.harness.config.impl.implementations``;
absent in older runs) lists one entry per implementation: ``impl`` (label), ``spec``, ``version``,
``origin``, ``class``, ``files`` (sha256 by path), ``files_sha256`` (one digest over them).
Shared by ``report.md`` and ``report.html``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["IMPL_COLUMNS", "IMPL_FILE_COLUMNS", "implementation_frames"]

#: Columns of the implementations table (one row per implementation).
IMPL_COLUMNS = ["impl", "spec", "version", "origin", "class", "files", "files_sha256"]
#: Columns of the files table (one row per file an implementation loaded).
IMPL_FILE_COLUMNS = ["impl", "file", "sha256"]


def implementation_frames(meta: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """``(implementations, files)`` tables from ``meta["implementations"]``, or ``None`` when
    the run recorded none. ``files`` in the first is the number of files; missing fields show
    as ``None``."""
    entries = meta.get("implementations")
    if not isinstance(entries, list) or not entries:
        return None
    rows, files = [], []
    for e in entries:
        if not isinstance(e, Mapping):
            continue
        digests = e.get("files")
        digests = digests if isinstance(digests, Mapping) else {}
        rows.append(
            {
                **{c: e.get(c) for c in IMPL_COLUMNS if c != "files"},
                "files": len(digests),
            }
        )
        files += [
            {"impl": e.get("impl"), "file": str(f), "sha256": str(digests[f])}
            for f in sorted(digests)
        ]
    return (
        pd.DataFrame(rows, columns=IMPL_COLUMNS),
        pd.DataFrame(files, columns=IMPL_FILE_COLUMNS),
    )
