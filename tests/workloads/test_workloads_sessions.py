"""``chat-sessions``: every turn names its conversation (``TraceRequest.session_id``)."""

from __future__ import annotations

import itertools

import numpy as np

from radixbench.workloads.arrivals import Arrivals
from radixbench.workloads.sessions import ChatSessions, chat_sessions
from radixbench.workloads.tokens import block_tokens


def test_turns_of_a_session_share_its_id_and_extend_its_context() -> None:
    p = ChatSessions(sessions=4, turns=3, tenants=1, system_prompt_tokens=64, user_tokens=32,
                     reply_tokens=16)  # fmt: skip
    r = chat_sessions(p, Arrivals(process="poisson", rate=1.0), np.random.default_rng(0))
    by_session: dict[str | None, list] = {}
    for x in r:
        by_session.setdefault(x.session_id, []).append(x)
    assert sorted(by_session, key=str) == [f"session-{s}" for s in range(4)]
    for turns in by_session.values():
        assert len(turns) == 3
        for a, b in itertools.pairwise(turns):
            ta = block_tokens(a.hash_ids, a.input_length)
            assert block_tokens(b.hash_ids, b.input_length)[: len(ta)] == ta
