"""GPU step-time model: how long the simulated forward pass of one step takes (seconds).

The linear model below is deliberately simple and documented; its defaults approximate
Llama-3.1-8B in bf16 on one H100 SXM:
- prefill: ``prefill_base_s + prefill_per_token_s * uncached + prefill_per_cached_token_s *
  cached`` — compute-bound; 2 * 8e9 FLOPs per new token at ~55% of 989 TFLOP/s is ~3e-5 s, and
  attention over cached tokens adds a small per-token term.
- decode: ``decode_base_s + decode_per_req_s * batch + decode_per_ctx_token_s * context`` —
  bandwidth-bound; reading 16 GB of weights at 3.35 TB/s is ~5 ms, and every context token's KV
  (128 KiB for 8B: 32 layers x 8 KV heads x 128 dims x 2 x 2 bytes) adds ~4e-8 s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LinearCostModel:
    """Step times linear in tokens. All parameters in seconds (per token / per request)."""

    prefill_base_s: float = 2e-3
    prefill_per_token_s: float = 3e-5
    prefill_per_cached_token_s: float = 2e-7
    decode_base_s: float = 5e-3
    decode_per_req_s: float = 3e-5
    decode_per_ctx_token_s: float = 4e-8

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) < 0:
                raise ValueError(f"cost model parameter {name} must be >= 0")

    def prefill_time(self, uncached_tokens: int, cached_tokens: int) -> float:
        """Seconds for one prefill (extend) step over the batch's token totals."""
        return (
            self.prefill_base_s
            + self.prefill_per_token_s * uncached_tokens
            + self.prefill_per_cached_token_s * cached_tokens
        )

    def decode_time(self, batch_size: int, context_tokens: int) -> float:
        """Seconds for one decode step of ``batch_size`` requests over ``context_tokens``."""
        return (
            self.decode_base_s
            + self.decode_per_req_s * batch_size
            + self.decode_per_ctx_token_s * context_tokens
        )
