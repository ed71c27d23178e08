"""A synthetic forward of a dense decoder (Llama / Qwen3 shapes) with random weights, timed.

What ``radixbench calibrate`` measures: one rank of a preset's deployment (heads, KV heads,
MLP and vocabulary split over ``tp``; all-reduce not run) in eager PyTorch, bf16 on CUDA
(float32 on CPU, whose bf16 GEMMs are emulated), no model files:

- per layer: RMSNorm, fused QKV GEMM, the new tokens' K and V written into separate per-layer K
  and V caches (``[requests, kv_heads, tokens, head_dim]`` each), attention by
  ``torch.nn.functional.scaled_dot_product_attention`` (GQA via ``enable_gqa``; an extend
  after a cached prefix masked by ``torch.nn.attention.bias.causal_lower_right``), O GEMM,
  RMSNorm, gate/up GEMM, SiLU x up, down GEMM; then the logits GEMM of each request's last
  token. RoPE and sampling are left out (element-wise, small).
- prefill: ``k`` requests of ``n`` new tokens after ``c`` cached; decode: ``B`` requests of
  one new token over ``ctx`` cached each.

Timing (:meth:`SyntheticModel.time`): CUDA events around the forward on CUDA (after
warm-ups, the median of ``reps``), ``perf_counter`` on CPU. Caches are allocated before
timing. Shapes whose KV caches do not fit next to the weights are refused (``MemoryError``),
as a server could not run them either.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["ModelShape", "SyntheticModel"]


@dataclass(frozen=True)
class ModelShape:
    """A dense decoder's shapes (whole model) and its TP degree; :meth:`rank` splits them."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tp: int = 1

    @classmethod
    def from_preset(cls, doc: dict[str, Any], where: str) -> ModelShape:
        """From a preset's ``[model]`` (``layers``, ``heads``, ``kv_heads``, ``head_dim``,
        ``hidden_size``, ``intermediate_size``, ``vocab_size``) and ``[gpu] tp``. Raises
        ``ValueError`` naming the missing key."""
        m = doc.get("model", {})
        try:
            return cls(
                int(m["layers"]), int(m["hidden_size"]), int(m["heads"]), int(m["kv_heads"]),
                int(m["head_dim"]), int(m["intermediate_size"]), int(m["vocab_size"]),
                int(doc.get("gpu", {}).get("tp", 1)),
            )  # fmt: skip
        except KeyError as e:
            raise ValueError(
                f"{where}: missing key [model] {e.args[0]} (calibrate needs the model's "
                "hidden_size, intermediate_size and vocab_size)"
            ) from None

    def rank(self) -> ModelShape:
        """One TP rank's shard (heads, KV heads, MLP, vocabulary over ``tp``; at least 1)."""
        t = self.tp
        return ModelShape(self.layers, self.hidden, max(1, self.heads // t),
                          max(1, self.kv_heads // t), self.head_dim,
                          max(1, self.intermediate // t), max(1, self.vocab // t), 1)  # fmt: skip


class SyntheticModel:
    """Random weights of one rank of ``shape`` on ``device`` (seeded, not timed)."""

    def __init__(self, shape: ModelShape, device: torch.device, seed: int = 0) -> None:
        self.s = shape.rank()
        self.device = device
        self.dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        g = torch.Generator(device="cpu").manual_seed(seed)
        s = self.s
        qkv = (s.heads + 2 * s.kv_heads) * s.head_dim

        def w(*size: int) -> torch.Tensor:
            t = torch.randn(*size, generator=g, dtype=torch.float32) * size[0] ** -0.5
            return t.to(device=device, dtype=self.dtype)

        self.layers = [
            (w(s.hidden, qkv), w(s.heads * s.head_dim, s.hidden), w(s.hidden, 2 * s.intermediate),
             w(s.intermediate, s.hidden))
            for _ in range(s.layers)
        ]  # fmt: skip
        self.lm_head = w(s.hidden, s.vocab)
        self.weight_bytes = sum(t.numel() * t.element_size() for ly in self.layers for t in ly)
        self.attention_path = "sdpa"

    def kv_bytes(self, requests: int, tokens: int) -> int:
        """Bytes of the separate K and V caches of ``requests`` x ``tokens`` over all layers."""
        s = self.s
        elt = torch.tensor([], dtype=self.dtype).element_size()
        return 2 * s.layers * requests * s.kv_heads * tokens * s.head_dim * elt

    def _caches(self, requests: int, tokens: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        s = self.s
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            need = self.kv_bytes(requests, tokens) + 4 * requests * tokens * s.hidden * 2
            if need > 0.9 * free:
                raise MemoryError(f"KV of {requests} x {tokens} tokens does not fit")
        shape = (requests, s.kv_heads, tokens, s.head_dim)
        return [(torch.randn(shape, device=self.device, dtype=self.dtype),
                 torch.randn(shape, device=self.device, dtype=self.dtype))
                for _ in range(s.layers)]  # fmt: skip

    def _forward(self, x: torch.Tensor, caches: list, start: int) -> torch.Tensor:
        """``x``: ``[k, n, hidden]`` new tokens after ``start`` cached; returns the logits of
        each request's last token. Writes the new K/V into ``caches[.., start:start + n]``."""
        from torch.nn.attention.bias import causal_lower_right

        s = self.s
        k, n, _ = x.shape
        end = start + n
        mask = causal_lower_right(n, end) if n > 1 else None
        for (wqkv, wo, wgu, wd), (kc, vc) in zip(self.layers, caches):
            h = torch.nn.functional.rms_norm(x, (s.hidden,))
            q, kn, vn = (h @ wqkv).split(
                [s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], -1
            )
            kc[:, :, start:end] = kn.view(k, n, s.kv_heads, s.head_dim).transpose(1, 2)
            vc[:, :, start:end] = vn.view(k, n, s.kv_heads, s.head_dim).transpose(1, 2)
            qh = q.view(k, n, s.heads, s.head_dim).transpose(1, 2)
            a = self._attention(qh, kc[:, :, :end], vc[:, :, :end], mask)
            x = x + a.transpose(1, 2).reshape(k, n, -1) @ wo
            h = torch.nn.functional.rms_norm(x, (s.hidden,))
            gate, up = (h @ wgu).chunk(2, -1)
            x = x + (torch.nn.functional.silu(gate) * up) @ wd
        return x[:, -1] @ self.lm_head

    def _attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any) -> Any:
        """SDPA with GQA; where this torch's kernels refuse GQA under the lower-right mask,
        K and V repeated to the query heads (``attention_path`` says which ran)."""
        sdpa = torch.nn.functional.scaled_dot_product_attention
        gqa = self.s.heads != self.s.kv_heads
        if self.attention_path == "sdpa":
            try:
                return sdpa(q, k, v, attn_mask=mask, enable_gqa=gqa)
            except RuntimeError:
                self.attention_path = "sdpa, K/V repeated to the query heads"
        g = self.s.heads // self.s.kv_heads
        return sdpa(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), attn_mask=mask)

    def time(self, phase: str, a: int, b: int, c: int = 0, reps: int = 3, warmup: int = 1) -> float:
        """Median seconds of one forward: ``phase`` ``"prefill"`` (``a`` requests of ``b`` new
        tokens after ``c`` cached) or ``"decode"`` (``a`` requests over ``b`` cached tokens).
        Raises ``MemoryError`` when the caches do not fit (CUDA)."""
        k, n, start = (a, b, c) if phase == "prefill" else (a, 1, b)
        caches = self._caches(k, start + n)
        x = torch.randn(k, n, self.s.hidden, device=self.device, dtype=self.dtype)
        cuda = self.device.type == "cuda"
        times = []
        with torch.inference_mode():
            for i in range(warmup + reps):
                if cuda:
                    t0, t1 = (
                        torch.cuda.Event(enable_timing=True),
                        torch.cuda.Event(enable_timing=True),
                    )
                    t0.record()
                    self._forward(x, caches, start)
                    t1.record()
                    t1.synchronize()
                    dt = t0.elapsed_time(t1) * 1e-3
                else:
                    p0 = time.perf_counter()
                    self._forward(x, caches, start)
                    dt = time.perf_counter() - p0
                if i >= warmup:
                    times.append(dt)
        del caches
        return statistics.median(times)
