"""The infinite-cache prefix-hit ceiling of a workload.

With an unbounded cache that keeps every prompt it has seen, request ``i`` can reuse the
longest token prefix its prompt shares with any earlier request's prompt (earlier = before it in
arrival order), capped at ``input_length - 1`` tokens as in the simulator (SGLang always
computes the last prompt token). No eviction policy can do better, so the ceiling bounds the
achieved prefix hit rate of every variant. (Outputs are synthetic and never reappear in
prompts, so they add nothing.) Computed exactly on hash blocks: a trie over hash chains whose
nodes remember how many tokens of their block any earlier prompt covered (the last block of a
prompt may be partial), which equals the token-level answer because distinct block hashes give
distinct token runs (up to a 1 / vocab_size chance per block boundary).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from radixbench.workloads.tokens import HashBlocks
from radixbench.workloads.trace import MOONCAKE_BLOCK_SIZE, TraceRequest

__all__ = ["hit_ceiling", "hit_rates", "prefix_hits"]


def _block_size(r: TraceRequest) -> int:
    h = r.hash_ids
    return h.block_size if isinstance(h, HashBlocks) else MOONCAKE_BLOCK_SIZE


def prefix_hits(requests: Sequence[TraceRequest]) -> list[int]:
    """Per request (in the given order): tokens an infinite cache would serve (<= input - 1)."""
    root: dict[int, Any] = {}  # hash -> [covered tokens of this block, children dict]
    out = []
    for r in requests:
        bs, n = _block_size(r), r.input_length
        node, matched, alive = root, 0, True
        for b, h in enumerate(r.hash_ids):
            own = min(bs, n - b * bs)
            if own <= 0:
                break
            entry = node.get(h)
            if entry is None:
                entry = node[h] = [0, {}]
            if alive:
                got = min(own, entry[0])
                matched += got
                alive = got == bs
            entry[0] = max(entry[0], own)
            node = entry[1]
        out.append(max(0, min(matched, n - 1)))
    return out


def hit_ceiling(requests: Sequence[TraceRequest]) -> dict[str, float]:
    """``{"all": ..., "last_half": ...}``: ceiling hit rate (hit tokens / input tokens) over all
    requests and over the second half (requests ``len // 2`` onward, warm cache); NaN if no
    input tokens."""
    return hit_rates(prefix_hits(requests), [r.input_length for r in requests])


def hit_rates(hits: Sequence[int], lens: Sequence[int]) -> dict[str, float]:
    """``{"all": ..., "last_half": ...}``: ``sum(hits) / sum(lens)`` (hit tokens over input
    tokens, one entry per request) over all requests and over the second half (requests
    ``len // 2`` onward); NaN where there are no input tokens."""

    def rate(a: int) -> float:
        tot = sum(lens[a:])
        return sum(hits[a:]) / tot if tot else float("nan")

    return {"all": rate(0), "last_half": rate(len(lens) // 2)}
