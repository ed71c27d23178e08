"""The rendered half of a run's report (:func:`~radixbench.reports.pipeline.write_report`): its
plots, ``report.md`` and ``report.html``.

The drawing is prepared while the report's tables are computed: :func:`start_plots` forks, as
soon as the run's frames are validated, the drawing processes
(:class:`~radixbench.reports.drawing.Drawing`), which import matplotlib and wait;
:func:`finish_render` (after the answer) adds the verdict bars, has every figure drawn, in
parallel, and writes ``report.md`` and ``report.html`` (which embeds them). matplotlib is
imported by the drawing processes, or here when drawing serially.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from radixbench.reports.drawing import Drawing, PlotJob
from radixbench.reports.hicache import has_tiers
from radixbench.reports.record import RunMeta

if TYPE_CHECKING:
    from tqdm import tqdm

    from radixbench.reports.pipeline import ReportResult

__all__ = ["N_RENDER_STEPS", "finish_render", "frame_plots", "start_plots"]

#: Steps of :func:`finish_render` counted by the progress bar: 9 plots, report.md, report.html.
N_RENDER_STEPS = 11
_PLOTS, _RUN, _TIERS = (f"radixbench.reports.{m}" for m in ("plots", "plots_run", "plots_tiers"))
#: The figure drawn from the verdicts, first in the report's order; then :func:`frame_plots`'.
VERDICT_BARS = "verdict_bars"

Frames = tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None, pd.DataFrame | None]


def frame_plots(
    frames: Frames, meta: RunMeta, extra: Mapping[str, pd.DataFrame], svg: bool
) -> dict[str, PlotJob]:
    """The figures drawn from the run's frames = (requests, ops, timeseries, metrics) alone, in
    the report's order: latency CDFs, cost scatters, request CDFs, hit rate over time (with
    ``meta``'s ceiling), KV and queue over time (with a timeseries), HiCache's tiers and links
    (with tier columns and the ``transfers`` / ``tiers`` tables of ``extra``)."""
    requests, ops, timeseries, _ = frames
    ceiling = meta.hit_rate_ceiling
    kw = {"svg": svg}
    jobs = {
        "op_cdf": PlotJob(_PLOTS, "plot_op_cdf", (ops,), kw),
        "evict_vs_leaves": PlotJob(_PLOTS, "plot_evict_vs_leaves", (ops,), kw),
        "cost_vs_tree": PlotJob(_RUN, "plot_cost_vs_tree", (ops,), kw),
        "match_vs_len": PlotJob(_PLOTS, "plot_match_vs_len", (ops,), kw),
        "match_vs_matched": PlotJob(_RUN, "plot_match_vs_matched", (ops,), kw),
        "request_cdfs": PlotJob(_RUN, "plot_request_cdfs", (requests,), kw),
        "hit_rate_over_time": PlotJob(
            _RUN, "plot_hit_rate_over_time", (requests,),
            {"ceiling": ceiling if isinstance(ceiling, Mapping) else None, **kw},
        ),
    }  # fmt: skip
    if not (ops["op"] == "evict").any():
        del jobs["evict_vs_leaves"]  # evict never ran: no empty plot
    if timeseries is not None:
        jobs["kv_queue_over_time"] = PlotJob(_RUN, "plot_kv_queue_over_time", (timeseries,), kw)
    if has_tiers(requests):
        jobs["tier_hits_over_time"] = PlotJob(_TIERS, "plot_tier_hits_over_time", (requests,), kw)
        transfers, tiers = extra.get("transfers"), extra.get("tiers")
        if transfers is not None and tiers is not None:
            jobs["links_over_time"] = PlotJob(
                _TIERS, "plot_links_over_time", (transfers, tiers), kw
            )
    return jobs


def start_plots(
    run_dir: Path, frames: Frames, meta: RunMeta, extra: Mapping[str, pd.DataFrame], svg: bool
) -> Drawing:
    """Prepare to draw :func:`frame_plots` into ``run_dir/plots``: the drawing processes forked
    where there are cores (nothing yet otherwise); :func:`finish_render` has them drawn."""
    return Drawing(frame_plots(frames, meta, extra, svg), run_dir / "plots", late=1)


def finish_render(
    result: ReportResult,
    run_dir: Path,
    frames: Frames,
    meta: RunMeta,
    equivalence: Mapping[str, Any],
    svg: bool,
    bar: tqdm,
    drawing: Drawing,
) -> None:
    """Plots, ``report.md`` and ``report.html`` of ``write_report`` (fills ``result``'s
    ``plots``, ``report_md``, ``report_html``): adds the verdict bars to ``drawing`` (started by
    :func:`start_plots` on the same frames), waits for every figure, writes the reports."""
    from radixbench.reports.html import write_report_html
    from radixbench.reports.markdown import write_report_md

    _, _, _, metrics = frames
    verdicts = result["verdicts"]
    claims = verdicts[verdicts["verdict"] != "not compared"]  # no plot claims either
    drawing.add(VERDICT_BARS, PlotJob(_RUN, "plot_verdict_bars", (claims,), {"svg": svg}))
    plots = result["plots"]
    bar.set_postfix_str("plots")
    for name, path in drawing.results():  # in parallel where there are cores
        plots[name] = path
        bar.update()
    # in the report's order, whatever order they were drawn in
    order = [VERDICT_BARS, *(n for n in drawing.names if n != VERDICT_BARS)]
    result["plots"] = plots = {name: plots[name] for name in order}
    bar.update(max(0, N_RENDER_STEPS - 2 - len(plots)))  # the skipped plots
    bar.set_postfix_str("report.md")
    result["report_md"] = write_report_md(
        run_dir,
        meta=meta,
        op_summary=result["op_summary"],
        variant_summary=result["variant_summary"],
        speedups=result["speedups"],
        equivalence=equivalence,
        plots=plots,
        tables=result["tables"],
        verdicts=verdicts,
        metrics=metrics,
        answer=result["answer"],
        summary=result["summary"],
    )
    bar.update()
    bar.set_postfix_str("report.html")
    result["report_html"] = write_report_html(
        run_dir,
        meta=meta,
        equivalence=equivalence,
        frames={
            "Verdicts": verdicts,
            "Variants": result["variant_summary"],
            "Serving metrics": metrics,
            "Speed-ups": result["speedups"],
            "Per-op latency": result["op_summary"],
        },
        plots=plots,
        answer=result["answer"],
        summary=result["summary"],
    )
    bar.update()
