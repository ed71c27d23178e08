"""``oracle``: the instance holding the longest prefix of the request, under a load cap.

An upper reference, not a deployable policy: it reads every instance's KV events with no delay
and no loss (each instance's tree as of its last completed scheduler step) and routes to the
instance holding the most leading blocks of the request among the eligible (healthy) ones whose
outstanding requests are within ``slack`` of the least loaded (the cap that keeps it from piling
everything on one instance); ties, and a request no candidate holds any block of, go to the
least loaded candidate (``least_loaded``). The report's regret of a router is measured against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from radixbench.cluster.routers.base import SHED, ClusterView, RouteRequest, least_loaded
from radixbench.cluster.routers.block_index import BlockIndex
from radixbench.cluster.routers.page_hash import engine_block_ids

__all__ = ["Oracle", "OracleOptions"]


@dataclass(frozen=True)
class OracleOptions:
    """``slack``: candidates hold at most ``min outstanding + slack`` requests."""

    slack: int = 8

    def __post_init__(self) -> None:
        if self.slack < 0:
            raise ValueError(f"slack must be >= 0, got {self.slack}")


class Oracle:
    """The policy (module docstring); always fed undelayed, lossless events."""

    name = "oracle"
    needs_tokens = True
    needs_events = True
    exact_events = True
    Options = OracleOptions

    def __init__(self, n: int, options: OracleOptions, seed: int, page_size: int) -> None:
        self.slack = options.slack
        self.page = page_size
        self.index = BlockIndex(n)
        self.predicted_tokens = -1

    def on_events(self, instance: int, events: Sequence[Any]) -> None:
        self.index.apply(instance, events)

    def on_finish(self, instance: int, rid: int) -> None:
        pass

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        if not view.eligible:
            self.predicted_tokens = -1
            return SHED
        cap = min(view.outstanding[i] for i in view.eligible) + self.slack
        cands = [i for i in view.eligible if view.outstanding[i] <= cap]
        held = self.index.prefix_blocks(engine_block_ids(req.tokens, self.page))
        best = max(held[i] for i in cands)
        self.predicted_tokens = best * self.page
        if best == 0:
            return least_loaded(view, cands)
        return least_loaded(view, [i for i in cands if held[i] == best])
