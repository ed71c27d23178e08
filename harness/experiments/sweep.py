"""Parameter sweeps on ``dask.distributed``: run every cell of a grid, resume, gather.

Each cell is one ``radixbench compare`` run (one grid point, every variant interleaved with the
baseline's A/A replica, one seed) in its own run folder ``<sweep>/cells/<cell key>/``, written
atomically, so a folder that exists is a finished cell:
a re-run skips it (resume), a cell whose worker died leaves no folder and is re-submitted by
dask's scheduler (up to ``distributed.scheduler.allowed-failures`` times), and the gathered
table is rebuilt from finished folders only and replaced atomically — partial results never
corrupt it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.harness.config.grid import Cell, Grid
from radixbench.harness.experiments.compare import CompareSpec, run_compare
from radixbench.harness.experiments.dask_runner import run_on_dask
from radixbench.harness.experiments.impl_failure import impl_failure
from radixbench.reports.diagnostics import axis_checks, load_check
from radixbench.reports.record import read_run
from radixbench.reports.sweep import plot_sweep
from radixbench.reports.tables import read_table, write_table

#: Per-op statistics gathered from each cell's ``summary_ops`` table.
OP_STATS = {
    "evict": ("p50_ns", "p99_ns"),
    "match_prefix": ("p50_ns", "p99_ns"),
    "insert": ("p50_ns", "p99_ns"),
}
#: Per-variant statistics gathered from each cell's ``summary_variants`` table.
VARIANT_STATS = ("prefix_hit_rate", "ttft_p50_s", "ttft_p99_s", "e2e_p50_s", "e2e_p99_s")
#: Verdict columns gathered per candidate and op: ``<op>_ratio``, ``<op>_ci_low``, ...
VERDICT_STATS = ("ratio", "ci_low", "ci_high", "verdict")


@dataclass(frozen=True)
class SweepOutcome:
    """``results``: the gathered table (one row per finished cell); ``cached``/``ran``: cells
    skipped because finished before / run now; ``failed``: (:func:`cell_label`, one-line
    reason)."""

    sweep_dir: Path
    results: pd.DataFrame
    cached: int
    ran: int
    failed: list[tuple[str, str]]
    plots: list[Path]


def cell_spec(cell: Cell, cells_dir: Path) -> CompareSpec:
    """The ``CompareSpec`` of one cell (its scenario with the cell's overrides; CPU)."""
    return CompareSpec(scenario=cell.load(), device="cpu", out=cells_dir)


@dataclass(frozen=True)
class CellFailed:
    """What :func:`run_cell` returns for a cell with bad input (the run's one-line error):
    returned, not raised, so dask neither retries it nor logs a "Compute Failed" traceback."""

    reason: str


def run_cell(cell: Cell, cells_dir: str) -> str | CellFailed:
    """Run one cell unless its folder already exists; returns the cell key, or
    :class:`CellFailed` when the cell's input is bad (``ValueError`` / ``OSError`` of
    :func:`~radixbench.harness.experiments.compare.run_compare`; nothing is written) or an
    implementation under test raised (:func:`~radixbench.harness.experiments.impl_failure.
    impl_failure`'s line). Runs on a worker."""
    out = Path(cells_dir)
    if (out / cell.key / "config.json").exists():
        return cell.key
    try:
        run_compare(
            cell_spec(cell, out),
            progress=False,
            run_name=cell.key,
            extra_meta={"cell": cell.canonical(), "cell_key": cell.key},
            full_report=False,
        )
    except Exception as e:
        failure = impl_failure(e)  # an implementation under test raised: named, not retried
        if failure is not None:
            return CellFailed(str(failure))
        if isinstance(e, (ValueError, OSError)):
            return CellFailed(_one_line(e))
        raise
    return cell.key


def _one_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def cell_label(cell: Cell) -> str:
    """``<key> (<param>=<value>, ..., seed <n>)``: a cell named for the reader."""
    params = ", ".join(f"{k}={v}" for k, v in cell.params.items())
    return f"{cell.key} ({params + ', ' if params else ''}seed {cell.seed})"


def _cell_rows(cell: Cell, folder: Path) -> list[dict[str, Any]]:
    """One row per variant of a finished cell (its A/A replica left out): the grid point, the
    variant's axes, the op and request statistics, whether the load rules flag it, the axes
    the cell could not compare and why (``not_compared``, :func:`_not_compared`), and, for a
    candidate, its verdicts against its baseline partner on its axis's ops."""
    tables, meta = read_run(folder)
    ops = read_table(folder, "summary_ops")
    var = read_table(folder, "summary_variants").set_index("variant")
    verdicts = read_table(folder, "verdicts")
    requests, timeseries, ops_frame = tables["requests"], tables["timeseries"], tables["ops"]
    assert requests is not None and ops_frame is not None  # a finished cell has both tables
    loads = {ld.variant: ld for ld in load_check(requests, timeseries, meta)}
    not_compared = _not_compared(ops_frame, meta.variants)
    rows = []
    for record in meta.variants:
        name = str(record["name"])
        if record.get("replica") is not None:
            continue
        row: dict[str, Any] = dict(cell.params)
        row.update(variant=name, **{k: v for k, v in record.items() if k != "name"})
        row.update(seed=cell.seed, cell=cell.key)
        for op, stats in OP_STATS.items():
            sel = ops[(ops["op"] == op) & (ops["variant"] == name)]
            for stat in stats:
                row[f"{op}_{stat}"] = float(sel[stat].iloc[0]) if len(sel) else float("nan")
        for stat in VARIANT_STATS:
            cell_value: Any = var.loc[name, stat] if name in var.index else float("nan")
            row[stat] = float(cell_value)
        load = loads.get(name)
        row["overloaded"] = bool(load is not None and load.overloaded)
        row["not_compared"] = not_compared
        mine = verdicts[(verdicts["candidate"] == name) & verdicts["metric"].str.endswith(" ns")]
        mine = mine[mine["axis"] != "replica"]
        if len(mine):
            row["baseline_variant"] = str(mine["baseline"].iloc[0])
        for _, v in mine.iterrows():
            op = str(v["metric"]).removesuffix(" ns")
            for stat in VERDICT_STATS:
                row[f"{op}_{stat}"] = v[stat]
        rows.append(row)
    return rows


def _not_compared(ops: pd.DataFrame, variants: list[dict[str, Any]]) -> str:
    """``"evictor: evict ran 0 times: ... (the KV pool never filled)"``: each axis the cell's
    variants vary (its A/A replica left out) that its ops did not exercise, with the reason
    its report gives (:func:`~radixbench.reports.diagnostics.axis_checks`: the op never ran,
    or ran on trivial inputs), joined by ``"; "``; "" when every varied axis was compared."""
    records = [r for r in variants if r.get("replica") is None]
    axes = [a for a in ("evictor", "matcher", "flatten", "impl")
            if len({str(r.get(a)) for r in records}) > 1]  # fmt: skip
    checks = axis_checks(ops, axes) if axes else {}
    return "; ".join(f"{a}: {c.reason}" for a, c in checks.items() if not c.ok)


def gather(grid: Grid, cells_dir: Path) -> pd.DataFrame:
    """One row per finished cell and variant (:func:`_cell_rows`): parameters, the variant's
    axes, seed, summary statistics, the overload flag, the ratios with CIs."""
    rows = []
    for cell in grid.cells:
        folder = cells_dir / cell.key
        if (folder / "config.json").exists():
            rows += _cell_rows(cell, folder)
    return pd.DataFrame(rows)


def run_sweep(
    grid: Grid,
    out: Path,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    cell_fn: Callable[[Cell, str], str | CellFailed] = run_cell,
) -> SweepOutcome:
    """Run the unfinished cells of ``grid`` on dask, then gather and plot everything finished.

    ``out``: the sweep folder (cells under ``out/cells``); ``scheduler``: address of an
    existing cluster (``tcp://host:port``), else a ``LocalCluster`` of ``workers`` processes
    (default: one per core; :mod:`~radixbench.harness.experiments.dask_runner`). Stale
    temporary folders of killed runs are removed first. A cell with bad input
    (:class:`CellFailed`) or that raises is reported in ``failed`` with one line, not retried
    forever; the local cluster's worker logs are silenced (a raising cell would otherwise print
    dask's "Compute Failed" traceback).
    """
    cells_dir = out / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    for stale in cells_dir.glob(".tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    pending = [c for c in grid.cells if not (cells_dir / c.key / "config.json").exists()]
    cached = len(grid.cells) - len(pending)
    failed: list[tuple[str, str]] = []
    if pending:

        def submit(client: Any) -> dict[Any, Cell]:
            return {
                client.submit(
                    cell_fn, c, str(cells_dir), key=f"cell-{c.key}", retries=1, pure=False
                ): c
                for c in pending
            }

        def done(cell: Cell, fut: Any) -> None:
            exc = fut.exception()
            result = fut.result() if exc is None else CellFailed(_one_line(exc))
            if isinstance(result, CellFailed):
                failed.append((cell_label(cell), result.reason))

        run_on_dask(
            submit,
            done,
            scheduler=scheduler,
            workers=workers,
            progress=progress,
            desc="sweep",
            unit="cell",
            total=len(grid.cells),
            initial=cached,
        )
    results = gather(grid, cells_dir)
    write_table(results, out, "results")
    plots = plot_sweep(results, grid.params, out / "plots") if len(results) else []
    return SweepOutcome(out, results, cached, len(pending) - len(failed), failed, plots)
