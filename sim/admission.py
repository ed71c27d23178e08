"""Admission and retraction of the scheduler (``sim.scheduler``): which waiting requests the
next extend step takes, and which running requests a decode step that does not fit sends back.

Functions of the :class:`~radixbench.sim.scheduler.Scheduler` whose state they read and
mutate (its waiting queue, running batch, chunked request, pool rows, ``new_token_ratio``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from radixbench.sim.adder import CONTINUE, NO_TOKEN, PrefillAdder
from radixbench.sim.request import Req

if TYPE_CHECKING:
    from radixbench.sim.scheduler import Scheduler


def get_new_batch_prefill(s: Scheduler) -> list[Req]:
    """sglang 0.5.23 ``get_new_batch_prefill``: the extend batch (maybe empty)."""
    cfg = s.cfg
    if s.chunked_req is None and (not s.waiting or not s.admission_dirty):
        return []
    io = s.io
    adder = PrefillAdder(cfg, s.cache, s.running, s.new_token_ratio, s.arr.remaining(), io)
    if s.chunked_req is not None:
        s.chunked_req = adder.add_chunked_req(s.chunked_req)
        if not adder.has_budget():
            # Deviation from 0.5.23, for speed: its calc_priority matches the whole queue
            # under lpm / dfs-weight before the chunked request is added, and only then
            # does budget_state() stop the pass; the sole effect would be LRU touches.
            return adder.can_run
    cap = min(s.capacity, cfg.max_context_len_tokens)
    # FCFS takes the head of the queue in place, unless HiCache may hold some back
    fcfs = s.policy.name == "fcfs" and io is None
    # FCFS takes from the head of the deque in place; other orders work on a copy.
    queue: Any = s.waiting if fcfs else s.policy.order(list(s.waiting))
    admitted: list[Req] = []
    for req in queue:
        if len(s.running) + len(adder.can_run) >= cfg.max_running:
            s.admission_dirty = False
            break
        if req.retractions == 0 and req.input_len + req.output_len >= cap:
            admitted.append(req)
            s._reject(req)
            continue
        if io is not None and not io.admissible(req):
            continue  # its prefetch is not done: skipped this pass (check_prefetch_progress)
        res = adder.add_one_req(req)
        if res != CONTINUE:
            if res == NO_TOKEN:
                s.admission_dirty = False
            if adder.can_run and adder.can_run[-1] is req:
                admitted.append(req)
            break
        admitted.append(req)
    if admitted:
        if fcfs:  # the admitted (and rejected) requests are the head of the queue
            for _ in admitted:
                s.waiting.popleft()
        else:
            taken = {id(r) for r in admitted}
            s.waiting = deque(r for r in s.waiting if id(r) not in taken)
    if adder.new_chunked is not None:
        s.chunked_req = adder.new_chunked
    batch = adder.can_run
    for r in batch:
        if r.req_pool_idx < 0:
            row = s.pool.alloc()
            assert row is not None  # rows == max_running
            r.req_pool_idx = row
        r.status = "running"
    if not batch and io is None:
        s.admission_dirty = False
    return batch


def retract_decode(s: Scheduler) -> None:
    """sglang 0.5.23 ``ScheduleBatch.retract_decode`` (default ``retraction_policy``):
    retract until the rest can decode. Where the last request still cannot, 0.5.23 aborts
    it; here that raises ``RuntimeError``."""
    s.arr.sync()
    running = list(s.running)
    order = sorted(
        range(len(running)),
        key=lambda i: (len(running[i].output_ids), -running[i].input_len),
        reverse=True,
    )
    retracted: list[Req] = []
    first = True
    while first or not s.slots.decode_fits([running[i] for i in order]):
        if len(order) == 1:
            raise RuntimeError("decode out of KV slots with one request left")
        first = False
        req = running[order.pop()]
        retracted.append(req)
        # 0.5.23 release_req: release_kv_cache(checkpoint=False), then evict for the rest
        s.cache.release(req, req.seq_len, False)
        s.slots.evict_if_needed(len(order) * s.cfg.retract_decode_steps)
        req.reset_for_retract()
    s.arr.reset([running[i] for i in order])
    decoded = sum(len(r.output_ids) for r in s.running)
    max_new = sum(r.output_len for r in s.running)
    steps = s.cfg.retract_decode_steps
    s.new_token_ratio = min(1.0, (decoded + steps * len(s.running)) / max_new)
    s.retractions += len(retracted)
    s.waiting.extend(retracted)  # 0.5.23 _add_request_to_queue: at the end
    s.admission_dirty = True
