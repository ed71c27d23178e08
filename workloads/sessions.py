"""Chat sessions with think time: multi-turn conversations whose turns arrive in time order.

Unlike the ``multi-turn`` generator (turns of all sessions shuffled, arrival times drawn for the
whole stream), each session here starts at a time drawn from the scenario's arrival process
(``[arrivals]``: its ``rate`` is *sessions* per second) and sends turn ``k + 1`` a think time
after turn ``k`` (exponential, mean ``think_time_s``): a session's context is reused while it
is alive and idle in between, the access pattern of agentic / coding assistants that HiCache
targets (one published deployment: ~25k-token sessions of ~8 turns). Turn ``k`` sends the system
prompt, every earlier user message and reply, and a new user message; lengths jittered by
``jitter`` around their means. Requests come out in arrival order (``rid`` = position); session
``s``'s turns carry ``session_id`` ``"session-s"``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from radixbench.workloads.arrivals import Arrivals, apply_arrivals
from radixbench.workloads.segments import BlockIds, build_request
from radixbench.workloads.trace import TraceRequest

__all__ = ["TIMED_GENERATORS", "ChatSessions", "chat_sessions"]


@dataclass(frozen=True)
class ChatSessions:
    """``sessions`` conversations of ``turns`` turns; tokens: ``system_prompt_tokens`` (shared
    by every session of a ``tenant``: ``tenants`` distinct system prompts), ``user_tokens`` and
    ``reply_tokens`` per turn (means); ``think_time_s``: mean gap between a session's turns (s);
    ``jitter`` in [0, 1); ``block_size``: tokens per hash block."""

    sessions: int = 200
    turns: int = 8
    tenants: int = 4
    system_prompt_tokens: int = 2048
    user_tokens: int = 2500
    reply_tokens: int = 500
    think_time_s: float = 30.0
    jitter: float = 0.5
    block_size: int = 16

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, int) and not isinstance(v, bool) and v < 1:
                raise ValueError(f"{f.name} must be >= 1, got {v}")
        if not self.think_time_s >= 0:
            raise ValueError(f"think_time_s must be >= 0 s, got {self.think_time_s}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")


def _jitter(rng: np.random.Generator, mean: int, frac: float) -> int:
    lo, hi = max(1, round(mean * (1 - frac))), max(1, round(mean * (1 + frac)))
    return int(rng.integers(lo, hi + 1))


def chat_sessions(
    p: ChatSessions, arrivals: Arrivals, rng: np.random.Generator
) -> list[TraceRequest]:
    """The sessions' turns in arrival order (module docstring); session starts follow
    ``arrivals`` (unscaled: the caller scales the times as a trace's)."""
    ids = BlockIds(p.block_size)
    systems = [ids.segment(p.system_prompt_tokens) for _ in range(p.tenants)]
    starts = apply_arrivals(
        [TraceRequest(i, 0.0, 1, 1, ()) for i in range(p.sessions)],
        replace(arrivals, time_scale=1.0, rate_scale=1.0),
        rng,
    )
    turns: list[tuple[float, int, Any]] = []
    for s, start in enumerate(starts):
        ctx = [systems[int(rng.integers(p.tenants))]]
        t = start.arrival_s
        for k in range(p.turns):
            n_user = _jitter(rng, p.user_tokens, p.jitter)
            n_reply = _jitter(rng, p.reply_tokens, p.jitter)
            ctx = [*ctx, ids.segment(n_user)]
            turns.append((t, s * p.turns + k, (list(ctx), n_user, n_reply, f"session-{s}")))
            ctx.append(ids.segment(n_reply))
            t += float(rng.exponential(p.think_time_s)) if p.think_time_s > 0 else 0.0
    turns.sort(key=lambda x: (x[0], x[1]))
    return [
        build_request(i, segs, last, out, p.block_size, arrival_s=t, session_id=sid)
        for i, (t, _, (segs, last, out, sid)) in enumerate(turns)
    ]


#: Generators that time their own requests from the arrival process: kind -> (params, fn).
TIMED_GENERATORS = {"chat-sessions": (ChatSessions, chat_sessions)}
