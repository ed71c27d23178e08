"""GPU step-time models: how long the simulated forward pass of one step takes (seconds).

Two models share one interface (``CostModel``):

- ``RooflineCostModel`` (default via presets in ``sim/presets/*.toml``): each step takes
  ``max(FLOPs / (peak * compute_eff), bytes / (bandwidth * bw_eff)) + step_overhead_s``
  (Williams et al., "Roofline", CACM 2009), with the transformer counts of Kaplan et al. 2020
  (§2.1: ``2 N`` FLOPs per token for the weights) and attention counted the usual way
  (``QK^T`` and ``PV``: ``4 d`` FLOPs per head, layer and query-key pair); no SGLang code is
  modeled here:

  * prefill (extend) of request ``i`` with ``c_i`` cached and ``n_i`` new tokens:
    FLOPs = ``2 N n_i + 4 L H d (n_i c_i + n_i^2 / 2)`` — QK^T and PV over every earlier token
    (causal), for the new tokens only; cached tokens cost no GEMM. Bytes = weights once +
    KV of the ``c_i + n_i`` context tokens read once.
  * decode of ``B`` requests over ``C`` context tokens: bytes = ``2 N`` weight bytes (bf16) +
    ``kv_bytes_per_token * C``; FLOPs = ``2 N B + 4 L H d C`` — bandwidth-bound for any
    realistic batch.

  With tensor parallelism ``tp`` FLOPs and bytes split evenly over ``tp`` GPUs (all-reduce cost
  folded into the efficiencies).
- ``LinearCostModel``: step times linear in token counts — a fitted alternative whose defaults
  approximate Llama-3.1-8B on one H100 (see the class docstring).

Step time charged by the scheduler = forward time (this module) + scheduler CPU overhead (the
model's ``step_overhead_s``; plus, in the ``coupled`` clock mode, the measured CPU time of the
step's cache operations and batch builds).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from radixbench.sim.cost_aic import AicCostModel


class CostModel(Protocol):
    """Forward time of one step in simulated seconds."""

    def prefill_time(self, extend_lens: Sequence[int], prefix_lens: Sequence[int]) -> float:
        """One extend step; per request: new tokens computed and cached tokens attended to."""
        ...

    def decode_time(self, batch_size: int, context_tokens: int) -> float:
        """One decode step of ``batch_size`` requests over ``context_tokens`` KV tokens."""
        ...

    def decode_time_fn(self) -> Callable[[int, int], float]:
        """``decode_time`` for the simulator's per-step call (bit-identical results)."""
        ...

    def decode_times(self, batch_size: int, context_tokens: np.ndarray) -> np.ndarray:
        """float64 ``[n]``: ``decode_time(batch_size, c)`` for each ``c`` of the int64 ``[n]``
        ``context_tokens``, bit for bit (a decode block's steps, ``sim.decode_block``)."""
        ...


@dataclass(frozen=True, slots=True)
class LinearCostModel:
    """Step times linear in tokens. All parameters in seconds (per token / per request).

    Defaults approximate Llama-3.1-8B in bf16 on one H100 SXM: prefill is compute-bound, 2 * 8e9
    FLOPs per new token at ~55% of 989 TFLOP/s is ~3e-5 s, cached tokens add a small attention
    term; decode reads 16 GB of weights at 3.35 TB/s (~5 ms) plus 128 KiB of KV per context
    token (~4e-8 s). Fit the parameters to measured step times for other set-ups.
    """

    prefill_base_s: float = 2e-3
    prefill_per_token_s: float = 3e-5
    prefill_per_cached_token_s: float = 2e-7
    decode_base_s: float = 5e-3
    decode_per_req_s: float = 3e-5
    decode_per_ctx_token_s: float = 4e-8

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"cost model parameter {f.name} must be >= 0")

    @property
    def kv_bytes_per_token(self) -> int | None:
        """Unknown for a fitted model (no GPU-memory-derived capacity)."""
        return None

    def prefill_time(self, extend_lens: Sequence[int], prefix_lens: Sequence[int]) -> float:
        return (
            self.prefill_base_s
            + self.prefill_per_token_s * sum(extend_lens)
            + self.prefill_per_cached_token_s * sum(prefix_lens)
        )

    def decode_time_fn(self) -> Callable[[int, int], float]:
        """``decode_time`` itself (the simulator's per-step call)."""
        return self.decode_time

    def decode_time(self, batch_size: int, context_tokens: int) -> float:
        return (
            self.decode_base_s
            + self.decode_per_req_s * batch_size
            + self.decode_per_ctx_token_s * context_tokens
        )

    def decode_times(self, batch_size: int, context_tokens: np.ndarray) -> np.ndarray:
        """:meth:`decode_time` of each context, the same float operations elementwise."""
        head = self.decode_base_s + self.decode_per_req_s * batch_size
        return head + self.decode_per_ctx_token_s * context_tokens


#: The device<->host link of a preset without ``[host_link]`` (B/s, one direction: PCIe 4 x16).
DEFAULT_HOST_LINK_BYTES_S = 25e9


@dataclass(frozen=True, slots=True)
class RooflineCostModel:
    """Roofline step times of a dense decoder (formulas in the module docstring).

    params: weights (count); layers / heads / kv_heads / head_dim: architecture; dtype_bytes:
    bytes per weight and KV element; tp: GPUs sharing the model; peak_flops (FLOP/s) and
    mem_bw_bytes_s (B/s) per GPU; mem_gb: HBM per GPU (GB = 1e9 B); compute_eff / bw_eff in
    (0, 1]; step_overhead_s: fixed per-step time (launches, sampling, scheduler);
    host_link_bytes_s: the device<->host link per GPU (B/s, one direction), what HiCache's
    backups and load-backs cross (``[host_link] bytes_s`` of a preset; used only with
    ``--enable-hierarchical-cache``); source: where the efficiencies come from (a calibrated
    preset's ``[calibration]`` device and date; empty: datasheet peaks and estimates).
    """

    name: str
    params: float
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    tp: int
    peak_flops: float
    mem_bw_bytes_s: float
    mem_gb: float
    compute_eff: float
    bw_eff: float
    step_overhead_s: float
    host_link_bytes_s: float = DEFAULT_HOST_LINK_BYTES_S
    source: str = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name not in ("name", "source") and not (
                v > 0 or (f.name == "step_overhead_s" and v == 0)
            ):
                raise ValueError(f"cost model {self.name}: {f.name} must be > 0, got {v}")
        if self.compute_eff > 1 or self.bw_eff > 1:
            raise ValueError(f"cost model {self.name}: efficiencies must be <= 1")

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of every layer: ``2 * layers * kv_heads * head_dim * dtype_bytes`` (B)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def weight_bytes(self) -> float:
        return self.params * self.dtype_bytes

    def kv_capacity_tokens(self, gpu_mem_gb: float) -> int:
        """KV slots that fit in ``gpu_mem_gb`` per GPU (the memory for weights + KV cache, the
        share sglang 0.5.23 sets with ``--mem-fraction-static``; activations and CUDA graphs
        are not modeled) over ``tp`` GPUs. Raises ``ValueError`` if the weights alone do not
        fit."""
        free = gpu_mem_gb * 1e9 * self.tp - self.weight_bytes
        if free <= 0:
            raise ValueError(
                f"--gpu-mem-gb {gpu_mem_gb}: {self.weight_bytes / 1e9:.0f} GB of {self.name} "
                f"weights do not fit on {self.tp} GPU(s)"
            )
        return int(free // self.kv_bytes_per_token)

    def _roof(self, flops: float, nbytes: float) -> float:
        t_c = flops / (self.peak_flops * self.compute_eff * self.tp)
        t_m = nbytes / (self.mem_bw_bytes_s * self.bw_eff * self.tp)
        return max(t_c, t_m) + self.step_overhead_s

    def prefill_time(self, extend_lens: Sequence[int], prefix_lens: Sequence[int]) -> float:
        attn = 4.0 * self.layers * self.heads * self.head_dim
        new = sum(extend_lens)
        pairs = sum(n * c + n * n / 2 for n, c in zip(extend_lens, prefix_lens))
        flops = 2.0 * self.params * new + attn * pairs
        nbytes = self.weight_bytes + self.kv_bytes_per_token * (new + sum(prefix_lens))
        return self._roof(flops, nbytes)

    def decode_time_fn(self) -> Callable[[int, int], float]:
        """``decode_time`` as a closure over this model's constants, for the simulator's
        per-step call: the same float operations in the same order (bit-identical results),
        without re-deriving ``kv_bytes_per_token`` / ``weight_bytes`` every step."""
        two_p = 2.0 * self.params
        attn = 4.0 * self.layers * self.heads * self.head_dim
        weights, kv = self.weight_bytes, self.kv_bytes_per_token
        compute = self.peak_flops * self.compute_eff * self.tp
        memory = self.mem_bw_bytes_s * self.bw_eff * self.tp
        overhead = self.step_overhead_s

        def decode_time(batch_size: int, context_tokens: int) -> float:
            flops = two_p * batch_size
            flops += attn * context_tokens
            t_c = flops / compute
            t_m = (weights + kv * context_tokens) / memory
            return max(t_c, t_m) + overhead

        return decode_time

    def decode_times(self, batch_size: int, context_tokens: np.ndarray) -> np.ndarray:
        """:meth:`decode_time_fn`'s function of each context, the same float operations
        elementwise (bit-identical)."""
        flops = 2.0 * self.params * batch_size
        attn = 4.0 * self.layers * self.heads * self.head_dim
        compute = self.peak_flops * self.compute_eff * self.tp
        memory = self.mem_bw_bytes_s * self.bw_eff * self.tp
        t_c = (flops + attn * context_tokens) / compute
        t_m = (self.weight_bytes + self.kv_bytes_per_token * context_tokens) / memory
        return np.maximum(t_c, t_m) + self.step_overhead_s

    def decode_time(self, batch_size: int, context_tokens: int) -> float:
        flops = 2.0 * self.params * batch_size
        flops += 4.0 * self.layers * self.heads * self.head_dim * context_tokens
        nbytes = self.weight_bytes + self.kv_bytes_per_token * context_tokens
        return self._roof(flops, nbytes)


def preset_names() -> list[str]:
    """Bundled presets (``sim/presets/<name>.toml``), sorted."""
    root = resources.files("radixbench.sim") / "presets"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def read_preset(spec: str) -> tuple[dict[str, Any], str]:
    """A preset name or a ``.toml`` path -> ``(parsed TOML, where)`` (``where``: the path, or
    ``presets/<name>.toml``). Raises ``ValueError`` naming the file on bad input."""
    if spec.endswith(".toml"):
        path = Path(spec)
        if not path.is_file():
            raise ValueError(f"cost model file not found: {spec}")
        text, where = path.read_text(), str(path)
    else:
        if spec not in preset_names():
            known = ", ".join(["linear", *preset_names()])
            raise ValueError(
                f"unknown cost model {spec!r}; known: {known}, a .toml path, roofline:PRESET "
                "or aic[:PRESET|MODEL@SYSTEM/FRAMEWORK-VERSION]"
            )
        res = resources.files("radixbench.sim") / "presets" / f"{spec}.toml"
        text, where = res.read_text(), f"presets/{spec}.toml"
    try:
        return tomllib.loads(text), where
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{where}: {e}") from None


def load_cost_model(spec: str) -> LinearCostModel | RooflineCostModel | AicCostModel:
    """The cost model a ``--cost-model`` / ``[cost] model`` value names:

    - ``"linear"`` -> ``LinearCostModel()``;
    - ``"aic"`` / ``"aic:PRESET"`` / ``"aic:MODEL@[TPx]SYSTEM[/FRAMEWORK[-VERSION]]"`` ->
      :class:`~radixbench.sim.cost_aic.AicCostModel` (:mod:`radixbench.sim.cost_aic_spec`);
    - ``"roofline:PRESET"`` (or a ``.toml`` path) -> ``RooflineCostModel``, always;
    - a preset name or a ``.toml`` path -> AIC when its file has an ``[aic]`` table and
      aiconfigurator-core is installed (the bundled H100/H200 presets), else its roofline
      (the A100 presets, custom and calibrated models, or aiconfigurator-core missing).

    Raises ``ValueError`` (one line naming the file and key) on bad input.
    """
    if spec == "linear":
        return LinearCostModel()
    if spec == "aic" or spec.startswith("aic:"):
        from radixbench.sim.cost_aic_spec import load_aic

        return load_aic(spec)
    force_roofline = spec.startswith("roofline:")
    doc, where = read_preset(spec.removeprefix("roofline:"))
    roof = roofline_from_doc(doc, where)
    if force_roofline or "aic" not in doc:
        return roof
    from radixbench.sim.cost_aic import aic_version
    from radixbench.sim.cost_aic_spec import aic_from_table

    if aic_version() is None:
        return roof  # the fallback: radixbench without its aiconfigurator-core dependency
    return aic_from_table(doc["aic"], roof, where)


def roofline_from_doc(doc: dict[str, Any], where: str) -> RooflineCostModel:
    """The ``RooflineCostModel`` of a preset's parsed TOML (``[model]``, ``[gpu]``,
    ``[efficiency]``, optional ``[host_link]``). Raises ``ValueError`` naming ``where`` and
    the missing or bad key."""
    keys = {
        "model": ("name", "params", "layers", "heads", "kv_heads", "head_dim", "dtype_bytes"),
        "gpu": ("tp", "peak_flops", "mem_bw_bytes_s", "mem_gb"),
        "efficiency": ("compute", "bandwidth", "step_overhead_s"),
    }
    vals: dict[str, Any] = {}
    for table, names in keys.items():
        for k in names:
            try:
                vals[f"{table}.{k}"] = doc[table][k]
            except (KeyError, TypeError):
                raise ValueError(f"{where}: missing key [{table}] {k}") from None
    gpu_name = doc["gpu"].get("name", "gpu")
    link = doc.get("host_link", {}).get("bytes_s", DEFAULT_HOST_LINK_BYTES_S)
    try:
        return RooflineCostModel(
            name=f"{vals['model.name']}@{gpu_name}x{vals['gpu.tp']}",
            params=float(vals["model.params"]),
            layers=int(vals["model.layers"]),
            heads=int(vals["model.heads"]),
            kv_heads=int(vals["model.kv_heads"]),
            head_dim=int(vals["model.head_dim"]),
            dtype_bytes=int(vals["model.dtype_bytes"]),
            tp=int(vals["gpu.tp"]),
            peak_flops=float(vals["gpu.peak_flops"]),
            mem_bw_bytes_s=float(vals["gpu.mem_bw_bytes_s"]),
            mem_gb=float(vals["gpu.mem_gb"]),
            compute_eff=float(vals["efficiency.compute"]),
            bw_eff=float(vals["efficiency.bandwidth"]),
            step_overhead_s=float(vals["efficiency.step_overhead_s"]),
            host_link_bytes_s=float(link),
            source=_calibration(doc.get("calibration"), where),
        )
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def _calibration(table: Any, where: str) -> str:
    """A preset's ``[calibration]`` table (written by ``radixbench calibrate``) in words."""
    if table is None:
        return ""
    if not isinstance(table, dict) or not {"device", "date"} <= table.keys():
        raise ValueError(f"{where}: [calibration] needs device and date")
    return f"calibrated on {table['device']} on {table['date']}"


def cost_info(cost: Any) -> dict[str, Any]:
    """What a report names about a cost model: ``name``, ``kind`` (``aic`` / ``roofline`` /
    ``linear``), ``source`` (where its numbers come from), ``version`` (of the data: the
    framework version whose kernels AIC measured; None for the formula models) and
    ``system`` (the GPU and TP), plus the model's further details."""
    name = getattr(cost, "name", type(cost).__name__)
    describe = getattr(cost, "describe", None)
    if describe is not None:
        return {"name": name, **describe()}
    if isinstance(cost, RooflineCostModel):
        eff = (f"compute {cost.compute_eff:g}, bandwidth {cost.bw_eff:g}, "
               f"{cost.step_overhead_s * 1e3:g} ms per step")  # fmt: skip
        how = cost.source or "estimated"
        source = f"datasheet peaks x efficiencies {how} ({eff})"
        return {"name": name, "kind": "roofline", "source": source, "version": None,
                "system": name.partition("@")[2], "tp": cost.tp}  # fmt: skip
    return {"name": name, "kind": "linear", "source": "linear in tokens (fitted defaults)",
            "version": None, "system": None}  # fmt: skip
