"""Waiting-queue orders, registered by name: ``fcfs``, ``lpm``, ``dfs-weight``, ``random``.

Modeled on ``SchedulePolicy.calc_priority`` of sglang 0.5.23
(``sglang/srt/managers/schedule_policy.py``): the cache-aware policies (``lpm``, ``dfs-weight``)
match every waiting request's prefix first (``_compute_prefix_matches``; the matches are real,
timed cache operations that touch access times and may split a node, as in 0.5.23) and fall back
to FCFS when more than ``fallback_queue_len`` requests wait (0.5.23:
``WAITING_QUEUE_PREFIX_MATCH_MAX = 128``), because matching them all would cost more than it
gains. Differences from 0.5.23 that stay (docs/SGLANG-FIDELITY.md): the match key is the
request's tokens minus the last, as at admission (0.5.23 matches all of them here and caps the
sort key, ``num_matched_prefix_tokens``, at ``len - 1``); ``dfs-weight`` falls back too (0.5.23:
only ``lpm`` and ``hrrn``); no in-batch prefix-caching deprioritization (0.5.23's
``waiting_queue_radix_tree``); the order is recomputed from the arrival order each time (0.5.23
sorts the waiting queue in place, so ties keep the previous pass's order); no periodic
``_touch_waiting_prefixes`` under the cache-agnostic policies; ``random`` is seeded.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from radixbench.cache.interface import NodeHandle, PrefixCache
from radixbench.cache.key import RadixKey
from radixbench.sim.request import Req

SCHED_POLICIES = ("fcfs", "lpm", "dfs-weight", "random")


def _matches(cache: PrefixCache, queue: list[Req]) -> list[tuple[int, NodeHandle]]:
    out = []
    for r in queue:
        ids = r.full_ids()
        m = cache.match_prefix(RadixKey(ids[: len(ids) - 1], r.extra_key))
        out.append((m.prefix_len, m.last_node))
    return out


class SchedPolicy:
    """Orders the waiting queue before each admission attempt. ``seed`` drives ``random``."""

    def __init__(self, name: str, cache: PrefixCache, seed: int, fallback_queue_len: int = 128):
        if name not in SCHED_POLICIES:
            raise ValueError(f"unknown sched policy {name!r}; known: {', '.join(SCHED_POLICIES)}")
        self.name, self.cache, self.fallback = name, cache, fallback_queue_len
        self.rng = random.Random(seed)
        self._order: dict[str, Callable[[list[Req]], list[Req]]] = {
            "fcfs": lambda q: q,
            "lpm": self._lpm,
            "dfs-weight": self._dfs_weight,
            "random": self._random,
        }

    def order(self, queue: list[Req]) -> list[Req]:
        """The queue in admission order (a new list or ``queue`` itself, not mutated)."""
        if self.name in ("lpm", "dfs-weight") and len(queue) > self.fallback:
            return queue
        return self._order[self.name](queue)

    def _random(self, queue: list[Req]) -> list[Req]:
        q = list(queue)
        self.rng.shuffle(q)
        return q

    def _lpm(self, queue: list[Req]) -> list[Req]:
        """Longest prefix match first; ties keep arrival order (a stable sort, as 0.5.23's
        ``_sort_by_longest_prefix``, which sorts the queue as the previous pass left it)."""
        m = _matches(self.cache, queue)
        idx = sorted(range(len(queue)), key=lambda i: -m[i][0])
        return [queue[i] for i in idx]

    def _dfs_weight(self, queue: list[Req]) -> list[Req]:
        """Walk the tree depth first, heavier subtrees (more waiting requests ending in them)
        first, emitting each node's requests after its children (sglang 0.5.23
        ``_dfs_weight_order`` in ``sglang/srt/mem_cache/base_prefix_cache.py``). The tree's
        shape comes from ``PrefixCache.walk`` (node ids, children in the tree's order)."""
        cache = self.cache
        m = _matches(cache, queue)
        at: dict[int, list[Req]] = {}
        weight: dict[int, int] = {}
        for r, (_, node) in zip(queue, m):
            nid = cache.node_id(node)
            at.setdefault(nid, []).append(r)
            weight[nid] = weight.get(nid, 0) + 1
        root = 0
        children: dict[int, list[int]] = {}
        order: list[tuple[int, int]] = list(cache.walk())  # parents before children
        for nid, parent in order:
            children.setdefault(parent, []).append(nid)
        for nid, parent in reversed(order):  # post-order accumulation of subtree weights
            weight[parent] = weight.get(parent, 0) + weight.get(nid, 0)
        out: list[Req] = []
        # Explicit DFS: (node, expanded?) — children by weight descending, then the node's reqs.
        work: list[tuple[int, bool]] = [(root, False)]
        while work:
            nid, expanded = work.pop()
            if expanded:
                out.extend(at.get(nid, ()))
                continue
            work.append((nid, True))
            kids = [c for c in children.get(nid, ()) if weight.get(c, 0) > 0]
            kids.sort(key=lambda c: -weight[c])
            work.extend((c, False) for c in reversed(kids))
        return out
