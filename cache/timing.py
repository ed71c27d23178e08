"""The usual ``PrefixCache.instrument``: one timing body for every implementation.

:func:`time_standard_ops` wraps a cache's standard operations with an ``OpTimer``
(``radixbench.sim.instrument.OpRecorder``), so that every implementation records the same op
names with the same ``key_len`` / ``result`` columns; an implementation adds the rows only it
knows (SGLang's calls on itself, ``radixbench.cache.sglang.report``; HiCache's ``evict_host`` /
``load_back``).
"""

from __future__ import annotations

from typing import Any

from radixbench.cache.interface import OpTimer

__all__ = ["time_standard_ops"]


def _key_len(key: Any, *_: Any) -> int:
    return len(key)


def _no_key(*_: Any) -> int:
    return 0


def _asked(num_tokens: int) -> int:
    return num_tokens


def time_standard_ops(cache: Any, timer: OpTimer, *, kv_free_in_evict: bool = False) -> None:
    """The usual ``PrefixCache.instrument``: wrap the instance's ``match_prefix``, ``insert``,
    ``evict``, ``inc_lock_ref``, ``dec_lock_ref``, ``checkpoint`` and ``release`` with
    ``timer`` (stats from ``cache.tree_stats``). Recorded ``key_len``: the key's tokens
    (``evict``: tokens asked for; ``checkpoint``: ``up_to``; ``release``: ``owned_len``; lock
    ops: 0); ``result``: matched / already-cached / evicted tokens, the size delta of a lock
    op, 0 for ``checkpoint`` / ``release``. ``kv_free_in_evict``: also record after each
    ``evict`` an ``evict_kv_free`` row timing ``cache.allocator.free`` inside it (the
    allocator's ``free`` is wrapped on the instance). Mutates ``cache`` (and its allocator)."""
    stats = cache.tree_stats
    t = timer.timed
    cache.match_prefix = t(
        "match_prefix", cache.match_prefix, stats, _key_len, lambda r, *_: r.prefix_len
    )
    cache.insert = t("insert", cache.insert, stats, _key_len, lambda r, *_: r)
    if kv_free_in_evict:
        evict, free = timer.timed_with_inner(
            "evict",
            cache.evict,
            stats,
            _asked,
            lambda r, *_: r.num_evicted,
            "evict_kv_free",
            cache.allocator.free,
        )
        cache.evict, cache.allocator.free = evict, free
    else:
        cache.evict = t("evict", cache.evict, stats, _asked, lambda r, *_: r.num_evicted)
    cache.inc_lock_ref = t("inc_lock_ref", cache.inc_lock_ref, stats, _no_key, lambda r, *_: r)
    cache.dec_lock_ref = t("dec_lock_ref", cache.dec_lock_ref, stats, _no_key, lambda r, *_: r)
    cache.checkpoint = t(
        "checkpoint", cache.checkpoint, stats, lambda r, up_to: up_to, lambda *_: 0
    )
    cache.release = t("release", cache.release, stats, lambda r, owned, ckpt: owned, lambda *_: 0)
