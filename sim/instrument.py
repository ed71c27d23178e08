"""Timing of every cache operation and batch build with ``perf_counter_ns``.

``OpRecorder`` keeps the rows in flat columnar buffers (``sim.records.RecordLog``: two
array appends per op, one DataFrame at the end, schema in docs/CONTRACTS.md).
``instrument(cache, recorder, clock)`` wraps a ``RadixCache`` instance's public operations in
place, so calls the cache makes to itself (``checkpoint`` / ``release`` -> ``insert`` /
``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref``) are timed too. The
recorded time is wall time of the call alone; tree statistics are read before the timer
starts. In the isolated clock mode nothing measured is added to simulated time; in the coupled
mode the scheduler takes ``take_charge_ns()`` (the top-level calls only: ``insert`` inside
``checkpoint`` is not counted twice) and adds it to the step's duration.

An ``SGLangCache`` (``radixbench.cache.sglang_adapter``) is instrumented the same way, and so are
the ``insert`` / ``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref`` of the SGLang cache
inside it: SGLang's own ``checkpoint`` and ``lock`` / ``unlock`` call those directly, bypassing
the adapter, where radixbench's cache calls its own (instrumented) methods. They are recorded
under the same op names unless the adapter's method of the same name is the caller (the
adapter's ``match_prefix`` delegating to SGLang's is one call, recorded once), so both
implementations give one row per logical operation.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

from radixbench.cache.radix_cache import RadixCache
from radixbench.cache.sglang_adapter import SGLangCache
from radixbench.sim.records import RecordLog

#: The per-op table's columns and dtypes, in record order (docs/CONTRACTS.md).
_SCHEMA = (
    ("op", "str"),
    ("ns", "int64"),
    ("key_len", "int64"),
    ("result", "int64"),
    ("tree_nodes", "int64"),
    ("tree_tokens", "int64"),
    ("evictable_leaves", "int64"),
    ("sim_time_s", "float64"),
)


class OpRecorder(RecordLog):
    """Append-only record of timed operations (see docs/CONTRACTS.md, per-op table), columnar
    (:class:`RecordLog`): per op one ``ints.extend`` of ``(op code, ns, key_len, result,
    tree_nodes, tree_tokens, evictable_leaves)`` and one ``floats.append(sim_time_s)``."""

    def __init__(self) -> None:
        super().__init__(_SCHEMA)
        self.depth = 0  # >0 while inside a timed call (nested calls are not charged again)
        self.stack: list[str] = []  # ops of the timed calls in progress, innermost last
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
        """Record one operation (charged to the coupled clock unless nested in a timed one)."""
        if self.depth == 0:
            self.charge_ns += ns
        code = self.code(op)
        self.floats.append(sim_time_s)
        self.ints.extend((code, ns, key_len, result, tree_nodes, tree_tokens, evictable_leaves))


def instrument(cache: RadixCache, rec: OpRecorder, clock: Callable[[], float]) -> RadixCache:
    """Wrap ``cache``'s match_prefix / insert / evict / inc_lock_ref / dec_lock_ref /
    checkpoint / release so each call is timed and recorded; returns the same (mutated) cache.

    ``key_len`` is the key's tokens (evict: tokens asked for; lock ops: tokens on the path is not
    computed, 0); ``result`` is the matched / already-cached / evicted tokens or the size delta.
    """
    cls = type(cache)
    # ``rec.stack`` (ops in progress) is only read by the SGLang wrappers below.
    track_stack = isinstance(cache, SGLangCache)

    def timed(
        op: str, key_len: Callable[..., int], result: Callable[[Any], int]
    ) -> Callable[..., Any]:
        """``cls.<op>`` timed alone: statistics, key length and result are read outside the
        timer; ``rec.depth`` marks nesting (coupled clock counts top-level calls only)."""
        method = getattr(cls, op)
        code = rec.code(op)
        ints_extend, floats_append = rec.ints.extend, rec.floats.append
        total_size = cache.total_size
        if not track_stack:  # radixbench's RadixCache: its size counters read directly

            def fast(*args: Any) -> Any:
                n, lv = cache.num_nodes, cache.num_evictable_leaves
                t = cache.evictable_size_ + cache.protected_size_  # total_size()
                rec.depth += 1
                t0 = perf_counter_ns()
                try:
                    res = method(cache, *args)
                finally:
                    ns = perf_counter_ns() - t0
                    rec.depth -= 1
                if not rec.depth:
                    rec.charge_ns += ns
                floats_append(clock())
                ints_extend((code, ns, key_len(*args), result(res), n, t, lv))
                return res

            return fast

        def call(*args: Any) -> Any:
            n, t, lv = cache.num_nodes, total_size(), cache.num_evictable_leaves
            rec.depth += 1
            rec.stack.append(op)
            t0 = perf_counter_ns()
            try:
                res = method(cache, *args)
            finally:
                ns = perf_counter_ns() - t0
                rec.stack.pop()
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
    if isinstance(cache, SGLangCache):
        _instrument_sglang_inner(cache, rec, clock)
    else:
        _time_evict_free(cache, rec)
    return cache


def _time_evict_free(cache: RadixCache, rec: OpRecorder) -> None:
    """After every ``evict`` row, record an ``evict_kv_free`` row: the ns spent in the KV
    allocator's ``free`` (``TokenToKVPoolAllocator.free``, one call per evicted leaf, as
    SGLang's ``_delete_leaf``) inside that evict call, so the reports can give the evictor's
    own time (``evict`` ns minus ``evict_kv_free`` ns) apart from the KV free. Its other
    columns repeat the evict row's; it is part of the evict's ns already, so never charged to
    the coupled clock again. Wraps ``cache.allocator.free`` and ``cache.evict`` on the
    instances (a ``free`` outside an evict is not timed)."""
    alloc = cache.allocator
    free = alloc.free
    timed_evict = cache.evict
    state = [False, 0]  # inside an evict; free ns summed in it
    kv_free = rec.code("evict_kv_free")

    def timed_free(indices: Any) -> Any:
        if not state[0]:
            return free(indices)
        t0 = perf_counter_ns()
        try:
            return free(indices)
        finally:
            state[1] += perf_counter_ns() - t0

    def evict(num_tokens: int) -> Any:
        state[0], state[1] = True, 0
        try:
            res = timed_evict(num_tokens)
        finally:
            state[0] = False
        ints, floats = rec.last_row()  # the evict row ``timed`` just appended
        ints[0], ints[1] = kv_free, state[1]
        rec.ints.extend(ints)
        rec.floats.extend(floats)
        return res

    alloc.free = timed_free
    cache.evict = evict


def _instrument_sglang_inner(
    cache: SGLangCache, rec: OpRecorder, clock: Callable[[], float]
) -> None:
    """Wrap ``cache.sgl``'s (SGLang's own cache object) ``insert`` / ``match_prefix`` /
    ``inc_lock_ref`` / ``dec_lock_ref`` on the instance (see the module docstring). Their
    arguments and results are SGLang's: ``InsertParams`` / ``MatchPrefixParams`` (``.key``),
    ``InsertResult.prefix_len``, ``MatchResult.device_prefix_len``, ``...LockRefResult.delta``.
    Tree statistics are read from the adapter, live: inside its ``checkpoint`` (the only
    adapter call that makes SGLang call these while creating nodes) the adapter's
    ``num_nodes`` is only brought up to date on return, so the ids SGLang handed out since
    (``TreeNode.counter`` past the adapter's ``_next_id``) are added. The adapter's ``release``
    calls its own ``checkpoint`` where radixbench's calls an untimed helper: that inner call is
    left unrecorded too (one ``release`` row).
    """
    sgl = cache.sgl
    timed_checkpoint = cache.checkpoint

    def checkpoint(req: Any, up_to: int) -> None:
        if not (rec.stack and rec.stack[-1] == "release"):
            return timed_checkpoint(req, up_to)
        rec.stack.append("checkpoint")  # not recorded, but marks the window for nodes()
        try:
            return SGLangCache.checkpoint(cache, req, up_to)
        finally:
            rec.stack.pop()

    cache.checkpoint = checkpoint

    def nodes() -> int:
        if "checkpoint" in rec.stack:  # inside the adapter's _begin/_end window
            return cache.num_nodes + cache._node_cls.counter - cache._next_id
        return cache.num_nodes

    def wrap(op: str, key_len: Callable[[Any], int], result: Callable[[Any], int]) -> None:
        method = getattr(sgl, op)  # bound to sgl: instance attributes shadow the class's

        def call(arg: Any, *rest: Any, **kw: Any) -> Any:
            if rec.stack and rec.stack[-1] == op:
                return method(arg, *rest, **kw)  # the adapter's `op` delegating: recorded by it
            n, t, lv = nodes(), cache.total_size(), cache.num_evictable_leaves
            rec.depth += 1
            rec.stack.append(op)
            t0 = perf_counter_ns()
            try:
                res = method(arg, *rest, **kw)
            finally:
                ns = perf_counter_ns() - t0
                rec.stack.pop()
                rec.depth -= 1
            rec.add(op, ns, key_len(arg), result(res), n, t, lv, clock())
            return res

        setattr(sgl, op, call)

    def params_len(params: Any) -> int:
        return len(params.key)

    def no_key(_: Any) -> int:
        return 0

    wrap("insert", params_len, lambda r: int(r.prefix_len))
    wrap("match_prefix", params_len, lambda r: int(r.device_prefix_len))
    wrap("inc_lock_ref", no_key, lambda r: int(r.delta))
    wrap("dec_lock_ref", no_key, lambda r: int(r.delta))
