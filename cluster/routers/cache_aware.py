"""``cache-aware``: the SGLang model gateway's ``cache_aware`` policy (SMG), token path.

One decision per request (gRPC: it arrives tokenized), following ``model_gateway/src/policies/
cache_aware.rs`` at the revision the options name (:mod:`.cache_aware_options`); line numbers
below are @f8daa88 (smg-project/smg) unless marked @73da68c (lightseekorg/smg).

1. **Eligible instances**: healthy ones (the gateway's view) not vetoed as overloaded (smg#2220:
   from the last load snapshot, waiting requests >= ``worker_overload_waiting_requests`` or KV
   usage >= ``worker_overload_token_usage``); none: the request is shed. The least loaded one
   by ``(load, processed, index)`` is the min-load pick (``select_worker`` ``:1001-1045``;
   @73da68c ``:769-805``); loads are the gateway's own in-flight counts.
2. **KV pressure** (smg#2182, 0e2f925, made the snapshot flow): the eligible instances' KV usage
   in the last snapshot (polled every ``load_monitor_interval_secs``) over
   ``overload_token_usage_threshold``, or its spread over ``balance_token_usage_threshold``:
   route to the min-load instance and insert for it (``is_kv_imbalanced`` ``:492-511``,
   ``select_worker_min_load`` ``:686-797``). @73da68c the count spread also triggers it:
   ``max - min > balance_abs_threshold`` and, in f32, ``max > min x balance_rel_threshold``
   (``is_imbalanced`` ``:283-307`` @73da68c).
3. **Event-driven** (``kv_events``, the index holds blocks): the instances with the longest run
   of leading blocks held win: @f8daa88 by overlap decay / temperature / random ties among the
   highest score, then the spill gate (``select_worker_event_driven`` / ``score_overlap``
   ``:1246-1374``); @73da68c the highest ``(score, -load, -tree size)``, the last such (``:928-983``
   @73da68c); no overlap: the min-load instance. The tree is not touched.
4. **Hash index** (``cache_index = "hash"``, smg#2213): :mod:`.placement` (``select_worker_hash``
   ``:1526-1614``): the deepest boundary with a live eligible holder, least loaded, then the
   gate; else the min-load instance; the dispatch is recorded at every boundary that fits.
5. **Token tree** (:class:`~.approx_tree.ApproxTree`): match and insert in one pass
   (``select_worker_with_tokens`` ``:1747-1872``; @73da68c ``:986-1073``). Hit when the f32 match
   rate ``matched / input`` exceeds ``cache_threshold``: @f8daa88 pressure-select among the
   eligible tenants of the deepest matched node (``select_matched_candidate`` ``:1195-1243``:
   overlap decay, temperature or the least loaded with random ties, then the gate);
   @73da68c the node's cached tenant. Miss: the min-load instance. A hit whose tenants are all
   ineligible inserts nothing and goes to the first eligible instance.
6. **Periodic task** every ``eviction_interval_secs`` of simulated time (``:208-330``): the tree
   trimmed to ``max_tree_size`` (@f8daa88 the tree-wide budget, @73da68c per tenant), or in hash
   mode the placement sweep.

Random draws use the run's seeded generator. ``predicted_tokens``: the matched (or overlap)
tokens when the chosen instance holds the matched prefix, else -1.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from radixbench.cluster.routers.approx_tree import ApproxTree, Match
from radixbench.cluster.routers.base import SHED, ClusterView, RouteRequest
from radixbench.cluster.routers.block_index import BlockIndex
from radixbench.cluster.routers.cache_aware_options import CacheAwareOptions
from radixbench.cluster.routers.page_hash import engine_block_ids, prefix_keys
from radixbench.cluster.routers.placement import PlacementIndex
from radixbench.cluster.routers.smg_select import (
    Candidate,
    argmax_random_ties,
    f32,
    gated,
    overlap_decay,
    sample_by_temperature,
)

__all__ = ["CacheAware", "CacheAwareOptions"]


class CacheAware:
    """The policy (module docstring). ``stats``: decisions by branch; ``skip_processed``: the
    last decision was the first-eligible fallback, which SMG does not count as processed."""

    name = "cache-aware"
    needs_tokens = True
    needs_events = False
    Options = CacheAwareOptions

    def __init__(self, n: int, options: CacheAwareOptions, seed: int, page_size: int) -> None:
        o = self.opt = options
        self.current = o.revision != "73da68c"
        self.needs_events = o.kv_events
        self.tree = ApproxTree(o.page, count_once=self.current)
        self.index = BlockIndex(n) if o.kv_events else None
        self.engine_page = page_size
        self.placements = PlacementIndex(o.cache_ttl_secs) if o.cache_index == "hash" else None
        self.bounds = o.boundaries()
        self.rng = np.random.default_rng(seed)
        self.next_eviction = o.eviction_interval_secs
        self.next_poll = 0.0
        self.snapshot: tuple[list[float], list[int], list[int]] | None = None
        keys = ("imbalanced", "hit", "miss", "spill", "event", "fallback", "shed", "hash_hit")
        self.stats = dict.fromkeys(keys, 0)
        self.predicted_tokens = -1
        self.skip_processed = False

    # ------------------------------------------------------------------ signals
    def _tick(self, view: ClusterView) -> None:
        o, now = self.opt, view.now
        if o.eviction_interval_secs > 0:
            while now >= self.next_eviction:  # the periodic task's ticks since the last
                if self.placements is not None:
                    self.placements.sweep(self.next_eviction)
                elif self.current:
                    self.tree.evict_tree_by_size(o.max_tree_size)
                else:
                    self.tree.evict_tenants_by_size(o.max_tree_size)
                self.next_eviction += o.eviction_interval_secs
        if o.needs_loads and now >= self.next_poll:  # the load monitor's poll (smg#2182)
            n = view.n
            self.snapshot = (
                [view.kv_usage(i) for i in range(n)],
                [view.waiting(i) for i in range(n)],
                [view.waiting_tokens(i) for i in range(n)],
            )
            while self.next_poll <= now:
                self.next_poll += o.load_monitor_interval_secs

    def _vetoed(self, i: int) -> bool:
        o, snap = self.opt, self.snapshot
        if snap is None:
            return False
        w, u = o.worker_overload_waiting_requests, o.worker_overload_token_usage
        return (w > 0 and snap[1][i] >= w) or (u > 0 and snap[0][i] >= u)

    def _kv_pressure(self, elig: Sequence[int]) -> bool:
        o, snap = self.opt, self.snapshot
        if snap is None or not elig:
            return False
        usage = [snap[0][i] for i in elig]
        hi, lo = max(usage), min(usage)
        return hi > f32(o.overload_token_usage_threshold) or (
            hi - lo > f32(o.balance_token_usage_threshold)
        )

    def _count_spread(self, elig: Sequence[int], load: Sequence[int]) -> bool:
        o = self.opt
        lo, hi = min(load[i] for i in elig), max(load[i] for i in elig)
        rel = np.float32(o.balance_rel_threshold)
        return hi - lo > o.balance_abs_threshold and bool(np.float32(hi) > np.float32(lo) * rel)

    # ------------------------------------------------------------------ selection
    def _pick(self, cands: list[Candidate], blocks: int, page: int) -> int | None:
        """Decay, then temperature sampling or the argmax with random ties (smg#2117/#2096)."""
        o = self.opt
        backlog = None
        if o.overlap_decay > 0 and self.snapshot is not None:
            backlog = dict(enumerate(self.snapshot[2]))
        overlap_decay(cands, backlog, max(blocks, 1), page, o.overlap_decay)
        if o.selection_temperature > 0:
            return sample_by_temperature(cands, o.selection_temperature, self.rng)
        return argmax_random_ties(cands, self.rng)

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        self._tick(view)
        self.predicted_tokens, self.skip_processed = -1, False
        load, done = view.outstanding, view.processed
        elig = [i for i in view.eligible if not self._vetoed(i)] if self.current else view.eligible
        if not elig:
            self.stats["shed"] += 1
            return SHED
        least = min(elig, key=lambda i: (load[i], done[i], i))
        mean = sum(load[i] for i in elig) / len(elig)
        if self.placements is not None:
            return self._hash(req, view, elig, least, mean)
        keys = array("Q")
        keys.frombytes(prefix_keys(req.tokens, self.opt.page).tobytes())
        if self._kv_pressure(elig) or (not self.current and self._count_spread(elig, load)):
            self.stats["imbalanced"] += 1
            self.tree.insert(keys, least)
            return least
        if self.index is not None and self.index.size() > 0:
            return self._event(req, view, elig, least, mean)
        return self._tree(req, view, keys, elig, least, mean)

    def _event(
        self, req: RouteRequest, view: ClusterView, elig: list[int], least: int, mean: float
    ) -> int:
        assert self.index is not None
        ids = engine_block_ids(req.tokens, self.engine_page)
        held = self.index.prefix_blocks(ids)
        load = view.outstanding
        cands = [[i, float(held[i]), load[i]] for i in elig if held[i] > 0]
        if not cands:
            self.stats["miss"] += 1
            return least
        if self.current:
            best = self._pick(cands, len(ids), self.engine_page)
            assert best is not None
            chosen = gated(best, load[best], mean, self.opt.balance_abs_threshold,
                           self.opt.balance_rel_threshold, least)  # fmt: skip
        else:
            sizes = self.index.blocks
            key = max((c[1], -c[2], -sizes[int(c[0])]) for c in cands)
            chosen = [int(c[0]) for c in cands if (c[1], -c[2], -sizes[int(c[0])]) == key][-1]
        self.stats["event" if held[chosen] else "spill"] += 1
        self.predicted_tokens = held[chosen] * self.engine_page
        return chosen

    def _hash(
        self, req: RouteRequest, view: ClusterView, elig: list[int], least: int, mean: float
    ) -> int:
        pl, now = self.placements, view.now
        assert pl is not None
        keys = pl.heads(req.tokens, self.bounds) if len(req.tokens) else []
        chosen = least
        if keys and not self._kv_pressure(elig):
            load = view.outstanding
            eligible = set(elig)
            for key in reversed(keys):
                holder = pl.live_holder(key, now, eligible, load.__getitem__)
                if holder is not None:
                    o = self.opt
                    chosen = gated(holder, load[holder], mean, o.balance_abs_threshold,
                                   o.balance_rel_threshold, least)  # fmt: skip
                    self.stats["hash_hit" if chosen == holder else "spill"] += 1
                    break
            else:
                self.stats["miss"] += 1
        else:
            self.stats["imbalanced" if keys else "miss"] += 1
        if keys:
            pl.record(keys, chosen, now)
        return chosen

    def _tree(
        self,
        req: RouteRequest,
        view: ClusterView,
        keys: array,
        elig: list[int],
        least: int,
        mean: float,
    ) -> int:
        o, load = self.opt, view.outstanding
        n_in = len(req.tokens)
        picked: list[int | None] = [None]

        def select(m: Match) -> int | None:
            rate = np.float32(m.tokens) / np.float32(n_in) if n_in else np.float32(0.0)
            if rate > np.float32(o.cache_threshold):
                if self.current:
                    cands = [[i, 1.0, load[i]] for i in elig if i in m.tenants]
                    best = self._pick(cands, n_in // o.page, o.page) if cands else None
                    if best is not None:
                        best = gated(best, load[best], mean, o.balance_abs_threshold,
                                     o.balance_rel_threshold, least)  # fmt: skip
                else:
                    best = m.tenant if m.tenant in elig else None
                picked[0] = best
                if best is not None:
                    self.stats["hit" if best in m.tenants or best == m.tenant else "spill"] += 1
            else:
                self.stats["miss"] += 1
                if o.miss == "smallest-tree":
                    size = self.tree.tokens
                    picked[0] = min(elig, key=lambda i: (size.get(i, 0), i))
                else:
                    picked[0] = least
            return picked[0]

        m = self.tree.match_and_insert(keys, select)
        chosen = picked[0]
        if chosen is None:  # the matched tenants are ineligible: first eligible, tree untouched
            self.stats["fallback"] += 1
            self.skip_processed = True
            return elig[0]
        if m.tokens and (chosen in m.tenants or chosen == m.tenant):
            self.predicted_tokens = m.tokens
        return chosen

    def on_events(self, instance: int, events: Sequence[Any]) -> None:
        if self.index is not None:
            self.index.apply(instance, events)

    def on_finish(self, instance: int, rid: int) -> None:
        pass
