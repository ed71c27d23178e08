"""RunningArrays: the decode batch's arrays advance as the per-request loop would, and a
request's Req fields are exact once synced."""

from __future__ import annotations

from array import array

import numpy as np

from radixbench.sim.request import Req
from radixbench.sim.running import RunningArrays
from radixbench.workloads.tokens import output_tokens


def _prefilled(rid: int, row: int, n_in: int, n_out: int, sampled: int = 1) -> Req:
    r = Req(rid, 0.0, array("q", range(n_in)), n_out)
    r.output_plan = output_tokens(rid, n_out)
    r.output_ids = r.output_plan[:sampled]
    r.token_s = array("d", [0.5] * sampled)
    r.req_pool_idx, r.seq_len = row, n_in + sampled - 1
    return r


def test_steps_advance_inputs_and_finish_in_batch_order() -> None:
    a, b = _prefilled(0, 1, 10, 3), _prefilled(1, 2, 5, 2)
    ra = RunningArrays()
    ra.add([a, b])
    m = ra.decode_inputs()
    assert m.tolist() == [[a.output_plan[0], b.output_plan[0]], [10, 5], [1, 2]]
    assert ra.advance(1.0) == [1]  # b sampled its 2nd and last token
    assert ra.sync_one(1) is b and b.seq_len == 6 and b.output_ids == b.output_plan
    assert b.token_s.tolist() == [0.5, 1.0]
    ra.drop([1])
    assert ra.reqs == [a] and ra.decode_inputs().tolist() == [[a.output_plan[1]], [11], [1]]
    assert a.seq_len == 10 and len(a.output_ids) == 1  # not synced yet: lags
    assert ra.remaining() == [1] and ra.seq_total == 11
    assert ra.advance(2.0) == [0]
    ra.sync()
    assert (
        a.seq_len == 12
        and a.output_ids == a.output_plan
        and a.token_s.tolist()
        == [
            0.5,
            1.0,
            2.0,
        ]
    )


def test_plan_buffer_compacts_and_reset_reorders() -> None:
    ra = RunningArrays()
    ra.buf = np.empty(8, dtype=np.int64)  # force compactions
    reqs = [_prefilled(i, i + 1, 4, 6) for i in range(3)]
    for r in reqs:
        ra.add([r])
    ra.advance(1.0)
    assert ra.decode_inputs()[0].tolist() == [r.output_plan[1] for r in reqs]
    ra.sync()
    ra.reset([reqs[2], reqs[0]])
    assert ra.decode_inputs().tolist() == [
        [reqs[2].output_plan[1], reqs[0].output_plan[1]],
        [5, 5],
        [3, 1],
    ]
