"""A saved run read back (:func:`load_run`) and its reports re-rendered (:func:`rerender`):
``radixbench plot RUN_DIR`` re-renders every table, plot and report of a finished run from its
saved Parquet tables, without re-running the simulation; the notebooks read runs with
:func:`load_run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["RunFolderError", "load_run", "rerender"]

# pandas, pyarrow and matplotlib are imported inside the functions: a bad RUN_DIR is answered
# without loading them.


class RunFolderError(ValueError):
    """A folder is not a readable run folder; the message is one line naming it (or the file)."""


def load_run(run_dir: Path) -> dict[str, Any]:
    """Read a run folder: ``requests``/``ops`` (required), ``timeseries``/``metrics`` (None when
    absent, as in old runs) and ``meta`` from ``config.json`` (``{}`` when absent).

    Raises :class:`RunFolderError` naming the folder or file when it is not a readable run
    folder.
    """
    if not run_dir.is_dir():
        what = "a file" if run_dir.exists() else "no such directory"
        raise RunFolderError(
            f"{run_dir}: not a run folder ({what}; give one written by compare, e.g. runs/<ts>)"
        )
    for stem in ("requests", "ops"):
        if not (run_dir / f"{stem}.parquet").is_file():
            raise RunFolderError(f"{run_dir}: not a run folder (missing {stem}.parquet)")
    from radixbench.reports.tables import read_table

    out: dict[str, Any] = {}
    for stem in ("requests", "ops", "timeseries", "metrics"):
        path = run_dir / f"{stem}.parquet"
        if not path.is_file():
            out[stem] = None
            continue
        try:
            out[stem] = read_table(run_dir, stem)
        except Exception as e:  # pyarrow raises several types on a corrupt file
            raise RunFolderError(f"{path}: unreadable Parquet ({type(e).__name__})") from None
    config = run_dir / "config.json"
    try:
        out["meta"] = json.loads(config.read_text()) if config.is_file() else {}
    except json.JSONDecodeError as e:
        raise RunFolderError(f"{config}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(out["meta"], dict):
        raise RunFolderError(f"{config}: expected a JSON object")
    return out


def rerender(
    run_dir: Path, n_resamples: int = 1000, *, svg: bool = False, progress: bool | None = None
) -> dict[str, Any]:
    """Re-run :func:`~radixbench.reports.write_report` on the tables saved in ``run_dir``
    (files replaced atomically one by one); the equivalence verdict is recomputed from the
    per-request table. ``svg``: also write SVG plots; ``progress``: a bar over the report steps
    on stderr (None = only on a terminal). Returns the :class:`~radixbench.reports.ReportResult`.
    Raises :class:`RunFolderError` (one line) when ``run_dir`` is no run folder or its tables
    cannot be rendered.
    """
    from radixbench.harness.experiments.equivalence import check_equivalence
    from radixbench.reports import write_report

    run = load_run(run_dir)
    requests = run["requests"]
    try:
        return dict(
            write_report(
                run_dir,
                requests,
                run["ops"],
                run["meta"],
                check_equivalence(requests),
                timeseries=run["timeseries"],
                metrics=run["metrics"],
                n_resamples=n_resamples,
                svg=svg,
                progress=progress,
            )
        )
    except (KeyError, ValueError) as e:
        raise RunFolderError(f"{run_dir}: {str(e).splitlines()[0]}") from None
