"""A saved run's reports re-rendered (:func:`rerender`): ``radixbench plot RUN_DIR`` re-renders
every table, plot and report of a finished run from its saved Parquet tables and its record
(``radixbench.reports.record.read_run``), without re-running the simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["RunFolderError", "rerender"]

# pandas, pyarrow and matplotlib are imported inside the functions: a bad RUN_DIR is answered
# without loading them.


class RunFolderError(ValueError):
    """A folder is not a readable run folder; the message is one line naming it (or the file)."""


def rerender(
    run_dir: Path, n_resamples: int = 1000, *, svg: bool = False, progress: bool | None = None
) -> dict[str, Any]:
    """Re-run :func:`~radixbench.reports.pipeline.write_report` on the tables saved in ``run_dir``
    with everything the run was made with (its record, ``config.json``: the ``--baseline``,
    the variants' axes, the scheduler settings), files replaced atomically one by one; the
    equivalence verdict is recomputed from the per-request table. ``svg``: also write SVG
    plots; ``progress``: a bar over the report steps on stderr (None = only on a terminal).
    Returns the :class:`~radixbench.reports.pipeline.ReportResult`. Raises :class:`RunFolderError`
    (one line naming the folder or file) when ``run_dir`` is no readable run folder or its
    tables cannot be rendered."""
    from radixbench.harness.experiments.equivalence import check_equivalence, exemption
    from radixbench.reports.pipeline import write_report
    from radixbench.reports.record import RecordError, read_run

    try:
        tables, meta = read_run(run_dir)
    except RecordError as e:
        raise RunFolderError(str(e)) from None
    requests, ops = tables["requests"], tables["ops"]
    assert requests is not None and ops is not None  # read_run requires both
    if isinstance(meta.extra, dict) and "cluster" in meta.extra:
        return _rerender_cluster(run_dir, tables, meta, n_resamples, svg)
    try:
        return dict(
            write_report(
                run_dir,
                requests,
                ops,
                meta,
                check_equivalence(requests, exemption(meta.clock)),
                baseline=meta.baseline,
                timeseries=tables["timeseries"],
                metrics=tables["metrics"],
                n_resamples=n_resamples,
                svg=svg,
                progress=progress,
            )
        )
    except (KeyError, ValueError) as e:
        raise RunFolderError(f"{run_dir}: {str(e).splitlines()[0]}") from None


def _rerender_cluster(
    run_dir: Path, tables: dict[str, Any], meta: Any, n_resamples: int, svg: bool
) -> dict[str, Any]:
    """A cluster run (its record has ``extra["cluster"]``): the routing report
    (:func:`radixbench.reports.routing_report.write_routing_report`) from its saved tables,
    the ``load`` table included."""
    from radixbench.harness.experiments.equivalence import check_equivalence, exemption
    from radixbench.reports.routing_report import write_routing_report
    from radixbench.reports.tables import read_table

    try:
        load = read_table(run_dir, "load")
        requests = tables["requests"]
        return write_routing_report(
            run_dir,
            requests,
            tables["ops"],
            tables["timeseries"],
            tables["metrics"],
            load,
            meta,
            check_equivalence(requests, exemption(meta.clock, meta.extra.get("cluster"))),
            meta.baseline,
            svg=svg,
            n_resamples=n_resamples,
        )
    except (KeyError, ValueError, OSError) as e:
        raise RunFolderError(f"{run_dir}: {str(e).splitlines()[0]}") from None
