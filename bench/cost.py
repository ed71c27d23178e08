"""``radixbench bench cost``: AIC's step times against the roofline's, per preset, over a grid.

The grid (:class:`CostGrid`): prefill of 1-8 requests x 512-16k tokens each x 0-90 % of them
cached, and decode of batch 1-256 x 1k-32k context tokens per request. For every bundled
preset AIC covers (an ``[aic]`` table: the H100 and H200 ones) each shape is timed by
``roofline:PRESET`` and by the preset's AIC model (:mod:`radixbench.sim.cost_aic`), and for
prefill also by AIC's own uniform-batch call ``predict_prefill_latency(k, isl, prefix)``: the
``decomposition`` column is radixbench's composed AIC step (per-request attention shares plus
the shared GEMM pass, memoized on rounded shapes) over that call, minus one — the measured
error of the decomposition and the rounding together. Presets AIC does not cover (A100) are
listed, not timed. Pure CPU: seconds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from radixbench.sim.cost import cost_info, load_cost_model, preset_names
from radixbench.sim.cost_aic import AicCostModel

__all__ = ["CostGrid", "cost_rows", "plot", "summary", "uncovered"]


@dataclass(frozen=True)
class CostGrid:
    """Shapes: ``requests`` per prefill x ``tokens`` per request (cached + new) x ``cached``
    fraction; decode ``batch`` x ``context`` tokens per request."""

    requests: tuple[int, ...] = (1, 2, 4, 8)
    tokens: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)
    cached: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 0.9)
    batch: tuple[int, ...] = (1, 4, 16, 64, 256)
    context: tuple[int, ...] = (1024, 2048, 4096, 8192, 16384, 32768)

    @classmethod
    def quick(cls) -> CostGrid:
        return cls((1, 8), (512, 16384), (0.0, 0.9), (1, 256), (1024, 32768))

    def prefill_shapes(self) -> list[tuple[int, int, int]]:
        """``(requests, new tokens, cached tokens)`` per request, in grid order."""
        out = []
        for k, isl, f in itertools.product(self.requests, self.tokens, self.cached):
            c = round(isl * f)
            out.append((k, isl - c, c))
        return out


def aic_presets() -> list[str]:
    """The bundled presets whose step times come from AIC (those with an ``[aic]`` table)."""
    return [p for p in preset_names() if isinstance(load_cost_model(p), AicCostModel)]


def uncovered() -> list[str]:
    """The bundled presets AIC does not cover: they run on the roofline."""
    covered = set(aic_presets())
    return [p for p in preset_names() if p not in covered]


def cost_rows(grid: CostGrid, presets: list[str] | None = None) -> pd.DataFrame:
    """One row per preset and shape: ``preset``, ``phase`` (prefill / decode), ``requests``,
    ``new_tokens``, ``cached_tokens`` (prefill; per request), ``batch``, ``context`` (decode;
    per request), ``aic_s``, ``roofline_s``, ``ratio`` (AIC / roofline) and, for prefill,
    ``decomposition`` (composed / AIC's uniform call - 1). Raises ``ValueError`` when
    aiconfigurator-core is missing (no preset is then AIC)."""
    names = presets if presets is not None else aic_presets()
    if not names:
        raise ValueError("no preset runs on AIC: is aiconfigurator-core installed?")
    rows = []
    for name in names:
        aic, roof = load_cost_model(name), load_cost_model(f"roofline:{name}")
        if not isinstance(aic, AicCostModel):
            raise ValueError(f"preset {name}: AIC does not cover it (it runs on the roofline)")
        handle = aic._engine().handle
        for k, n, c in grid.prefill_shapes():
            a = aic.prefill_time([n] * k, [c] * k)
            own = handle.predict_prefill_latency(k, n + c, c) * 1e-3 + aic.step_overhead_s
            r = roof.prefill_time([n] * k, [c] * k)
            rows.append(dict(preset=name, phase="prefill", requests=k, new_tokens=n,
                             cached_tokens=c, aic_s=a, roofline_s=r, ratio=a / r,
                             decomposition=a / own - 1))  # fmt: skip
        fn, rfn = aic.decode_time_fn(), roof.decode_time_fn()
        for b, ctx in itertools.product(grid.batch, grid.context):
            a, r = fn(b, b * ctx), rfn(b, b * ctx)
            rows.append(dict(preset=name, phase="decode", batch=b, context=ctx,
                             aic_s=a, roofline_s=r, ratio=a / r))  # fmt: skip
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per preset and phase (prefill split into long, >= 4k new tokens, and short extends):
    the AIC / roofline ratio's min, median and max, and the largest |decomposition error|."""
    df = rows.copy()
    long = df["phase"].eq("prefill") & (df["new_tokens"] >= 4096)
    df["shapes"] = np.where(df["phase"].eq("decode"), "decode",
                            np.where(long, "prefill >= 4k new", "prefill < 4k new"))  # fmt: skip
    out = df.groupby(["preset", "shapes"], sort=False).agg(
        shapes_n=("ratio", "size"),
        ratio_min=("ratio", "min"),
        ratio_median=("ratio", "median"),
        ratio_max=("ratio", "max"),
        decomposition_max_abs=("decomposition", lambda s: float(s.abs().max())),
    )
    return out.reset_index()


def source_lines(presets: list[str]) -> list[str]:
    """The AIC data behind ``presets``, one line per data source: the source, framework
    version, the data version of each op family, and the presets (system, TP) it serves."""
    by: dict[str, list[str]] = {}
    for p in presets:
        i = cost_info(load_cost_model(p))
        key = f"{i['source']}: {i['framework']} {i['version']} (by op: {i['data_versions']})"
        by.setdefault(key, []).append(f"{p} ({i['system']}, TP {i['tp']})")
    return [f"{k} — {', '.join(v)}" for k, v in by.items()]


def plot(rows: pd.DataFrame, path: Path) -> Path:
    """AIC / roofline vs tokens (prefill: one line per cached fraction, 1 request) and vs
    context (decode: one line per batch), one column per preset; written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    presets = list(dict.fromkeys(rows["preset"]))
    fig, axes = plt.subplots(2, len(presets), figsize=(3.2 * len(presets), 6.4), squeeze=False)
    for j, name in enumerate(presets):
        df = rows[rows["preset"].eq(name)]
        pre = df[df["phase"].eq("prefill") & df["requests"].eq(df["requests"].min())]
        tokens = pre["new_tokens"] + pre["cached_tokens"]
        for frac, g in pre.assign(frac=(pre["cached_tokens"] / tokens).round(2)).groupby("frac"):
            isl = g["new_tokens"] + g["cached_tokens"]
            axes[0][j].plot(isl, g["ratio"], marker="o", ms=3, label=f"{frac:.0%} cached")
        dec = df[df["phase"].eq("decode")]
        for b, g in dec.groupby("batch"):
            axes[1][j].plot(g["context"], g["ratio"], marker="o", ms=3, label=f"batch {b:g}")
        axes[0][j].set_title(name, fontsize=9)
        for ax, xl in ((axes[0][j], "tokens per request (prefill, 1 request)"),
                       (axes[1][j], "context per request (decode)")):  # fmt: skip
            ax.set_xscale("log", base=2)
            ax.axhline(1.0, color="k", lw=0.6)
            ax.set_xlabel(xl, fontsize=8)
            ax.tick_params(labelsize=7)
        axes[0][j].set_ylabel("AIC / roofline", fontsize=8)
        axes[1][j].set_ylabel("AIC / roofline", fontsize=8)
    axes[0][-1].legend(fontsize=6)
    axes[1][-1].legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown(rows: pd.DataFrame, command: str, plot_rel: str | None) -> str:
    """The ``Step times: AIC vs roofline`` section of ``BENCHMARKS.md``, markers included."""
    from radixbench.bench.benchmarks_md import COST_END, COST_START

    s = summary(rows)
    body = [COST_START, "## Step times: AIC vs roofline", "", f"Regenerate: `{command}`", ""]
    body += [
        "The simulated step time of every bundled preset AIC covers, from aiconfigurator-core's "
        "measured kernels (the default cost model of these presets) and from radixbench's "
        "roofline (`--cost-model roofline:PRESET`), over the grid of bench/cost.py "
        f"({rows['phase'].eq('prefill').sum() // rows['preset'].nunique()} prefill shapes: "
        "1-8 requests x 512-16k tokens x 0-90 % cached; "
        f"{rows['phase'].eq('decode').sum() // rows['preset'].nunique()} decode shapes: "
        "batch 1-256 x context 1k-32k per request). Ratio = AIC / roofline: below 1 the "
        "roofline overstates the step. Decomposition = radixbench's composed AIC prefill "
        "(shared GEMM pass over all tokens + each request's share of a uniform batch's "
        "attention, rounded to 8 significant bits) against AIC's own uniform-batch call: "
        "its largest error is the rounding. Mixed batches: radixbench's steps are prefill or "
        "decode, never both (sglang's default, no `--enable-mixed-chunk`), so AIC's mixed "
        "prefill + decode step is not used; a prefill batch of unequal requests is the "
        "decomposition above, each request charged its share of a uniform batch of its "
        "own shape; a decode batch is charged at its mean context.",
        "",
        "Data:",
        "",
        *(f"- {line}" for line in source_lines(list(dict.fromkeys(rows["preset"])))),
        "",
        f"Not covered by AIC (the roofline runs them): {', '.join(uncovered()) or 'none'}.",
        "",
        "| preset | shapes | n | AIC / roofline min | median | max | decomposition, max error |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in s.itertuples(index=False):
        d = float(r.decomposition_max_abs)  # type: ignore[arg-type]
        dec = "" if np.isnan(d) else f"{d:.2%}"
        body.append(f"| {r.preset} | {r.shapes} | {r.shapes_n} | {r.ratio_min:.2f} | "
                    f"{r.ratio_median:.2f} | {r.ratio_max:.2f} | {dec} |")  # fmt: skip
    if plot_rel:
        body += ["", f"![AIC / roofline per preset]({plot_rel})"]
    body += [COST_END]
    return "\n".join(body) + "\n"
