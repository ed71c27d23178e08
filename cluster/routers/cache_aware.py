"""``cache-aware``: the SGLang router / model gateway policy of the same name, approximate tree.

Follows lightseekorg/smg ``model_gateway/src/policies/cache_aware.rs`` @73da68c, token-tree
path (gRPC: the request arrives tokenized), one routing decision per request:

1. loads = in-flight requests per worker (``Worker::load``); the min-load worker is the least
   loaded, ties by requests processed, then index (``select_worker``, ``:769-812``);
2. imbalanced when ``max - min > balance_abs_threshold`` AND ``max > balance_rel_threshold *
   min`` (``is_imbalanced``, ``:283-305``; the KV-usage triggers are off by default, as
   there): route to the min-load worker and still insert the request for it
   (``select_worker_min_load``, ``:472-560``);
3. balanced: match the request in the approximate tree; ``match_rate = matched tokens /
   input tokens`` (``select_worker_with_tokens``, ``:986-1070``); above ``cache_threshold`` the
   matched worker, else the min-load worker (``miss = "min-load"``; the older sgl-router sent
   misses to the worker with the smallest tree: ``miss = "smallest-tree"``); insert the request
   for the chosen worker;
4. every ``eviction_interval_secs`` of simulated time, each worker's share of the tree is
   trimmed to ``max_tree_size`` tokens by LRU (the background ``PeriodicTask``, ``:148-205``;
   ``TokenTree::evict_tenant_by_size``).

Defaults are the gateway CLI's (``model_gateway/src/main.rs:193-225``: cache_threshold 0.3,
balance_abs_threshold 64, balance_rel_threshold 1.5, eviction_interval 120 s, max_tree_size
2**26), not its library's ``CacheAwareConfig::default()`` (0.5 / 32 / 1.1 / 30 s / 10,000,
``policies/mod.rs:133-147``). ``page`` is the token tree's page (16, ``token_tree.rs:44``).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from radixbench.cluster.routers.approx_tree import ApproxTree
from radixbench.cluster.routers.base import ClusterView, RouteRequest, least_loaded
from radixbench.cluster.routers.page_hash import prefix_keys

__all__ = ["CacheAware", "CacheAwareOptions"]


@dataclass(frozen=True)
class CacheAwareOptions:
    """Thresholds of the policy (module docstring); ``miss``: ``min-load`` or
    ``smallest-tree``; ``page``: tokens per tree key."""

    cache_threshold: float = 0.3
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    eviction_interval_secs: float = 120.0
    max_tree_size: int = 2**26
    miss: str = "min-load"
    page: int = 16

    def __post_init__(self) -> None:
        if not 0.0 <= self.cache_threshold <= 1.0:
            raise ValueError(f"cache_threshold must be in [0, 1], got {self.cache_threshold}")
        if self.balance_abs_threshold < 0 or self.balance_rel_threshold < 0:
            raise ValueError("balance thresholds must be >= 0")
        if self.eviction_interval_secs < 0 or self.max_tree_size < 1 or self.page < 1:
            raise ValueError("eviction_interval_secs >= 0, max_tree_size and page >= 1")
        if self.miss not in ("min-load", "smallest-tree"):
            raise ValueError(f"miss must be min-load or smallest-tree, got {self.miss!r}")


class CacheAware:
    """The policy (module docstring); ``stats``: decisions by branch (``imbalanced``,
    ``hit``, ``miss``)."""

    name = "cache-aware"
    needs_tokens = True
    needs_events = False
    Options = CacheAwareOptions

    def __init__(self, n: int, options: CacheAwareOptions, seed: int, page_size: int) -> None:
        self.opt = options
        self.tree = ApproxTree(options.page)
        self.next_eviction = options.eviction_interval_secs
        self.stats = {"imbalanced": 0, "hit": 0, "miss": 0}
        self.predicted_tokens = -1

    def _imbalanced(self, view: ClusterView) -> bool:
        lo, hi = min(view.outstanding), max(view.outstanding)
        o = self.opt
        return hi - lo > o.balance_abs_threshold and hi > lo * o.balance_rel_threshold

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        o = self.opt
        if o.eviction_interval_secs > 0:
            while view.now >= self.next_eviction:  # the periodic task's ticks since the last
                self.tree.evict_by_size(o.max_tree_size)
                self.next_eviction += o.eviction_interval_secs
        keys = array("Q")
        keys.frombytes(prefix_keys(req.tokens, o.page).tobytes())
        self.predicted_tokens = -1
        if self._imbalanced(view):
            self.stats["imbalanced"] += 1
            chosen = least_loaded(view)
        else:
            matched, tenant = self.tree.match(keys)
            rate = matched / len(req.tokens) if len(req.tokens) else 0.0
            if rate > o.cache_threshold and tenant is not None:
                self.stats["hit"] += 1
                chosen = tenant
                self.predicted_tokens = matched
            else:
                self.stats["miss"] += 1
                if o.miss == "smallest-tree":
                    size = self.tree.tokens
                    chosen = min(range(view.n), key=lambda i: (size.get(i, 0), i))
                else:
                    chosen = least_loaded(view)
        self.tree.insert(keys, chosen)
        return chosen

    def on_events(self, instance: int, events: Sequence[Any]) -> None:
        pass

    def on_finish(self, instance: int, rid: int) -> None:
        pass
