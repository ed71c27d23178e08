"""Options of the ``cache-aware`` router: SMG's ``cache_aware`` settings at a named revision.

``revision`` picks the SMG code the policy follows:

* ``f8daa88`` (default; smg-project/smg @f8daa88, 2026-08-21, the newest commit read): the
  per-request spill gate, matched-tenant pressure selection, once-counted ownership and the
  tree-wide size budget, and the options added since: ``overlap_decay`` /
  ``selection_temperature`` (smg#2117, 3d14518), ``cache_index = "hash"`` with
  ``cache_ttl_secs`` / ``cache_boundaries`` (smg#2213, 0b92ba1), the worker overload vetoes
  ``worker_overload_waiting_requests`` / ``worker_overload_token_usage`` (smg#2220, a561c24);
* ``73da68c`` (lightseekorg/smg @73da68c, 2026-08-11): the fleet-wide count-spread imbalance
  test, the deepest node's cached tenant, cumulative per-tenant counts and the per-tenant trim.

Defaults are the gateway CLI's at f8daa88 (``model_gateway/src/main.rs:237-370``): cache_threshold
0.3, balance_abs_threshold 64, balance_rel_threshold 1.5, balance / overload token-usage
thresholds 1.0 (off), overlap_decay 0, selection_temperature 0, eviction_interval 120 s,
max_tree_size 2**26, block_size 16 (``page``), cache_index tree, cache_ttl_secs 180, no
cache_boundaries, overload vetoes unset (0 here), ``--load-monitor-interval`` 10 s (``:518-520``).
The same at 73da68c (``main.rs:193-225``) for the settings it has. ``kv_events``: the
event-driven mode (an index of the instances' KV events, used while it holds blocks; SMG turns
it on for gRPC workers that stream KV events). ``miss = "smallest-tree"``: the older sgl-router's
miss branch (the worker with the smallest tree) instead of the least loaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["REVISIONS", "CacheAwareOptions"]

#: SMG revisions the policy can follow.
REVISIONS = ("f8daa88", "73da68c")

# options that exist only from f8daa88's PRs on (option -> its default, the PR)
_LATER = {
    "overlap_decay": (0.0, "smg#2117"),
    "selection_temperature": (0.0, "smg#2117"),
    "cache_index": ("tree", "smg#2213"),
    "worker_overload_waiting_requests": (0, "smg#2220"),
    "worker_overload_token_usage": (0.0, "smg#2220"),
}


@dataclass(frozen=True)
class CacheAwareOptions:
    """SMG's cache_aware settings (module docstring). Raises ``ValueError`` (one line) for a
    value SMG's config validation refuses or an option the chosen revision lacks."""

    revision: str = "f8daa88"
    cache_threshold: float = 0.3
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    balance_token_usage_threshold: float = 1.0
    overload_token_usage_threshold: float = 1.0
    eviction_interval_secs: float = 120.0
    max_tree_size: int = 2**26
    page: int = 16
    miss: str = "min-load"
    kv_events: bool = False
    load_monitor_interval_secs: float = 10.0
    overlap_decay: float = 0.0
    selection_temperature: float = 0.0
    cache_index: str = "tree"
    cache_ttl_secs: float = 180.0
    cache_boundaries: str = ""
    worker_overload_waiting_requests: int = 0
    worker_overload_token_usage: float = 0.0

    def __post_init__(self) -> None:
        if self.revision not in REVISIONS:
            known = ", ".join(REVISIONS)
            raise ValueError(f"revision must be one of {known}, got {self.revision!r}")
        if not 0.0 <= self.cache_threshold <= 1.0:
            raise ValueError(f"cache_threshold must be in [0, 1], got {self.cache_threshold}")
        if self.balance_abs_threshold < 0 or self.balance_rel_threshold < 0:
            raise ValueError("balance thresholds must be >= 0")
        for name in ("balance_token_usage_threshold", "overload_token_usage_threshold"):
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"{name} must be >= 0 (>= 1 disables it)")
        if self.eviction_interval_secs < 0 or self.max_tree_size < 1 or self.page < 1:
            raise ValueError("eviction_interval_secs >= 0, max_tree_size and page >= 1")
        if self.miss not in ("min-load", "smallest-tree"):
            raise ValueError(f"miss must be min-load or smallest-tree, got {self.miss!r}")
        if not self.load_monitor_interval_secs > 0:
            raise ValueError("load_monitor_interval_secs must be > 0")
        for name in ("overlap_decay", "selection_temperature"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be finite and >= 0 (0 disables it)")
        if self.cache_index not in ("tree", "hash"):
            raise ValueError(f"cache_index must be tree or hash, got {self.cache_index!r}")
        if not self.cache_ttl_secs > 0:
            raise ValueError("cache_ttl_secs must be > 0")
        self.boundaries()  # parses
        if self.cache_index == "hash" and not self.boundaries():
            raise ValueError("cache_index=hash requires cache_boundaries (e.g. '1024,4096')")
        if self.worker_overload_waiting_requests < 0:
            raise ValueError("worker_overload_waiting_requests must be >= 1 (0: unset)")
        if not 0.0 <= self.worker_overload_token_usage <= 1.0:
            raise ValueError("worker_overload_token_usage must be in (0, 1] (0: unset)")
        if self.revision == "73da68c":
            for name, (default, pr) in _LATER.items():
                if getattr(self, name) != default:
                    raise ValueError(f"{name} came with {pr}; it needs revision f8daa88")

    def boundaries(self) -> tuple[int, ...]:
        """``cache_boundaries`` as sorted, deduplicated positive token positions (SMG sorts,
        dedups and drops zeros, ``cache_aware.rs:208-213`` @f8daa88)."""
        text = self.cache_boundaries.strip()
        if not text:
            return ()
        try:
            vals = {int(x) for x in text.split(",") if x.strip()}
        except ValueError:
            raise ValueError(
                f"cache_boundaries must be comma-separated token positions, got {text!r}"
            ) from None
        if any(v < 0 for v in vals):
            raise ValueError("cache_boundaries must be >= 0")
        return tuple(sorted(v for v in vals if v > 0))

    @property
    def vetoes(self) -> bool:
        """Whether an overload veto is configured (smg#2220 ``OverloadThresholds::is_enabled``)."""
        return self.worker_overload_waiting_requests > 0 or self.worker_overload_token_usage > 0

    @property
    def needs_loads(self) -> bool:
        """Whether the gateway polls the instances' loads (smg#2182 ``needs_backend_loads``,
        plus the vetoes' own poll)."""
        return (
            self.overlap_decay > 0
            or self.balance_token_usage_threshold < 1.0
            or self.overload_token_usage_threshold < 1.0
            or self.vetoes
        )
