"""Step times from measured GPU kernel data: AIConfigurator's database (aiconfigurator-core).

aiconfigurator-core 0.12.0 (NVIDIA, Apache-2.0) ships kernel timings measured on the GPU for
each serving framework and version (GEMM, attention, NCCL/custom all-reduce: its ``silicon``
rows; element-wise ops are modelled, its ``empirical`` rows) and composes one engine step from
a model's op list (``aiconfigurator_core.sdk.engine.EngineHandle``). Its numbers are kernel
sums: no scheduler work, no launch gaps between kernels. Its batches are uniform (one length
and one cached prefix per call), so radixbench's steps are decomposed as follows (times in ms
from AIC, returned here in s):

- **prefill (extend)** of ``k`` requests with ``n_i`` new and ``c_i`` cached tokens::

      T = shared(sum n_i) + sum_i attn_k(n_i, c_i) / k + step_overhead_s

  ``shared(N)``: every op but attention (QKV/O/FFN GEMMs, norms, all-reduce, logits) over ``N``
  tokens — ``mixed_step_breakdown(N, 0, N, 1, 0)[1]``, AIC's "shared non-attention" pass of a
  mixed step; ``attn_k(n, c)``: the context attention of a uniform batch of ``k`` requests of
  that shape — the same call's ``[2]`` with ``ctx_tokens = k (n + c), isl = n + c, prefix =
  c``. Each request is charged its share of a batch of ``k`` like it (the attention kernel's
  fixed cost is shared by the batch: 8 extends of 51 tokens after 461 cached cost 1.7x one,
  not 8x). This is the composition of AIC's ``mixed_step_latency`` (pass 1 over all tokens,
  pass 2 for the requests' attention); for uniform batches it is ``predict_prefill_latency(k,
  n + c, c)`` up to how the GEMM pass splits (``radixbench bench cost`` prints the difference
  over its grid: the "decomposition" column).
- **decode** of ``B`` requests over ``C`` KV tokens: ``decode_step_latency(B, s - 1, 0)``, one
  step at context ``s = round(C / B)`` per request (AIC steps at ``isl + osl // 2 + 1``):
  a batch of unequal contexts is charged as ``B`` requests at their mean — decode attention
  reads every KV token once, so its time is near-linear in ``C``.

Memoization: every shape is rounded to 8 significant bits (values below 256 exact; relative
error at most 2^-8 = 0.39 % per coordinate) and each rounded shape is asked of AIC once per
process (``_Engine``); a step then costs dictionary look-ups. The compiled engine is cached per
``(model, system, framework, version, tp)``, so a model pickled to a Dask worker compiles there
once (1-2 s). Across processes, :mod:`radixbench.sim.cost_aic_cache` keeps the compiled spec
and the memo on disk: a process whose shapes were all asked before never builds the Rust
engine (its tables load in ~0.5 s of CPU).
"""

from __future__ import annotations

import hashlib
import logging
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from radixbench.sim.cost import RooflineCostModel

if TYPE_CHECKING:
    from radixbench.sim.cost_aic_cache import _Tables

__all__ = ["AIC_DIST", "AIC_PIN", "AicCostModel", "aic_version", "quantize", "quantize_array"]

#: The distribution, and the version whose data and API this module is written against.
AIC_DIST = "aiconfigurator-core"
AIC_PIN = "0.12.0"
#: Significant bits kept by :func:`quantize` (the memo's grid).
GRID_BITS = 8


def aic_version() -> str | None:
    """The installed aiconfigurator-core version, or None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(AIC_DIST)
    except metadata.PackageNotFoundError:
        return None


def quantize(x: int) -> int:
    """``x`` rounded to :data:`GRID_BITS` significant bits (exact below ``2**GRID_BITS``):
    relative error <= ``2**-GRID_BITS``. The memo's key; monotone non-decreasing in ``x``."""
    if x < 1 << GRID_BITS:
        return x
    shift = x.bit_length() - GRID_BITS
    return ((x + (1 << (shift - 1))) >> shift) << shift


def quantize_array(x: np.ndarray) -> np.ndarray:
    """:func:`quantize` of each element of an int64 array (``0 <= x < 2**53``), exactly."""
    bits = np.frexp(x.astype(np.float64))[1].astype(np.int64)  # bit_length, exact below 2**53
    shift = np.maximum(bits - GRID_BITS, 1)
    rounded = ((x + (np.int64(1) << (shift - 1))) >> shift) << shift
    return np.where(x < 1 << GRID_BITS, x, rounded)


class _Engine:
    """An AIC engine's memo tables (ms per rounded shape; loaded from the on-disk cache) and
    the Rust engine that fills them, built by ``build`` on the first shape they miss."""

    def __init__(self, build: Callable[[], Any], tables: _Tables | None = None) -> None:
        self._build = build
        self._handle: Any = None
        self.shared: dict[int, float]
        self.attn: dict[tuple[int, int, int], float]
        self.decode: dict[int, float]  # key: (B << 32) | s
        self.shared, self.attn, self.decode = tables or ({}, {}, {})

    @property
    def handle(self) -> Any:
        """aiconfigurator-core's ``EngineHandle`` (built on first use: ~0.5 s of CPU)."""
        if self._handle is None:
            self._handle = self._build()
        return self._handle

    def shared_ms(self, n: int) -> float:
        if n <= 0:
            return 0.0
        q = quantize(n)
        ms = self.shared.get(q)
        if ms is None:
            ms = self.shared[q] = self.handle.mixed_step_breakdown(q, 0, q, 1, 0)[1]
        return ms

    def attn_ms(self, k: int, n: int, c: int) -> float:
        """One request's share of the context attention of ``k`` requests of ``n`` new and
        ``c`` cached tokens each: AIC's attention of that uniform batch, divided by ``k``."""
        if n <= 0:
            return 0.0
        key = (k, quantize(n), quantize(c))
        ms = self.attn.get(key)
        if ms is None:
            _, qn, qc = key
            isl = qn + qc
            ms = self.attn[key] = self.handle.mixed_step_breakdown(k * isl, 0, isl, 1, qc)[2] / k
        return ms

    def decode_ms(self, batch: int, s: int) -> float:
        return float(self.handle.decode_step_latency(batch, max(0, s - 1), 0))


_ENGINES: dict[tuple[str, str, str, str, int], _Engine] = {}


def engine(model: str, system: str, framework: str, version: str, tp: int) -> _Engine:
    """The engine of these settings, made once per process: its ``EngineSpec`` compiled (or
    read from the on-disk cache, :mod:`radixbench.sim.cost_aic_cache`, with the step times
    already asked), its Rust engine built on the first step time not there. Raises
    ``ValueError`` (one line) when aiconfigurator-core is missing or rejects them."""
    key = (model, system, framework, version, tp)
    eng = _ENGINES.get(key)
    if eng is None:
        from radixbench.sim import cost_aic_cache as disk

        request = {"model": model, "system": system, "framework": framework,
                   "version": version, "tp": tp}  # fmt: skip
        spec = disk.decode(disk.load("engine", request))
        cached = spec is not None
        if spec is None:
            spec = _compile(*key)
            disk.store("engine", request, disk.encode(spec))

        def build() -> Any:
            try:
                return _handle(spec)
            except ValueError:
                if not cached:
                    raise
            fresh = _compile(*key)  # a cached spec the library rejects: compile it again
            disk.store("engine", request, disk.encode(fresh))
            return _handle(fresh)

        memo = {**request, "grid_bits": GRID_BITS, "formulas": formulas()}
        eng = _ENGINES[key] = _Engine(build, disk.memo_tables(memo))
        disk.keep_memo(memo, eng)
    return eng


def formulas() -> str:
    """A digest of the code that computes and keys the memo's step times (:func:`quantize`,
    ``_Engine``'s methods, :meth:`AicCostModel.decode_time_fn`): the stored memo of another
    version of that code is another entry, never read."""
    h = hashlib.sha256()

    def add(code: types.CodeType) -> None:
        h.update(code.co_code)
        h.update(repr(code.co_names).encode())
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                add(const)
            else:
                h.update(repr(const).encode())

    for fn in (quantize, _Engine.shared_ms, _Engine.attn_ms, _Engine.decode_ms,
               AicCostModel.decode_time_fn):  # fmt: skip
        add(fn.__code__)
    return h.hexdigest()[:16]


def _handle(spec: bytes) -> Any:
    """aiconfigurator-core's ``EngineHandle`` of ``spec`` (``ValueError``, one line, if it
    refuses it)."""
    try:
        from aiconfigurator_core.sdk.engine import EngineHandle

        return EngineHandle(spec)
    except Exception as e:
        raise ValueError(
            f"{AIC_DIST}: engine spec refused: {' '.join(str(e).split())[:200]}"
        ) from None


def _compile(model: str, system: str, framework: str, version: str, tp: int) -> bytes:
    """``compile_engine``'s ``EngineSpec`` bytes (the first step of ``EngineHandle.compile``).
    Raises ``ValueError`` (one line) when aiconfigurator-core is missing or rejects them."""
    try:
        from aiconfigurator_core.sdk.engine import compile_engine
    except ImportError:
        raise ValueError(
            f"{AIC_DIST} is not installed (pip install {AIC_DIST}=={AIC_PIN})"
        ) from None
    log = logging.getLogger("aiconfigurator_core")
    level = log.level
    log.setLevel(logging.ERROR)  # its data-fallback notices are not the user's concern
    try:
        return bytes(compile_engine(model, system, framework, backend_version=version, tp_size=tp))
    except Exception as e:  # its errors are ValueError, KeyError, download errors...
        raise ValueError(f"{AIC_DIST}: {model} on {system} {framework} {version}: "
                         f"{' '.join(str(e).split())[:200]}") from None  # fmt: skip
    finally:
        log.setLevel(level)


@dataclass(frozen=True, slots=True)
class AicCostModel:
    """Step times from aiconfigurator-core's measured kernels (formulas in the module docstring).

    model: AIC's model id (a Hugging Face id whose config AIC bundles, e.g.
    ``meta-llama/Meta-Llama-3.1-8B``); system: AIC's system (``h100_sxm``, ``h200_sxm``...);
    framework / version: whose kernel data (``sglang`` / ``0.5.16``, a literal version AIC
    exposes for that system); roofline: the same deployment's roofline preset, which supplies
    what AIC's step times do not — KV bytes per token, weights and HBM for
    ``--gpu-mem-gb``, the host link for HiCache, ``tp`` and ``layers`` (its efficiencies are not
    used); step_overhead_s: time added to every step (s; default 0: AIC's numbers are kernel
    sums, and the scheduler's cache CPU time is the coupled clock's); data_versions: the data
    version serving each op family (``gemm``, ``attention``, ``comm``; see
    :func:`radixbench.sim.cost_aic_spec.data_versions`), for the report.
    """

    name: str
    model: str
    system: str
    framework: str
    version: str
    roofline: RooflineCostModel
    step_overhead_s: float = 0.0
    data_versions: str = ""

    def __post_init__(self) -> None:
        if not self.step_overhead_s >= 0:
            raise ValueError(f"cost model {self.name}: step_overhead_s must be >= 0")

    # ------------------------------------------------ the deployment (from the roofline preset)
    @property
    def tp(self) -> int:
        return self.roofline.tp

    @property
    def layers(self) -> int:
        return self.roofline.layers

    @property
    def host_link_bytes_s(self) -> float:
        return self.roofline.host_link_bytes_s

    @property
    def kv_bytes_per_token(self) -> int:
        return self.roofline.kv_bytes_per_token

    @property
    def weight_bytes(self) -> float:
        return self.roofline.weight_bytes

    def kv_capacity_tokens(self, gpu_mem_gb: float) -> int:
        """As :meth:`RooflineCostModel.kv_capacity_tokens` (same memory layout)."""
        return self.roofline.kv_capacity_tokens(gpu_mem_gb)

    # ------------------------------------------------------------------------ step times
    def _engine(self) -> _Engine:
        return engine(self.model, self.system, self.framework, self.version, self.tp)

    def prefill_time(self, extend_lens: Sequence[int], prefix_lens: Sequence[int]) -> float:
        """One extend step (s): ``shared(sum n) + sum_i attn_k(n_i, c_i) / k + overhead``."""
        eng = self._engine()
        k = len(extend_lens)
        ms = eng.shared_ms(sum(extend_lens)) if k else 0.0
        for n, c in zip(extend_lens, prefix_lens):
            ms += eng.attn_ms(k, n, c)
        return ms * 1e-3 + self.step_overhead_s

    def decode_time_fn(self) -> Callable[[int, int], float]:
        """The per-step decode call: ``(batch_size, context_tokens) -> s``, memoized on
        ``(B, quantize(round(C / B)))``."""
        eng = self._engine()
        memo = eng.decode
        over = self.step_overhead_s

        def decode_time(batch_size: int, context_tokens: int) -> float:
            if batch_size <= 0:
                return over
            s = quantize(max(1, (context_tokens + batch_size // 2) // batch_size))
            key = (batch_size << 32) | s
            ms = memo.get(key)
            if ms is None:
                ms = memo[key] = eng.decode_ms(batch_size, s)
            return ms * 1e-3 + over

        return decode_time

    def decode_times(self, batch_size: int, context_tokens: np.ndarray) -> np.ndarray:
        """float64 ``[n]``: :meth:`decode_time_fn`'s function of each int64 context, bit for
        bit (the same memo keys, each looked up once; ``ms * 1e-3 + overhead`` elementwise)."""
        if batch_size <= 0:
            return np.full(context_tokens.shape, self.step_overhead_s)
        eng = self._engine()
        memo = eng.decode
        s = quantize_array(np.maximum(1, (context_tokens + batch_size // 2) // batch_size))
        keys, inverse = np.unique(s, return_inverse=True)
        ms = np.empty(keys.size)
        for i, q in enumerate(keys.tolist()):
            key = (batch_size << 32) | q
            v = memo.get(key)
            if v is None:
                v = memo[key] = eng.decode_ms(batch_size, q)
            ms[i] = v
        return ms[inverse] * 1e-3 + self.step_overhead_s

    def decode_time(self, batch_size: int, context_tokens: int) -> float:
        """One decode step (s); the same numbers as :meth:`decode_time_fn`'s function."""
        return self.decode_time_fn()(batch_size, context_tokens)

    def describe(self) -> dict[str, Any]:
        """What the report names: kind, source, version, system (see ``cost.cost_info``)."""
        return {
            "kind": "aic",
            "source": f"{AIC_DIST} {aic_version() or AIC_PIN} measured kernel data",
            "framework": self.framework,
            "version": self.version,
            "data_versions": self.data_versions,
            "system": self.system,
            "tp": self.tp,
            "model": self.model,
        }
