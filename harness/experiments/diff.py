"""``radixbench diff RUN_A RUN_B``'s work: read two saved runs, compare them
(:func:`radixbench.reports.diff.diff_runs`) and write ``diff.md`` / ``diff.html`` into a new
folder (atomically, as a run folder)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from radixbench.harness.experiments.equivalence import check_equivalence
from radixbench.harness.experiments.rerender import RunFolderError
from radixbench.harness.experiments.rundir import AtomicRunDir
from radixbench.reports._atomic import atomic_paths
from radixbench.reports.diff import RunDiff, diff_html, diff_markdown, diff_runs
from radixbench.reports.record import RecordError, read_run
from radixbench.reports.tables import read_table, write_table

__all__ = ["DiffOutcome", "run_diff"]


@dataclass(frozen=True)
class DiffOutcome:
    """``folder``: where ``diff.md``, ``diff.html`` and the tables were written; ``diff``: the
    comparison; ``markdown``: ``diff.md``'s text."""

    folder: Path
    diff: RunDiff
    markdown: str


def run_diff(run_a: Path, run_b: Path, out: Path, n_resamples: int = 1000) -> DiffOutcome:
    """Compare the saved runs ``run_a`` and ``run_b`` and write the result into a new folder
    ``out/diff-<timestamp>`` (``diff.md``, ``diff.html``, ``diff_ops`` and ``diff_requests``
    tables), whole or not at all. Reads both runs' tables and records (and their verdicts, for
    the A/A noise floors). Raises :class:`RunFolderError` (one line naming the folder or file)
    when either is not a readable run, or the runs share no variant."""
    runs = []
    for folder in (run_a, run_b):
        try:
            tables, meta = read_run(folder)
        except RecordError as e:
            raise RunFolderError(str(e)) from None
        verdicts = (
            read_table(folder, "verdicts") if (folder / "verdicts.parquet").is_file() else None
        )
        runs.append((tables, meta, verdicts))
    (ta, ma, va), (tb, mb, vb) = runs
    assert ta["requests"] is not None and tb["requests"] is not None
    try:
        diff = diff_runs(
            (ta, ma),
            (tb, mb),
            verdicts=(va, vb),
            equivalence=(
                bool(check_equivalence(ta["requests"])["ok"]),
                bool(check_equivalence(tb["requests"])["ok"]),
            ),
            labels=(str(run_a), str(run_b)),
            n_resamples=n_resamples,
        )
    except ValueError as e:
        raise RunFolderError(str(e)) from None
    md = diff_markdown(diff)
    with AtomicRunDir(out, time.strftime("diff-%Y%m%d-%H%M%S")) as run:
        for name, text in (("diff.md", md), ("diff.html", diff_html(diff))):
            with atomic_paths(run.tmp / name) as (tmp,):
                tmp.write_text(text, encoding="utf-8")
        write_table(diff.ops, run.tmp, "diff_ops")
        write_table(diff.requests, run.tmp, "diff_requests")
    assert run.final is not None
    return DiffOutcome(run.final, diff, md)
