"""SGLang's served cache called directly, as sglang 0.5.23's scheduler calls it: the baseline
that ``bench served`` measures ``--impl sglang``'s recorded times against (its ``adapter``
case, :mod:`radixbench.bench.served_adapter`).

:class:`DirectServed` takes the ``UnifiedRadixCache`` a ``ServedSGLangCache`` built (for
radixbench's allocator shim and process state) and takes the adapter's wrappers off it
(``ServedTree.hook``'s instance attributes: the class's own methods again), then makes each call
the adapter makes, timing SGLang's call alone with ``perf_counter_ns`` (the process-state swap
and the key conversion stay outside). The adapter must not be used afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import torch

from radixbench.cache.interface import MatchResult
from radixbench.cache.key import RadixKey
from radixbench.cache.sglang.report import INNER_OPS
from radixbench.cache.sglang.shims import ServedReqProxy, release_kv_cache, write_back

__all__ = ["DirectServed"]


class DirectServed:
    """SGLang's cache of the ``ServedSGLangCache`` ``cache`` with the adapter's wrappers taken
    off, called alone; ``ns[op]``: each timed call's ns, in call order. Mutates ``cache.sgl``
    (its instance attributes) and, through its calls, the tree, the allocator and requests."""

    def __init__(self, cache: Any) -> None:
        self.a, self.sgl = cache, cache.sgl
        for name in (*INNER_OPS, "_evict_device_leaf"):
            self.sgl.__dict__.pop(name, None)  # back to the class's own methods
        self.ns: dict[str, list[int]] = {}
        self.allocator, self.req_to_token_pool = cache.allocator, cache.req_to_token_pool

    def _time(self, op: str, fn: Callable[..., Any], *args: Any) -> Any:
        with self.a._state:
            t0 = perf_counter_ns()
            r = fn(*args)
            self.ns.setdefault(op, []).append(perf_counter_ns() - t0)
        return r

    def _match(self, params: Any) -> Any:
        r = self.sgl.match_prefix(params)
        return r, self.sgl.path_device_indices(r.last_device_node)[: r.device_prefix_len]

    def match_prefix(self, key: RadixKey) -> MatchResult:
        """``match_prefix`` + ``path_device_indices`` (as ``prefix_device_indices`` reads
        them), timed as ``match_prefix``."""
        r, idx = self._time("match_prefix", self._match, self.a._Match(key=self.a._key(key)))
        return MatchResult(idx.to(torch.int64), r.last_device_node, int(r.device_prefix_len))

    def insert(self, key: RadixKey, value: Any) -> int:
        """``insert`` of the page-aligned key, ``prev_prefix_len = len(key)``."""
        k = self.a._key(key, copy=True).page_aligned(self.a.page_size)
        params = self.a._Insert(key=k, value=value[: len(k)], prev_prefix_len=len(k),
                                priority=0, inserted_len=0)  # fmt: skip
        return int(self._time("insert", self.sgl.insert, params).prefix_len)

    def evict(self, n: int) -> None:
        """``evict_for_alloc(EvictParams(num_tokens=n))``."""
        self._time("evict", self.sgl.evict_for_alloc, self.a._Evict(num_tokens=n))

    def inc_lock_ref(self, node: Any) -> None:
        """``inc_lock_ref``; its receipt is kept for the next ``dec_lock_ref``."""
        self.receipt = self._time("inc_lock_ref", self.sgl.inc_lock_ref, node).to_dec_params()

    def dec_lock_ref(self, node: Any) -> None:
        """``dec_lock_ref`` with the last receipt."""
        self._time("dec_lock_ref", self.sgl.dec_lock_ref, node, self.receipt)

    def lock(self, node: Any) -> Any:
        """``lock`` (untimed: the streams time it nowhere)."""
        with self.a._state:
            return self.sgl.lock(node)

    def _ckpt(self, proxy: Any, up_to: int) -> None:
        with self.a._alloc_shim.group():
            self.sgl.checkpoint(proxy, up_to=up_to)

    def checkpoint(self, req: Any, up_to: int) -> None:
        """``checkpoint(proxy, up_to=up_to)`` in one free group; the proxy's changes copied
        back onto ``req`` untimed."""
        proxy = ServedReqProxy(req, False)
        self._time("checkpoint", self._ckpt, proxy, up_to)
        write_back(proxy, req)

    def release(self, req: Any, owned: int, checkpoint: bool) -> None:
        """``shims.release_kv_cache`` with the final checkpoint and SGLang's ``unlock``."""
        proxy = ServedReqProxy(req, True)

        def final() -> None:
            self._ckpt(proxy, owned)
            write_back(proxy, req)

        pool, alloc = self.req_to_token_pool, self.allocator
        self._time("release", release_kv_cache, pool, alloc, req, owned, final, self.sgl.unlock)
