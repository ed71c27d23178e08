"""``precise``: routing on an index of what each instance holds, fed by the instances' KV events.

The index (:class:`~radixbench.cluster.routers.block_index.BlockIndex`) is what llm-d's
precise prefix-cache scorer reads (llm-d-kv-cache-manager's ``kvevents.Pool`` -> KV-block
index -> ``kvcache.Index``; llm-d blog "KV-Cache Wins You Can See", 2025-09-24): a request's
pages are hashed as the engine hashes them (:func:`~radixbench.cluster.routers.page_hash.
engine_block_ids`: sglang 0.5.23's chain) and each instance's longest run of held leading
blocks is its overlap. Events reach the index after the configured delay, minus the lost
batches (``radixbench.cluster.bus``): the index can be stale or incomplete, as a real one.

The score is the weighted sum of llm-d's scorers, highest wins (``max-score-picker``, ties
broken at random, seeded), with the weights of its ``precise-scheduling`` profile
(llm-d-kv-cache-manager ``benchmarking/73-capacity/README.md``: prefix-cache-scorer 3,
kv-cache-scorer 2, queue-scorer 2): prefix score = overlap blocks / request blocks (the fraction
of the prefix resident); queue score = ``(max q - q) / (max q - min q)`` over the instances'
waiting queues (1 when all equal; gateway-api-inference-extension queue scorer); KV score =
``1 - KV usage``. ``prefix_weight = 0`` is llm-d's load-only ``load-scheduling``. Only the
eligible (healthy) instances are picked from. NVIDIA Dynamo's cost is the ``dynamo-kv`` router.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from radixbench.cluster.routers.base import SHED, ClusterView, RouteRequest
from radixbench.cluster.routers.block_index import BlockIndex
from radixbench.cluster.routers.page_hash import engine_block_ids

__all__ = ["Precise", "PreciseOptions"]


@dataclass(frozen=True)
class PreciseOptions:
    """llm-d's scorer weights ``prefix_weight``, ``kv_weight``, ``queue_weight``."""

    prefix_weight: float = 3.0
    kv_weight: float = 2.0
    queue_weight: float = 2.0

    def __post_init__(self) -> None:
        if min(self.prefix_weight, self.kv_weight, self.queue_weight) < 0:
            raise ValueError("weights must be >= 0")


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
        if not view.eligible:
            self.predicted_tokens = -1
            return SHED
        ids = engine_block_ids(req.tokens, self.page)
        self.overlap = self.index.prefix_blocks(ids)
        chosen = self._llmd(len(ids), view)
        self.predicted_tokens = self.overlap[chosen] * self.page
        return chosen

    def _llmd(self, blocks: int, view: ClusterView) -> int:
        o, n = self.opt, view.n
        queues = [view.waiting(i) for i in range(n)]
        lo, hi = min(queues[i] for i in view.eligible), max(queues[i] for i in view.eligible)
        scores = []
        for i in range(n):
            prefix = self.overlap[i] / blocks if blocks else 0.0
            queue = 1.0 if hi == lo else (hi - queues[i]) / (hi - lo)
            kv = 1.0 - view.kv_usage(i)
            scores.append(o.prefix_weight * prefix + o.queue_weight * queue + o.kv_weight * kv)
        best = max(scores[i] for i in view.eligible)
        ties = [i for i in view.eligible if scores[i] >= best - 1e-12]
        return ties[0] if len(ties) == 1 else int(ties[int(self.rng.integers(len(ties)))])
