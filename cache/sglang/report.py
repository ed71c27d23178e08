"""What reports see of an SGLang implementation: its description and the timing of the calls
SGLang's cache makes on itself.

Both adapters (``SGLangCache`` for the classic ``RadixCache``, ``ServedSGLangCache`` for
``UnifiedRadixCache``) describe their load with :func:`impl_info`. Instrumented, the classic
adapter puts the timer around its own operations (``timing.time_standard_ops``), the served one
around SGLang's calls alone (:func:`core_calls`, :func:`timed_core_calls`: its key and result
conversions stay outside the row); both also time SGLang's own ``insert`` / ``match_prefix`` /
``inc_lock_ref`` / ``dec_lock_ref`` as SGLang's ``checkpoint`` and ``lock`` / ``unlock`` call
them on the instance (:func:`timed_inner_ops`), where radixbench's cache calls its own (timed)
methods: both implementations give one row per logical operation. The adapter's own methods
call SGLang's unwrapped methods, so ``match_prefix`` of the adapter delegating to SGLang's is
one call, recorded once; ``release`` runs the final checkpoint inside its row, as radixbench's
``release`` calls an untimed helper: one ``release`` row, the inserts inside it timed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from radixbench.cache.interface import ImplInfo, OpTimer, TreeStats
from radixbench.cache.sglang.shims import release_kv_cache, write_back

#: SGLang's methods that its ``checkpoint``, ``lock`` and ``unlock`` call on the cache itself.
INNER_OPS = ("insert", "match_prefix", "inc_lock_ref", "dec_lock_ref")


def impl_info(loaded: Any, tree_core: str = "", tree_core_reason: str = "") -> ImplInfo:
    """The report's description of a load (a ``Loaded``): label,
    spec, version, origin, class (``module.qualname``), the tree core and why it was chosen
    (served cache only), and a copy of ``files`` (sha256 by path)."""
    cls = loaded.cache_class
    return ImplInfo(
        label=loaded.label,
        spec=loaded.spec,
        version=loaded.version,
        origin=loaded.origin,
        cls=f"{cls.__module__}.{cls.__qualname__}",
        tree_core=tree_core,
        tree_core_reason=tree_core_reason,
        files=dict(loaded.files),
    )


def _params_len(params: Any, *_: Any) -> int:
    return len(params.key)


def _no_key(*_: Any) -> int:
    return 0


def timed_inner_ops(
    timer: OpTimer, raw: Mapping[str, Callable[..., Any]], stats: Callable[[], TreeStats]
) -> dict[str, Callable[..., Any]]:
    """``timer.timed`` wrappers of SGLang's unwrapped :data:`INNER_OPS` ``raw`` (op -> bound
    method), recording ``stats()`` before each call. Arguments and results are SGLang's: the
    key length is ``len(InsertParams.key)`` / ``len(MatchPrefixParams.key)`` (0 for the lock
    calls), the result ``InsertResult.prefix_len``, ``MatchResult.device_prefix_len`` or the
    lock result's ``delta`` (``None`` counts as 0). Mutates nothing; the caller installs them."""
    inner = {
        "insert": (_params_len, lambda r, *_: int(r.prefix_len)),
        "match_prefix": (_params_len, lambda r, *_: int(r.device_prefix_len)),
        "inc_lock_ref": (_no_key, lambda r, *_: int(r.delta or 0)),
        "dec_lock_ref": (_no_key, lambda r, *_: int(r.delta or 0)),
    }
    return {
        op: timer.timed(op, raw[op], stats, key_len, result)
        for op, (key_len, result) in inner.items()
    }


def copy_back(proxy: Any, req: Any) -> None:
    """What SGLang's checkpoint changed on the ``ServedReqProxy`` ``proxy``, onto ``req``
    (``shims.write_back``); a lock it replaced is marked released (the adapter's
    ``unlock`` refuses it)."""
    if req.lock is not None and req.lock is not proxy.lock:
        req.lock._radixbench_released = True
    write_back(proxy, req)


def core_calls(
    sgl: Any, raw: Mapping[str, Callable[..., Any]], shim: Any, pool: Any = None
) -> dict[str, Callable[..., Any]]:
    """SGLang's calls alone, as ``ServedSGLangCache`` makes them, by op: what a timer wraps,
    so that a row's ns are what sglang 0.5.23 executes for the operation (the adapter's key
    conversion, shape shadow and state swaps run around them, untimed). ``sgl``: the
    ``UnifiedRadixCache`` (or subclass); ``raw``: its unwrapped :data:`INNER_OPS`; ``shim``:
    its ``ServedAllocatorShim``. Each takes SGLang's arguments, then what the row records
    (ignored here):

    * ``match_prefix(MatchPrefixParams)`` -> ``(MatchResult, path_device_indices(last
      device node)[:device_prefix_len])`` (the indices as ``prefix_device_indices`` reads them);
    * ``insert(InsertParams, key_len)`` -> ``InsertResult``;
    * ``evict(EvictParams)`` -> ``evict_for_alloc``'s ``EvictResult``;
    * ``inc_lock_ref(node, evictable_before)``, ``dec_lock_ref(node, receipt,
      evictable_before)`` -> SGLang's results;
    * ``checkpoint(proxy, up_to)``: ``checkpoint(proxy, up_to=up_to)`` in one free group;
    * ``release(req, owned_len, proxy)``: ``shims.release_kv_cache`` on ``pool`` (the
      ``ReqToTokenPool``) and the allocator, with the final checkpoint on ``proxy`` (a
      ``ServedReqProxy`` of the finished ``req``; None: no checkpoint) and SGLang's
      ``unlock``."""
    match, ins, evict_for_alloc = raw["match_prefix"], raw["insert"], sgl.evict_for_alloc
    inc, dec, path = raw["inc_lock_ref"], raw["dec_lock_ref"], sgl.path_device_indices

    def match_prefix(params: Any) -> tuple[Any, Any]:
        r = match(params)
        return r, path(r.last_device_node)[: r.device_prefix_len]

    def insert(params: Any, key_len: int) -> Any:
        return ins(params)

    def inc_lock_ref(node: Any, before: int) -> Any:
        return inc(node)

    def dec_lock_ref(node: Any, receipt: Any, before: int) -> Any:
        return dec(node, receipt)

    def checkpoint(proxy: Any, up_to: int) -> None:
        with shim.group():
            sgl.checkpoint(proxy, up_to=up_to)

    def unlock(lock: Any) -> None:
        if getattr(lock, "_radixbench_released", False):
            raise RuntimeError("unlock: this lock was already released")
        sgl.unlock(lock)
        if lock is not None:
            lock._radixbench_released = True

    def release(req: Any, owned_len: int, proxy: Any) -> None:
        def final() -> None:
            checkpoint(proxy, owned_len)
            copy_back(proxy, req)

        release_kv_cache(pool, shim.allocator, req, owned_len, final if proxy else None, unlock)

    return {"match_prefix": match_prefix, "insert": insert, "evict": evict_for_alloc,
            "inc_lock_ref": inc_lock_ref, "dec_lock_ref": dec_lock_ref,
            "checkpoint": checkpoint, "release": release}  # fmt: skip


def timed_core_calls(
    timer: OpTimer,
    calls: Mapping[str, Callable[..., Any]],
    stats: Callable[[], TreeStats],
    evictable_size: Callable[[], int],
) -> dict[str, Callable[..., Any]]:
    """:func:`core_calls` ``calls`` wrapped by ``timer`` with radixbench's row semantics
    (``timing.time_standard_ops``): key length = the tokens of the key (``insert``: before
    page alignment), asked tokens (``evict``), ``up_to`` (``checkpoint``), 0 (locks);
    result = matched / already-cached / evicted tokens, the change of ``evictable_size()``
    (locks), 0 (``checkpoint``)."""
    t = timer.timed
    return {
        "match_prefix": t("match_prefix", calls["match_prefix"], stats, _params_len,
                          lambda r, *_: int(r[0].device_prefix_len)),
        "insert": t("insert", calls["insert"], stats, lambda p, n: n,
                    lambda r, *_: int(r.prefix_len)),
        "evict": t("evict", calls["evict"], stats, lambda p: int(p.num_tokens),
                   lambda r, *_: int(r.num_tokens_evicted)),
        "inc_lock_ref": t("inc_lock_ref", calls["inc_lock_ref"], stats, _no_key,
                          lambda r, node, before: int(evictable_size() - before)),
        "dec_lock_ref": t("dec_lock_ref", calls["dec_lock_ref"], stats, _no_key,
                          lambda r, node, receipt, before: int(evictable_size() - before)),
        "checkpoint": t("checkpoint", calls["checkpoint"], stats, lambda p, up_to: up_to,
                        lambda *_: 0),
        "release": t("release", calls["release"], stats, lambda r, owned, p: owned,
                     lambda *_: 0),
    }  # fmt: skip
