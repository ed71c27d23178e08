"""Timing of every cache operation and batch build with ``perf_counter_ns``.

``OpRecorder`` keeps columnar lists (cheap appends, one DataFrame at the end, schema in
docs/CONTRACTS.md). ``instrument(cache, recorder, clock)`` wraps a ``RadixCache`` instance's
public operations in place, so calls the cache makes to itself (``checkpoint`` / ``release`` ->
``insert`` / ``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref``) are timed too. The recorded time is wall time of the call alone;
tree statistics are read before the timer starts. In the isolated clock mode nothing measured
is added to simulated time; in the coupled mode the scheduler takes ``take_charge_ns()`` (the
top-level calls only: ``insert`` inside ``checkpoint`` is not counted twice) and adds it
to the step's duration.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import pandas as pd

from radixbench.cache.radix_cache import RadixCache

_COLUMNS = (
    "op",
    "ns",
    "key_len",
    "result",
    "tree_nodes",
    "tree_tokens",
    "evictable_leaves",
    "sim_time_s",
)


class OpRecorder:
    """Append-only record of timed operations (see docs/CONTRACTS.md, per-op table)."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
        self.depth = 0  # >0 while inside a timed call (nested calls are not charged again)
        self.charge_ns = 0  # top-level timed ns since the scheduler last took them

    def take_charge_ns(self) -> int:
        """Measured ns of top-level operations since the last call (and reset): what the
        ``coupled`` clock adds to the step's simulated time."""
        ns, self.charge_ns = self.charge_ns, 0
        return ns

    def add(
        self,
        op: str,
        ns: int,
        key_len: int,
        result: int,
        tree_nodes: int,
        tree_tokens: int,
        evictable_leaves: int,
        sim_time_s: float,
    ) -> None:
        if self.depth == 0:
            self.charge_ns += ns
        r = self.rows
        r["op"].append(op)
        r["ns"].append(ns)
        r["key_len"].append(key_len)
        r["result"].append(result)
        r["tree_nodes"].append(tree_nodes)
        r["tree_tokens"].append(tree_tokens)
        r["evictable_leaves"].append(evictable_leaves)
        r["sim_time_s"].append(sim_time_s)

    def __len__(self) -> int:
        return len(self.rows["op"])

    def frame(self, variant: str) -> pd.DataFrame:
        """The records as a DataFrame with a ``variant`` column first."""
        df = pd.DataFrame({c: self.rows[c] for c in _COLUMNS})
        for c in ("ns", "key_len", "result", "tree_nodes", "tree_tokens", "evictable_leaves"):
            df[c] = df[c].astype("int64")
        df["sim_time_s"] = df["sim_time_s"].astype("float64")
        df.insert(0, "variant", variant)
        return df


def instrument(cache: RadixCache, rec: OpRecorder, clock: Callable[[], float]) -> RadixCache:
    """Wrap ``cache``'s match_prefix / insert / evict / inc_lock_ref / dec_lock_ref /
    checkpoint / release so each call is timed and recorded; returns the same (mutated) cache.

    ``key_len`` is the key's tokens (evict: tokens asked for; lock ops: tokens on the path is not
    computed, 0); ``result`` is the matched / already-cached / evicted tokens or the size delta.
    """
    cls = type(cache)

    def timed(
        op: str, key_len: Callable[..., int], result: Callable[[Any], int]
    ) -> Callable[..., Any]:
        """``cls.<op>`` timed alone: statistics, key length and result are read outside the
        timer; ``rec.depth`` marks nesting (coupled clock counts top-level calls only)."""
        method = getattr(cls, op)

        def call(*args: Any) -> Any:
            n, t, lv = cache.num_nodes, cache.total_size(), cache.num_evictable_leaves
            rec.depth += 1
            t0 = perf_counter_ns()
            res = method(cache, *args)
            ns = perf_counter_ns() - t0
            rec.depth -= 1
            rec.add(op, ns, key_len(*args), result(res), n, t, lv, clock())
            return res

        return call

    def first_len(key: Any, *_: Any) -> int:
        return len(key)

    def no_key(*_: Any) -> int:
        return 0

    cache.match_prefix = timed("match_prefix", first_len, lambda r: r.prefix_len)
    cache.insert = timed("insert", first_len, int)
    cache.evict = timed("evict", lambda k: k, lambda r: r.num_evicted)
    cache.inc_lock_ref = timed("inc_lock_ref", no_key, int)
    cache.dec_lock_ref = timed("dec_lock_ref", no_key, int)
    cache.checkpoint = timed("checkpoint", lambda r, up_to: up_to, lambda _: 0)
    cache.release = timed("release", lambda r, owned, ckpt: owned, lambda _: 0)
    return cache
