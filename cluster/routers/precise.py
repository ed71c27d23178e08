"""``precise``: routing on an index of what each instance holds, fed by the instances' KV events.

The index (:class:`~radixbench.cluster.routers.block_index.BlockIndex`) is what llm-d's
precise prefix-cache scorer reads (llm-d-kv-cache-manager's ``kvevents.Pool`` -> KV-block
index -> ``kvcache.Index``; llm-d blog "KV-Cache Wins You Can See", 2025-09-24): a request's
pages are hashed as the engine hashes them (:func:`~radixbench.cluster.routers.page_hash.
engine_block_ids`: sglang 0.5.23's chain) and each instance's longest run of held leading
blocks is its overlap. Events reach the index after the configured delay, minus the lost
batches (``radixbench.cluster.bus``): the index can be stale or incomplete, as a real one.

Scorers (``scorer``):

* ``llm-d`` (default): the weighted sum of llm-d's scorers, highest wins (``max-score-picker``,
  ties broken at random, seeded), with the weights of its ``precise-scheduling`` profile
  (llm-d-kv-cache-manager ``benchmarking/73-capacity/README.md``: prefix-cache-scorer 3,
  kv-cache-scorer 2, queue-scorer 2): prefix score = overlap blocks / request blocks (the
  fraction of the prefix resident); queue score = ``(max q - q) / (max q - min q)`` over the
  instances' waiting queues (1 when all equal; gateway-api-inference-extension queue scorer);
  KV score = ``1 - KV usage``. ``prefix_weight = 0`` is llm-d's load-only ``load-scheduling``.
* ``dynamo``: NVIDIA Dynamo's KV router cost, lowest wins (ai-dynamo/dynamo
  ``docs/router/kv_cache_routing.md``, "Cost formula"): ``overlap_score_weight x prefill
  blocks + decode blocks``, prefill blocks = the request's blocks not held by the instance plus
  the blocks of the prompts waiting there, decode blocks = the instance's KV in use plus the
  request's blocks (in pages); ``temperature > 0`` samples a softmax of the negated costs
  normalised to [0, 1] (``--router-temperature``), 0 picks the lowest (ties: lower index).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from radixbench.cluster.routers.base import ClusterView, RouteRequest
from radixbench.cluster.routers.block_index import BlockIndex
from radixbench.cluster.routers.page_hash import engine_block_ids

__all__ = ["Precise", "PreciseOptions"]


@dataclass(frozen=True)
class PreciseOptions:
    """``scorer``: ``llm-d`` or ``dynamo``; llm-d weights ``prefix_weight``, ``kv_weight``,
    ``queue_weight``; Dynamo ``overlap_score_weight`` and ``temperature``."""

    scorer: str = "llm-d"
    prefix_weight: float = 3.0
    kv_weight: float = 2.0
    queue_weight: float = 2.0
    overlap_score_weight: float = 1.0
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if self.scorer not in ("llm-d", "dynamo"):
            raise ValueError(f"scorer must be llm-d or dynamo, got {self.scorer!r}")
        weights = (self.prefix_weight, self.kv_weight, self.queue_weight)
        if min(*weights, self.overlap_score_weight, self.temperature) < 0:
            raise ValueError("weights and temperature must be >= 0")


class Precise:
    """The policy (module docstring). ``overlap``: the overlap (blocks) of the last decision
    per instance (for tests and diagnostics)."""

    name = "precise"
    needs_tokens = True
    needs_events = True
    Options = PreciseOptions

    def __init__(self, n: int, options: PreciseOptions, seed: int, page_size: int) -> None:
        self.opt = options
        self.page = page_size
        self.index = BlockIndex(n)
        self.rng = np.random.default_rng(seed)
        self.overlap: list[int] = [0] * n
        self.predicted_tokens = -1

    def on_events(self, instance: int, events: Sequence[Any]) -> None:
        self.index.apply(instance, events)

    def on_finish(self, instance: int, rid: int) -> None:
        pass

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        ids = engine_block_ids(req.tokens, self.page)
        self.overlap = self.index.prefix_blocks(ids)
        if self.opt.scorer == "dynamo":
            chosen = self._dynamo(len(ids), view)
        else:
            chosen = self._llmd(len(ids), view)
        self.predicted_tokens = self.overlap[chosen] * self.page
        return chosen

    def _llmd(self, blocks: int, view: ClusterView) -> int:
        o, n = self.opt, view.n
        queues = [view.waiting(i) for i in range(n)]
        lo, hi = min(queues), max(queues)
        scores = []
        for i in range(n):
            prefix = self.overlap[i] / blocks if blocks else 0.0
            queue = 1.0 if hi == lo else (hi - queues[i]) / (hi - lo)
            kv = 1.0 - view.kv_usage(i)
            scores.append(o.prefix_weight * prefix + o.queue_weight * queue + o.kv_weight * kv)
        best = max(scores)
        ties = [i for i, s in enumerate(scores) if s >= best - 1e-12]
        return ties[0] if len(ties) == 1 else int(ties[int(self.rng.integers(len(ties)))])

    def _dynamo(self, blocks: int, view: ClusterView) -> int:
        o, page = self.opt, self.page
        costs = np.array(
            [
                o.overlap_score_weight * (blocks - self.overlap[i] + view.waiting_tokens(i) / page)
                + view.kv_used_tokens(i) / page
                + blocks
                for i in range(view.n)
            ]
        )
        if o.temperature <= 0:
            return int(np.argmin(costs))
        span = float(costs.max() - costs.min()) or 1.0
        z = -(costs - costs.min()) / span / o.temperature
        p = np.exp(z - z.max())
        return int(self.rng.choice(view.n, p=p / p.sum()))
