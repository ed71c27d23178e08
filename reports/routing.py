"""Tables and verdicts of a cluster run: routers against each other, instances one by one.

Input: the run's per-request table with the ``router`` axis column and an ``instance`` column
(the instance that served the request), the per-step ``timeseries`` with ``instance``, the
serving ``metrics`` (one row per variant, with the cluster's ``load_imbalance`` and
``route_p50_us`` / ``route_p99_us``), and the run record (``max_running``, chunk size: the
overload rules of :func:`radixbench.reports.diagnostics.load_check`). Times in s unless a
column says ``_ms`` / ``_us``; throughput in output tokens per simulated second.

* :func:`router_table` — per router (variant): TTFT p50 / p90 / p99, mean TPOT, mean E2E,
  output throughput, prefix hit rate, load imbalance (time-weighted max / mean outstanding
  over routing decisions), decision time p50 / p99, overloaded instances, and the regret
  against ``oracle`` when it ran (prefix-hit-rate points below it, TTFT p90 over its).
* :func:`instance_table` — per router and instance: requests, prefix hit rate, time-weighted
  KV use and waiting queue, peak queue, and the overload flag with its rules.
* :func:`gateway_table` — per router and gateway (the ``gateway`` column: which of the run's
  router replicas routed the request): requests and the prefix hit rate of those it routed;
  :func:`router_table` gives each router's gateway count and the mean / min / max of that
  per-gateway hit rate when some router ran behind more than one gateway.
* :func:`router_labels` — how the reports name each variant: its router, with its gateway
  count where some router ran behind several (``cache-aware, 8 gateways``).
* :func:`router_verdicts` — each router against the baseline router (the first listed, or the
  one ``baseline["router"]`` names; pairs from :meth:`~radixbench.reports.axes.VariantSet.
  pairs` on the ``router`` axis): TTFT p90 ratio baseline / candidate (> 1: candidate better)
  and output-throughput ratio candidate / baseline (> 1: better), each with a 95 % bootstrap
  interval over requests paired by ``rid`` (finished under both; seeded; ``scipy.stats.
  bootstrap``, as :mod:`radixbench.reports.bootstrap`), and the
  verdict ``better`` / ``worse`` / ``no significant difference`` by the one rule of every
  verdict (:func:`radixbench.reports.verdicts.verdict`: the interval must clear 3 % either side
  of 1, so a 1.01x [1.00-1.01] throughput is no difference).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from radixbench.reports.axes import VariantSet
from radixbench.reports.bootstrap import bootstrap_paired, bootstrap_ratio
from radixbench.reports.diagnostics import load_check
from radixbench.reports.parted import TableParts
from radixbench.reports.record import RunMeta
from radixbench.reports.verdicts import verdict

__all__ = [
    "VERDICT_COLUMNS",
    "gateway_table",
    "instance_table",
    "router_labels",
    "router_table",
    "router_verdicts",
]

VERDICT_COLUMNS = [
    "metric", "candidate", "baseline", "candidate_router", "baseline_router", "n",
    "baseline_value", "candidate_value", "ratio", "ci_low", "ci_high", "verdict",
]  # fmt: skip


def _p90(x: np.ndarray, axis: int = 0) -> np.ndarray:
    return np.percentile(x, 90, axis=axis)


def _routers(requests: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(requests["variant"]))


#: The ``timeseries`` columns :func:`instance_table` reads (with ``load_check``'s).
INSTANCE_STEP_COLUMNS = ("variant", "sim_time_s", "step", "step_s", "running", "queue_len",
                         "kv_used_tokens", "kv_capacity_tokens")  # fmt: skip


def _instance_steps(timeseries: pd.DataFrame | TableParts, variant: str, inst: Any) -> pd.DataFrame:
    """The steps of ``variant``'s instance ``inst``, in order (a table in parts: its
    :data:`INSTANCE_STEP_COLUMNS` only, read from that instance's part)."""
    if isinstance(timeseries, pd.DataFrame):
        return timeseries[(timeseries["variant"] == variant) & (timeseries["instance"] == inst)]
    cols = [c for c in INSTANCE_STEP_COLUMNS if c in timeseries.columns]
    return timeseries.frame(cols, where={"variant": (variant,), "instance": (int(inst),)})


def instance_table(
    requests: pd.DataFrame, timeseries: pd.DataFrame | TableParts, meta: RunMeta | None = None
) -> pd.DataFrame:
    """One row per (variant, instance): see the module docstring. ``overloaded`` and
    ``overload_reasons`` need ``meta.max_running`` (else False / empty). ``timeseries``: a
    frame, or a table in parts (``reports.parted.TableParts``), read one instance at a time."""
    rows = []
    meta = meta or RunMeta()
    for (variant, inst), reqs in requests.groupby(["variant", "instance"], sort=False):
        steps = _instance_steps(timeseries, str(variant), inst)
        tag = f"{variant}#{inst}"  # load_check's variant: one instance of the variant
        loads = load_check(reqs.assign(variant=tag), steps.assign(variant=tag), meta)
        ld = loads[0] if loads else None
        done = reqs[reqs["status"] == "finished"]
        w = steps["step_s"].to_numpy(np.float64)
        util = (steps["kv_used_tokens"] / steps["kv_capacity_tokens"]).to_numpy(np.float64)
        queue = steps["queue_len"].to_numpy(np.float64)
        rows.append(
            {
                "variant": variant,
                "router": reqs["router"].iloc[0] if "router" in reqs else None,
                "instance": int(inst),  # type: ignore[call-overload]
                "requests": len(reqs),
                "prefix_hit_rate": float(done["prefix_hit_tokens"].sum() / done["input_len"].sum())
                if len(done)
                else float("nan"),
                "mean_kv_util": float(np.average(util, weights=w)) if w.sum() > 0 else 0.0,
                "mean_queue_len": float(np.average(queue, weights=w)) if w.sum() > 0 else 0.0,
                "max_queue_len": int(queue.max()) if queue.size else 0,
                "busy": ld.busy if ld else float("nan"),
                "overloaded": bool(ld and ld.overloaded),
                "overload_reasons": "; ".join(ld.reasons) if ld else "",
            }
        )
    return pd.DataFrame(rows).sort_values(["variant", "instance"], kind="stable")


def gateway_table(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, gateway): ``router``, ``gateways`` (the variant's count),
    ``gateway``, ``requests`` routed, ``prefix_hit_rate`` (hit tokens / input tokens of the
    finished ones). Empty without a ``gateway`` column."""
    cols = ["variant", "router", "gateways", "gateway", "requests", "prefix_hit_rate"]
    if "gateway" not in requests:
        return pd.DataFrame(columns=cols)
    rows = []
    for variant, reqs in requests.groupby("variant", sort=False):
        count = int(reqs["gateways"].iloc[0]) if "gateways" in reqs else 1
        for g, part in reqs.groupby("gateway", sort=True):
            done = part[part["status"] == "finished"]
            inp = done["input_len"].sum()
            rows.append(
                {
                    "variant": variant,
                    "router": part["router"].iloc[0] if "router" in part else None,
                    "gateways": count,
                    "gateway": int(str(g)),
                    "requests": len(part),
                    "prefix_hit_rate": float(done["prefix_hit_tokens"].sum() / inp)
                    if inp
                    else float("nan"),
                }
            )
    return pd.DataFrame(rows, columns=cols)


def _per_gateway(gateways: pd.DataFrame, variant: str) -> dict[str, float]:
    rates = gateways.loc[gateways["variant"] == variant, "prefix_hit_rate"]
    count = gateways.loc[gateways["variant"] == variant, "gateways"]
    return {
        "gateways": int(count.iloc[0]) if len(count) else 1,
        "gateway_hit_rate_mean": float(rates.mean()),
        "gateway_hit_rate_min": float(rates.min()),
        "gateway_hit_rate_max": float(rates.max()),
    }


def router_labels(df: pd.DataFrame) -> dict[str, str]:
    """Variant -> how the reports name it (a column, a panel, a legend entry, an answer line):
    the router, with the gateway count where some variant of ``df`` runs behind more than one
    gateway ("cache-aware, 8 gateways") and the instance count where ``df`` has several; every
    variant's full name where that still leaves two alike (two cache variants behind one
    router). ``df``: a table with ``variant`` and the ``router`` (``gateways``, ``instances``)
    axis columns; reads the first row of each variant."""
    first = df.drop_duplicates("variant").set_index("variant")
    out: dict[str, str] = {}
    for variant, row in first.iterrows():
        parts = [str(row["router"])] if "router" in first.columns else [str(variant)]
        gw = first["gateways"].dropna().astype(str) if "gateways" in first.columns else None
        if gw is not None and len(gw) and (gw.nunique() > 1 or set(gw) != {"1"}):
            g = str(row["gateways"])
            parts.append(f"{g} gateway{'' if g == '1' else 's'}")
        if "instances" in first.columns and first["instances"].nunique() > 1:
            parts.append(f"{row['instances']} instances")
        out[str(variant)] = ", ".join(parts)
    if len(set(out.values())) < len(out):
        return {v: v for v in out}
    return out


def router_table(
    requests: pd.DataFrame, metrics: pd.DataFrame, instances: pd.DataFrame
) -> pd.DataFrame:
    """One row per variant (router), in the order run: see the module docstring."""
    rows = []
    m = metrics.set_index("variant")
    gw = gateway_table(requests)
    many = bool(len(gw)) and int(gw["gateways"].max()) > 1
    for variant in _routers(requests):
        reqs = requests[requests["variant"] == variant]
        done = reqs[reqs["status"] == "finished"]
        ttft = done["ttft_s"].to_numpy(np.float64)
        inst = instances[instances["variant"] == variant]
        row: dict[Any, Any] = m.loc[variant].to_dict() if variant in m.index else {}
        rows.append(
            {
                "variant": variant,
                "router": reqs["router"].iloc[0],
                "instances": int(row.get("instances", reqs["instance"].nunique())),
                "completed": len(done),
                "ttft_p50_s": float(np.percentile(ttft, 50)) if ttft.size else float("nan"),
                "ttft_p90_s": float(np.percentile(ttft, 90)) if ttft.size else float("nan"),
                "ttft_p99_s": float(np.percentile(ttft, 99)) if ttft.size else float("nan"),
                "tpot_mean_s": float(done["tpot_s"].mean()),
                "e2e_mean_s": float(done["e2e_s"].mean()),
                "output_throughput": float(row.get("output_throughput", np.nan)),
                "prefix_hit_rate": float(done["prefix_hit_tokens"].sum() / done["input_len"].sum())
                if len(done)
                else float("nan"),
                "load_imbalance": float(row.get("load_imbalance", np.nan)),
                "route_p50_us": float(row.get("route_p50_us", np.nan)),
                "route_p99_us": float(row.get("route_p99_us", np.nan)),
                "overloaded_instances": int(inst["overloaded"].sum()),
                **_prediction(done),
                **(_per_gateway(gw, variant) if many else {}),
            }
        )
    out = pd.DataFrame(rows)
    labels = router_labels(requests)
    out.insert(1, "label", [labels.get(v, v) for v in out["variant"]])
    if (out["router"] == "oracle").any():
        vs = VariantSet.from_frames(requests)
        by_name = out.set_index("variant")
        hit: list[float] = []
        ttft_ratio: list[float] = []
        for variant in out["variant"]:
            pair = vs.partner(variant, "router", {"router": "oracle"})
            o = variant if pair is None else pair.baseline
            if vs.value(o, "router") != "oracle":
                hit.append(float("nan"))
                ttft_ratio.append(float("nan"))
                continue
            mine, ref = by_name.loc[variant], by_name.loc[o]
            hit.append(float(ref["prefix_hit_rate"] - mine["prefix_hit_rate"]))
            ttft_ratio.append(float(mine["ttft_p90_s"] / ref["ttft_p90_s"]))
        out["hit_regret_vs_oracle"] = hit
        out["ttft_p90_vs_oracle"] = ttft_ratio
    return out


def _prediction(done: pd.DataFrame) -> dict[str, float]:
    """How well the router knew what the chosen instance held, over the requests it made a
    prediction for (``predicted_hit_tokens``): ``predicted_share`` of requests predicted,
    ``overpredicted_share`` of those predicted beyond the prefix hit they got (by more than
    0.5 % of the input), ``prediction_error``: mean |predicted - hit| / mean input tokens."""
    if "predicted_hit_tokens" not in done or not len(done):
        return {}
    pred = done["predicted_hit_tokens"]
    has = pred.notna()
    if not has.any():
        return {"predicted_share": 0.0}
    p, hit = pred[has].to_numpy(np.float64), done.loc[has, "prefix_hit_tokens"].to_numpy(np.float64)
    inp = done.loc[has, "input_len"].to_numpy(np.float64)
    return {
        "predicted_share": float(has.mean()),
        "overpredicted_share": float(np.mean(p - hit > 0.005 * inp)),
        "prediction_error": float(np.abs(p - hit).mean() / inp.mean()),
    }


def _throughput_ci(
    b: pd.DataFrame, c: pd.DataFrame, n_resamples: int, seed: int
) -> tuple[float, float, float]:
    """Output-throughput ratio candidate / baseline over requests paired by position (output
    tokens / (last finish - first arrival) of each side), with its bootstrap interval over
    the requests resampled jointly (:func:`radixbench.reports.bootstrap.bootstrap_paired`)."""

    def tput(xs: tuple[np.ndarray, ...], axis: int) -> np.ndarray:
        out, arr, fin = xs
        span = fin.max(axis=axis) - arr.min(axis=axis)
        return out.sum(axis=axis) / np.where(span > 0, span, np.nan)

    def ratio(*xs: np.ndarray, axis: int = -1) -> np.ndarray:
        return tput(xs[3:], axis) / tput(xs[:3], axis)

    cols = [
        x[k].to_numpy(np.float64) for x in (b, c) for k in ("output_len", "arrival_s", "finish_s")
    ]
    return bootstrap_paired(tuple(cols), ratio, n_resamples=n_resamples, seed=seed)


def _verdict(lo: float, hi: float) -> str:
    """``better`` / ``worse`` / no significant difference by the verdicts' one rule
    (:func:`radixbench.reports.verdicts.verdict`: the interval clears ``MIN_EFFECT`` either
    side of 1; a cluster run has no A/A replica)."""
    return verdict(lo, hi, words=("better", "worse"))


def router_verdicts(
    requests: pd.DataFrame,
    baseline: Mapping[str, str] | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Each router vs the baseline router (module docstring); :data:`VERDICT_COLUMNS`."""
    vs = VariantSet.from_frames(requests)
    base = vs.resolve_baseline(baseline)
    done = requests[requests["status"] == "finished"]
    rows: list[dict[str, Any]] = []
    for _, cand, basev, _ in vs.pairs(base, ["router"]):
        both = done[done["variant"] == basev].merge(
            done[done["variant"] == cand], on="rid", suffixes=("_b", "_c")
        )
        if not len(both):
            continue
        names = {"candidate_router": vs.value(cand, "router")}
        names["baseline_router"] = vs.value(basev, "router")
        b_t, c_t = both["ttft_s_b"].to_numpy(np.float64), both["ttft_s_c"].to_numpy(np.float64)
        r, lo, hi = bootstrap_ratio(
            b_t, c_t, n_resamples=n_resamples, seed=seed, paired=True, stat=_p90
        )
        rows.append(
            {
                "metric": "ttft_p90_s",
                "candidate": cand,
                "baseline": basev,
                **names,
                "n": len(both),
                "baseline_value": float(np.percentile(b_t, 90)),
                "candidate_value": float(np.percentile(c_t, 90)),
                "ratio": r,
                "ci_low": lo,
                "ci_high": hi,
                "verdict": _verdict(lo, hi),
            }
        )
        side = {
            k: both[[f"{c}_{k}" for c in ("output_len", "arrival_s", "finish_s")]] for k in "bc"
        }
        frames = [side[k].set_axis(["output_len", "arrival_s", "finish_s"], axis=1) for k in "bc"]
        r, lo, hi = _throughput_ci(frames[0], frames[1], n_resamples, seed)
        tb = frames[0]["output_len"].sum() / (
            frames[0]["finish_s"].max() - frames[0]["arrival_s"].min()
        )
        rows.append(
            {
                "metric": "output_throughput",
                "candidate": cand,
                "baseline": basev,
                **names,
                "n": len(both),
                "baseline_value": float(tb),
                "candidate_value": float(tb * r),
                "ratio": r,
                "ci_low": lo,
                "ci_high": hi,
                "verdict": _verdict(lo, hi),
            }
        )
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)
