"""What reports see of an SGLang implementation: its description and the timing of the calls
SGLang's cache makes on itself.

Both adapters (``SGLangCache`` for the classic ``RadixCache``, ``ServedSGLangCache`` for
``UnifiedRadixCache``) describe their load with :func:`impl_info`. Instrumented, an adapter
puts the timer around its own operations (``timing.time_standard_ops``) and around SGLang's
own ``insert`` / ``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref`` as SGLang's
``checkpoint`` and ``lock`` / ``unlock`` call them on the instance (:func:`timed_inner_ops`),
where radixbench's cache calls its own (timed) methods: both implementations give one row per
logical operation. The adapter's own methods call SGLang's unwrapped methods, so ``match_prefix``
of the adapter delegating to SGLang's is one call, recorded once; the adapter's ``release`` runs
the untimed checkpoint, as radixbench's ``release`` calls an untimed helper: one ``release``
row, the inserts inside it timed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from radixbench.cache.interface import ImplInfo, OpTimer, TreeStats

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
