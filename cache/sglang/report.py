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
from functools import partial
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
    timer: OpTimer,
    raw: Mapping[str, Callable[..., Any]],
    stats: Callable[[], TreeStats],
    feed: Callable[[str], Callable[..., None]] | None = None,
) -> dict[str, Callable[..., Any]]:
    """``timer.timed`` wrappers of SGLang's unwrapped :data:`INNER_OPS` ``raw`` (op -> bound
    method), recording ``stats()`` before each call. Arguments and results are SGLang's: the
    key length is ``len(InsertParams.key)`` / ``len(MatchPrefixParams.key)`` (0 for the lock
    calls), the result ``InsertResult.prefix_len``, ``MatchResult.device_prefix_len`` or the
    lock result's ``delta`` (``None`` counts as 0). ``feed(op)``: a ``(result, *args)``
    callable run with the result read (the served cache's shape shadow: outside the timed
    ns, as the stats read is). Mutates nothing; the caller installs them."""
    inner = {
        "insert": (_params_len, lambda r, *_: int(r.prefix_len)),
        "match_prefix": (_params_len, lambda r, *_: int(r.device_prefix_len)),
        "inc_lock_ref": (_no_key, lambda r, *_: int(r.delta or 0)),
        "dec_lock_ref": (_no_key, lambda r, *_: int(r.delta or 0)),
    }
    return {
        op: timer.timed(op, raw[op], stats, key_len, _fed(result, feed(op)) if feed else result)
        for op, (key_len, result) in inner.items()
    }


def _fed(result: Callable[..., int], feed: Callable[..., None]) -> Callable[..., int]:
    def read(r: Any, *args: Any) -> int:
        feed(r, *args)
        return result(r, *args)

    return read


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
    conversion, shape shadow, state swaps and checks run around them, untimed). ``sgl``: the
    ``UnifiedRadixCache`` (or subclass); ``raw``: its unwrapped :data:`INNER_OPS`; ``shim``:
    its ``ServedAllocatorShim``. Each takes SGLang's arguments only; no frame of radixbench's
    runs around SGLang's method but where sglang's own caller has one too (``DirectServed``):

    * ``match_prefix(MatchPrefixParams)`` -> ``(MatchResult, path_device_indices(last
      device node)[:device_prefix_len])`` (the indices as ``prefix_device_indices`` reads them);
    * ``insert(InsertParams)``, ``evict(EvictParams)`` (``evict_for_alloc``),
      ``inc_lock_ref(node)``, ``dec_lock_ref(node, receipt)``: SGLang's bound methods;
    * ``checkpoint(proxy, up_to)``: ``checkpoint(proxy, up_to=up_to)`` in one free group;
    * ``release(req, owned_len, final, unlock)``: ``shims.release_kv_cache`` on ``pool`` (the
      ``ReqToTokenPool``) and the allocator (``final``: the request's final checkpoint or
      None, ``unlock``: SGLang's ``unlock``)."""
    match, path = raw["match_prefix"], sgl.path_device_indices

    def match_prefix(params: Any) -> tuple[Any, Any]:
        r = match(params)
        return r, path(r.last_device_node)[: r.device_prefix_len]

    def checkpoint(proxy: Any, up_to: int) -> None:
        with shim.group():
            sgl.checkpoint(proxy, up_to=up_to)

    return {"match_prefix": match_prefix, "insert": raw["insert"], "evict": sgl.evict_for_alloc,
            "inc_lock_ref": raw["inc_lock_ref"], "dec_lock_ref": raw["dec_lock_ref"],
            "checkpoint": checkpoint,
            "release": partial(release_kv_cache, pool, shim.allocator)}  # fmt: skip


def timed_core_calls(
    timer: OpTimer,
    calls: Mapping[str, Callable[..., Any]],
    stats: Callable[[], TreeStats],
    evictable_size: Callable[[], int],
    arg: list[int],
) -> dict[str, Callable[..., Any]]:
    """:func:`core_calls` ``calls`` wrapped by ``timer`` with radixbench's row semantics
    (``timing.time_standard_ops``): key length = the tokens of the key (``insert``: before
    page alignment, ``arg[0]``), asked tokens (``evict``), ``up_to`` (``checkpoint``),
    ``owned_len`` (``release``), 0 (locks); result = matched / already-cached / evicted
    tokens, the change of ``evictable_size()`` from ``arg[0]`` (locks), 0 (``checkpoint``,
    ``release``). ``arg``: set by the caller before an ``insert`` or a lock call (a side
    channel, so that the timed callable is SGLang's own method)."""
    t = timer.timed

    def lock_delta(*_: Any) -> int:
        return int(evictable_size() - arg[0])

    return {
        "match_prefix": t("match_prefix", calls["match_prefix"], stats, _params_len,
                          lambda r, *_: int(r[0].device_prefix_len)),
        "insert": t("insert", calls["insert"], stats, lambda p: arg[0],
                    lambda r, *_: int(r.prefix_len)),
        "evict": t("evict", calls["evict"], stats, lambda p: int(p.num_tokens),
                   lambda r, *_: int(r.num_tokens_evicted)),
        "inc_lock_ref": t("inc_lock_ref", calls["inc_lock_ref"], stats, _no_key, lock_delta),
        "dec_lock_ref": t("dec_lock_ref", calls["dec_lock_ref"], stats, _no_key, lock_delta),
        "checkpoint": t("checkpoint", calls["checkpoint"], stats, lambda p, up_to: up_to,
                        lambda *_: 0),
        "release": t("release", calls["release"], stats, lambda r, owned, *_: owned,
                     lambda *_: 0),
    }  # fmt: skip
