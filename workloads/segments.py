"""Prompts built from shared segments, and the synthetic-prefix rule for traces without hashes.

Synthetic workloads describe each prompt as a list of *segments* (system prompt, document,
question, ...). Every segment is a run of block hashes of ``block_size`` tokens drawn from one
:class:`BlockIds` counter, so two prompts that share a segment sequence share a hash prefix, and
:func:`radixbench.workloads.tokens.block_tokens` turns that into a shared token prefix. A
segment's length is rounded up to whole blocks except for the last segment of a prompt, whose
final block may be partial (so that a later prompt extending it still has it as a prefix).

:class:`PrefixRule` is the documented rule that gives traces publishing only lengths (Azure
LLM inference 2023, generic traces without ``hash_ids``) a shared-prefix structure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from radixbench.workloads.tokens import HashBlocks
from radixbench.workloads.trace import TraceRequest

__all__ = ["BlockIds", "PrefixRule", "Segment", "build_request", "round_up"]

Segment = tuple[int, ...]
"""Block hashes of one prompt segment."""


def round_up(tokens: int, block_size: int) -> int:
    """``tokens`` rounded up to a multiple of ``block_size`` (tokens)."""
    return -(-tokens // block_size) * block_size


class BlockIds:
    """Hands out fresh block hashes (0, 1, 2, ...) for segments of ``block_size`` tokens."""

    def __init__(self, block_size: int) -> None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size <= 0:
            raise ValueError(f"block_size must be a positive int (tokens), got {block_size!r}")
        self.block_size = block_size
        self._next = 0

    def segment(self, tokens: int) -> Segment:
        """A new segment of ``tokens`` tokens (>= 1): ceil(tokens / block_size) fresh hashes."""
        if tokens < 1:
            raise ValueError(f"a segment needs >= 1 token, got {tokens}")
        n = -(-tokens // self.block_size)
        out = tuple(range(self._next, self._next + n))
        self._next += n
        return out


def build_request(
    rid: int,
    segments: Sequence[Segment],
    last_tokens: int,
    output_length: int,
    block_size: int,
    arrival_s: float = 0.0,
    session_id: str | None = None,
) -> TraceRequest:
    """A request whose prompt is ``segments`` concatenated (a turn of conversation
    ``session_id``, if given).

    Every segment but the last counts ``len(segment) * block_size`` tokens; the last counts
    ``last_tokens`` (``(len - 1) * block_size < last_tokens <= len * block_size``).
    Returns a :class:`TraceRequest` whose ``hash_ids`` is a :class:`HashBlocks`.
    """
    hashes = [h for seg in segments for h in seg]
    full = sum(len(s) for s in segments[:-1]) * block_size
    last = segments[-1]
    if not (len(last) - 1) * block_size < last_tokens <= len(last) * block_size:
        raise ValueError(f"last segment of {len(last)} blocks cannot hold {last_tokens} tokens")
    return TraceRequest(
        rid=rid,
        arrival_s=arrival_s,
        input_length=full + last_tokens,
        output_length=output_length,
        hash_ids=HashBlocks(hashes, block_size),
        session_id=session_id,
    )


@dataclass(frozen=True)
class PrefixRule:
    """How prompts known only by length get shared prefixes (Azure traces, generic traces).

    Rule: request ``i`` picks one of ``prefixes`` shared prompts with Zipf popularity
    (probability of prompt ``k`` proportional to ``1 / (k + 1) ** zipf_s``), drawn from the
    scenario's seeded numpy Generator in request order; its first ``min(prefix_tokens,
    input_length)`` tokens are that shared prompt's and the rest are unique to the request.
    ``prefixes = 0`` makes every prompt unique. ``block_size`` (tokens per hash) only sets the
    granularity of the synthetic hashes; ``prefix_tokens`` is rounded up to whole blocks.
    """

    prefixes: int = 16
    prefix_tokens: int = 1024
    zipf_s: float = 1.0
    block_size: int = 16

    def __post_init__(self) -> None:
        if self.prefixes < 0:
            raise ValueError(f"prefixes must be >= 0, got {self.prefixes}")
        if self.prefix_tokens < 1:
            raise ValueError(f"prefix_tokens must be >= 1, got {self.prefix_tokens}")
        if not self.zipf_s >= 0:
            raise ValueError(f"zipf_s must be >= 0, got {self.zipf_s}")
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1 token, got {self.block_size}")

    def apply(
        self, lengths: Sequence[tuple[int, float, int, int]], rng: np.random.Generator
    ) -> list[TraceRequest]:
        """Requests for ``(rid, arrival_s, input_length, output_length)`` rows (input >= 1)."""
        bs = self.block_size
        ids = BlockIds(bs)
        pblocks = -(-self.prefix_tokens // bs)
        shared = [ids.segment(pblocks * bs) for _ in range(self.prefixes)]
        if self.prefixes:
            w = 1.0 / np.arange(1, self.prefixes + 1, dtype=np.float64) ** self.zipf_s
            picks = rng.choice(self.prefixes, size=len(lengths), p=w / w.sum())
        out = []
        for i, (rid, arrival, n_in, n_out) in enumerate(lengths):
            if not self.prefixes:
                segs = [ids.segment(n_in)]
                out.append(build_request(rid, segs, n_in, n_out, bs, arrival))
                continue
            pre = shared[int(picks[i])]
            if n_in <= pblocks * bs:
                k = -(-n_in // bs)
                out.append(build_request(rid, [pre[:k]], n_in, n_out, bs, arrival))
            else:
                rest = n_in - pblocks * bs
                out.append(build_request(rid, [pre, ids.segment(rest)], rest, n_out, bs, arrival))
        return out
