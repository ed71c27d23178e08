"""``radixbench calibrate``: the roofline's efficiencies fitted to a synthetic forward on a GPU.

For a preset (its ``[model]`` shapes and ``[gpu] tp``), :func:`measure` times
:class:`~radixbench.bench.forward.SyntheticModel` (one TP rank, random bf16 weights, CUDA
events) over the grid of ``radixbench bench cost`` (:class:`~radixbench.bench.cost.CostGrid`:
prefill 1-8 requests x 512-16k tokens x 0-90 % cached, decode batch 1-256 x context 1k-32k;
shapes whose KV caches do not fit next to the weights are skipped). :func:`fit` finds the
roofline's ``compute_eff``, ``bw_eff`` and ``step_overhead_s`` minimizing the squared log error
against the measured times (``scipy.optimize.least_squares``, bounds (0, 1], (0, 1], [0, 0.1]
s), :func:`preset_toml` writes them as a preset naming the device and the date
(``[calibration]``; no ``[aic]`` table: it runs on the roofline), and :func:`table` prints
measured, fitted, the preset's roofline and AIC (where it covers the preset) per shape.

``--device cpu`` is a dry run of the same steps at tiny shapes (:func:`tiny_shape`,
:data:`DRY_GRID`) for tests: its TOML says ``dry_run = true``; it calibrates nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from radixbench.bench.cost import CostGrid
from radixbench.bench.forward import ModelShape, SyntheticModel
from radixbench.sim.cost import RooflineCostModel, load_cost_model

__all__ = [
    "DRY_GRID",
    "count_params",
    "fit",
    "measure",
    "preset_toml",
    "roofline_of",
    "table",
    "tiny_shape",
]

#: The dry run's grid (CPU, tiny model): every phase and both cached / uncached, in seconds.
DRY_GRID = CostGrid((1, 2), (64, 256), (0.0, 0.5), (1, 4), (64, 256))


def tiny_shape(shape: ModelShape) -> ModelShape:
    """The dry run's model: 2 layers, hidden 64, the preset's GQA ratio over 4 query heads."""
    group = max(1, shape.heads // max(1, shape.kv_heads))
    heads = max(group, 4)
    return ModelShape(2, 64, heads, max(1, heads // group), 16, 128, 256, 1)


def count_params(s: ModelShape) -> float:
    """The whole model's parameters as the synthetic forward holds them: embeddings in and
    out, QKV and O, gate / up / down (norms negligible)."""
    per_layer = (2 * s.hidden * s.heads * s.head_dim + 2 * s.hidden * s.kv_heads * s.head_dim
                 + 3 * s.hidden * s.intermediate)  # fmt: skip
    return float(2 * s.vocab * s.hidden + s.layers * per_layer)


def roofline_of(
    preset: RooflineCostModel, shape: ModelShape, dtype_bytes: int
) -> RooflineCostModel:
    """``preset`` (its GPU and efficiencies) with the architecture of the timed ``shape``."""
    s = shape
    return dataclasses.replace(
        preset, params=count_params(s), layers=s.layers, heads=s.heads, kv_heads=s.kv_heads,
        head_dim=s.head_dim, tp=s.tp, dtype_bytes=dtype_bytes,
    )  # fmt: skip


def measure(
    model: SyntheticModel, grid: CostGrid, reps: int = 3, progress: Any = None
) -> pd.DataFrame:
    """One row per grid shape: ``phase``, ``requests`` / ``new_tokens`` / ``cached_tokens``
    (prefill), ``batch`` / ``context`` (decode), ``measured_s`` (NaN when skipped) and
    ``skipped`` (why, or "")."""
    shapes: list[tuple[str, int, int, int]] = [
        ("prefill", k, n, c) for k, n, c in grid.prefill_shapes()
    ]
    shapes += [("decode", b, ctx, 0) for b, ctx in itertools.product(grid.batch, grid.context)]
    rows = []
    for phase, a, b, c in shapes:
        row: dict[str, Any] = (
            dict(phase=phase, requests=a, new_tokens=b, cached_tokens=c)
            if phase == "prefill"
            else dict(phase=phase, batch=a, context=b)
        )
        try:
            row["measured_s"], row["skipped"] = model.time(phase, a, b, c, reps=reps), ""
        except MemoryError as e:
            row["measured_s"], row["skipped"] = float("nan"), str(e)
        rows.append(row)
        if progress is not None:
            progress(row)
    df = pd.DataFrame(rows)
    for col in ("requests", "new_tokens", "cached_tokens", "batch", "context"):
        if col in df:
            df[col] = df[col].astype("Int64")
    return df


def _times(roof: Any, rows: pd.DataFrame) -> np.ndarray:
    """Each row's step time (s) under ``roof`` (any cost model)."""
    out = []
    r: Any
    for r in rows.itertuples(index=False):
        if r.phase == "prefill":
            k, n, c = int(r.requests), int(r.new_tokens), int(r.cached_tokens)
            out.append(roof.prefill_time([n] * k, [c] * k))
        else:
            b, ctx = int(r.batch), int(r.context)
            out.append(roof.decode_time(b, b * ctx))
    return np.array(out)


def fit(roof: RooflineCostModel, rows: pd.DataFrame) -> tuple[RooflineCostModel, float]:
    """``roof`` with ``compute_eff``, ``bw_eff``, ``step_overhead_s`` fitted to the rows'
    ``measured_s`` (least squares on log times, skipped rows left out), and the fit's RMS log
    error. Raises ``ValueError`` with fewer than 3 measured shapes."""
    from scipy.optimize import least_squares

    ok = rows[rows["measured_s"].notna() & (rows["measured_s"] > 0)]
    if len(ok) < 3:
        raise ValueError(f"{len(ok)} measured shapes: the fit needs at least 3")
    log_t = np.log(ok["measured_s"].to_numpy(dtype=float))

    def model(x: np.ndarray) -> RooflineCostModel:
        return dataclasses.replace(roof, compute_eff=x[0], bw_eff=x[1], step_overhead_s=x[2])

    def residual(x: np.ndarray) -> np.ndarray:
        return np.log(_times(model(x), ok)) - log_t

    lo, hi = np.array([1e-6, 1e-6, 0.0]), np.array([1.0, 1.0, 0.1])
    x0 = np.clip([roof.compute_eff, roof.bw_eff, roof.step_overhead_s], lo + 1e-9, hi - 1e-9)
    res = least_squares(residual, x0, bounds=(lo, hi), x_scale=[0.1, 0.1, 1e-3])
    return model(res.x), float(np.sqrt(np.mean(res.fun**2)))


def _sig(x: float) -> float:
    """``x`` to 4 significant digits, as a plain float (TOML writes it as such)."""
    return float(f"{float(x):.4g}")


def model_table(shape: ModelShape, doc: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """The ``[model]`` table the calibrated preset gets: the preset's own; in a dry run the
    tiny model that was timed (its parameters counted as :func:`roofline_of` does)."""
    if not dry_run:
        return dict(doc["model"])
    s = shape
    return {"name": f"tiny-{s.layers}x{s.hidden}", "params": count_params(s), "layers": s.layers,
            "heads": s.heads, "kv_heads": s.kv_heads, "head_dim": s.head_dim,
            "dtype_bytes": 4, "hidden_size": s.hidden, "intermediate_size": s.intermediate,
            "vocab_size": s.vocab}  # fmt: skip


def preset_toml(
    doc: dict[str, Any], fitted: RooflineCostModel, device: str, rms: float, shapes: int,
    preset: str, dry_run: bool, date: datetime.date | None = None,
    model: dict[str, Any] | None = None,
) -> str:  # fmt: skip
    """The calibrated preset: ``model`` (default ``doc``'s ``[model]``) and ``doc``'s
    ``[host_link]``, ``[gpu]`` named
    ``device``, the fitted ``[efficiency]`` and a ``[calibration]`` table (device, date,
    preset, shapes, RMS log error, torch, dry_run). No ``[aic]``: it runs on the roofline."""
    day = (date or datetime.date.today()).isoformat()

    def val(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return repr(v)

    gpu = {**doc["gpu"], "name": device, "tp": fitted.tp}
    eff = {"compute": _sig(fitted.compute_eff), "bandwidth": _sig(fitted.bw_eff),
           "step_overhead_s": _sig(fitted.step_overhead_s)}  # fmt: skip
    cal = {"device": device, "date": day, "preset": preset, "shapes": shapes,
           "rms_log_error": _sig(rms), "torch": torch.__version__, "dry_run": dry_run}  # fmt: skip
    lines = [f"# {preset} calibrated by `radixbench calibrate` on {device}, {day}:",
             "# the efficiencies fitted to a synthetic forward of its shapes."]  # fmt: skip
    if dry_run:
        lines.append("# DRY RUN on the CPU at tiny shapes: these numbers calibrate nothing.")
    tables = (("model", model or doc["model"]), ("gpu", gpu), ("efficiency", eff),
              ("host_link", doc.get("host_link", {})), ("calibration", cal))  # fmt: skip
    for name, table in tables:
        if table:
            lines += ["", f"[{name}]", *(f"{k} = {val(v)}" for k, v in table.items())]
    return "\n".join(lines) + "\n"


def table(rows: pd.DataFrame, fitted: RooflineCostModel, preset_roof: RooflineCostModel,
          aic: Any) -> pd.DataFrame:  # fmt: skip
    """Per shape: measured, the fitted roofline, the preset's roofline and AIC (ms; AIC
    empty when it does not cover the preset), and measured / AIC."""
    out = rows.copy()
    out["measured_ms"] = out["measured_s"] * 1e3
    out["fitted_ms"] = _times(fitted, out) * 1e3
    out["preset_roofline_ms"] = _times(preset_roof, out) * 1e3
    out["aic_ms"] = _times(aic, out) * 1e3 if aic is not None else np.nan
    out["measured_over_aic"] = out["measured_ms"] / out["aic_ms"]
    keep = [c for c in ("phase", "requests", "new_tokens", "cached_tokens", "batch", "context")
            if c in out]  # fmt: skip
    cols = ["measured_ms", "fitted_ms", "preset_roofline_ms", "aic_ms", "measured_over_aic"]
    return out[[*keep, *cols, "skipped"]]


def load_preset(spec: str) -> tuple[dict[str, Any], RooflineCostModel, Any]:
    """``(parsed TOML, its roofline, its AIC model or None)`` of a preset name or path."""
    from radixbench.sim.cost import read_preset, roofline_from_doc
    from radixbench.sim.cost_aic import AicCostModel

    doc, where = read_preset(spec)
    roof = roofline_from_doc(doc, where)
    model = load_cost_model(spec)
    return doc, roof, model if isinstance(model, AicCostModel) else None


def default_out(preset: str, device: str) -> Path:
    """``runs/calibrate/<preset>-<device>-<date>.toml`` (device lower-cased, words joined)."""
    slug = "-".join("".join(ch if ch.isalnum() else " " for ch in device).lower().split())
    return Path("runs/calibrate") / f"{Path(preset).stem}-{slug}-{datetime.date.today()}.toml"
