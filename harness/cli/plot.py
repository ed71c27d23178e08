"""``radixbench plot RUN_DIR``: re-render every table, plot and report of a finished run from
its saved Parquet tables, without re-running the simulation."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from radixbench.harness.cli.util import UsageError

# pandas, pyarrow and matplotlib are imported inside the functions: `radixbench --help` and a bad
# RUN_DIR answer without loading them.


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``plot`` to the subcommands."""
    p = sub.add_parser("plot", help="re-render tables, plots and reports of a saved run")
    p.set_defaults(func=run)
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder of compare")
    p.add_argument(
        "--resamples",
        type=int,
        default=1000,
        help="bootstrap resamples per verdict (default 1000)",
    )
    p.add_argument("--svg", action="store_true", help="also write each plot as SVG beside its PNG")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def load_run(run_dir: Path) -> dict[str, Any]:
    """Read a run folder: ``requests``/``ops`` (required), ``timeseries``/``metrics`` (None when
    absent, as in old runs) and ``meta`` from ``config.json`` (``{}`` when absent).

    Raises :class:`UsageError` naming the folder or file when it is not a readable run folder.
    """
    if not run_dir.is_dir():
        what = "a file" if run_dir.exists() else "no such directory"
        raise UsageError(
            f"{run_dir}: not a run folder ({what}; give one written by compare, e.g. runs/<ts>)"
        )
    for stem in ("requests", "ops"):
        if not (run_dir / f"{stem}.parquet").is_file():
            raise UsageError(f"{run_dir}: not a run folder (missing {stem}.parquet)")
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
            raise UsageError(f"{path}: unreadable Parquet ({type(e).__name__})") from None
    config = run_dir / "config.json"
    try:
        out["meta"] = json.loads(config.read_text()) if config.is_file() else {}
    except json.JSONDecodeError as e:
        raise UsageError(f"{config}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(out["meta"], dict):
        raise UsageError(f"{config}: expected a JSON object")
    return out


def rerender(
    run_dir: Path, n_resamples: int = 1000, *, svg: bool = False, progress: bool | None = None
) -> dict[str, Any]:
    """Re-run :func:`~radixbench.reports.write_report` on the tables saved in ``run_dir``
    (files replaced atomically one by one); the equivalence verdict is recomputed from the
    per-request table. ``svg``: also write SVG plots; ``progress``: a bar over the report steps
    on stderr (None = only on a terminal). Returns the :class:`~radixbench.reports.ReportResult`.
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
        raise UsageError(f"{run_dir}: {str(e).splitlines()[0]}") from None


def run(args: argparse.Namespace) -> int:
    """Re-render the run; exit 0."""
    if args.resamples < 1:
        raise UsageError(f"--resamples must be >= 1, got {args.resamples}")
    progress = False if args.no_progress else None
    result = rerender(args.run_dir, args.resamples, svg=args.svg, progress=progress)
    print(f"re-rendered {len(result['tables'])} tables and {len(result['plots'])} plots")
    print(f"report: {result['report_md']}\nhtml:   {result['report_html']}")
    return 0
