"""The Implementations section of the reports: which cache code each variant ran.

``RunMeta.implementations`` (written by ``radixbench.harness.config.impl.implementations``;
empty in older runs) lists one entry per implementation: ``impl`` (label), ``spec``,
``version``, ``origin``, ``class``, ``tree_core`` and why (when the implementation has one),
``files`` (sha256 by path), ``files_sha256`` (one digest over them), ``reference`` (the
radixbench algorithms its own code runs). Shared by ``report.md`` and ``report.html``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from radixbench.reports.record import RunMeta

__all__ = ["IMPL_COLUMNS", "IMPL_FILE_COLUMNS", "implementation_frames"]

#: Columns of the implementations table (one row per implementation).
IMPL_COLUMNS = [
    "impl", "spec", "version", "origin", "class", "tree_core", "files", "files_sha256",
]  # fmt: skip
#: Columns of the files table (one row per file an implementation loaded).
IMPL_FILE_COLUMNS = ["impl", "file", "sha256"]


def implementation_frames(meta: RunMeta) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """``(implementations, files)`` tables from ``meta.implementations``, or ``None`` when
    the run recorded none. ``files`` in the first is the number of files; ``tree_core`` the
    core and why it was chosen; missing fields show as ``None``."""
    entries = meta.implementations
    if not entries:
        return None
    rows, files = [], []
    for e in entries:
        if not isinstance(e, Mapping):
            continue
        digests = e.get("files")
        digests = digests if isinstance(digests, Mapping) else {}
        core = e.get("tree_core")
        why = e.get("tree_core_reason")
        rows.append(
            {
                **{c: e.get(c) for c in IMPL_COLUMNS if c != "files"},
                "tree_core": f"{core} ({why})" if core and why else core,
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
