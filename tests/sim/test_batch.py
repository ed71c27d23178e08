from __future__ import annotations

from array import array

import pytest
import torch

from radixbench.cache import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.sim import FLATTENERS, BatchBuilder, Req


def _req(rid: int, tokens: list[int], prefix: torch.Tensor, row: int) -> Req:
    r = Req(rid, 0.0, array("q", tokens), output_len=4)
    r.prefix_indices = prefix
    r.req_pool_idx = row
    return r


@pytest.mark.parametrize("flatten", sorted(FLATTENERS))
def test_flatteners_agree(flatten: str) -> None:
    parts = [array("q", [1, 2, 3]), array("q"), array("q", [7, 8])]
    out = FLATTENERS[flatten](parts)
    assert out.dtype == torch.int64
    assert out.tolist() == [1, 2, 3, 7, 8]


@pytest.mark.parametrize("flatten", sorted(FLATTENERS))
def test_build_extend_tensors_and_req_to_token(flatten: str) -> None:
    pool = ReqToTokenPool(4, 32)
    alloc = TokenToKVPoolAllocator(64)
    prefix = alloc.alloc(2)
    a = _req(0, [10, 11, 12, 13, 14], prefix, row=1)  # 2 cached + 3 new
    b = _req(1, [20, 21], torch.empty(0, dtype=torch.int64), row=2)  # 0 cached + 2 new
    loc = alloc.alloc(5)
    batch = BatchBuilder(pool, flatten).build_extend([a, b], loc)
    assert batch.input_ids.tolist() == [12, 13, 14, 20, 21]
    assert batch.prefix_lens.tolist() == [2, 0]
    assert batch.extend_lens.tolist() == [3, 2]
    assert batch.seq_lens.tolist() == [5, 2]
    assert batch.positions.tolist() == [2, 3, 4, 0, 1]
    assert batch.req_pool_indices.tolist() == [1, 2]
    assert pool.req_to_token[1, :5].tolist() == prefix.tolist() + loc[:3].tolist()
    assert pool.req_to_token[2, :2].tolist() == loc[3:].tolist()
    assert pool.req_to_token[3].abs().sum().item() == 0  # untouched row


def test_build_decode_writes_slot_at_seq_len() -> None:
    pool = ReqToTokenPool(4, 32)
    alloc = TokenToKVPoolAllocator(64)
    r = _req(0, [1, 2, 3], torch.empty(0, dtype=torch.int64), row=3)
    r.seq_len = 3
    r.output_ids = array("q", [99])
    loc = alloc.alloc(1)
    batch = BatchBuilder(pool).build_decode([r], loc)
    assert batch.input_ids.tolist() == [99]
    assert batch.positions.tolist() == [3]
    assert batch.seq_lens.tolist() == [4]
    assert pool.req_to_token[3, 3].item() == loc.item()


def test_decode_batches_of_changing_size_reuse_one_buffer() -> None:
    """Batches of 2, 3 (past the pool's rows: a new buffer), 1 and 2 requests in a row: each
    is right when built; extend_lens stay ones; a batch is valid until the next build."""
    import numpy as np

    pool = ReqToTokenPool(2, 64)
    builder = BatchBuilder(pool)
    seen = []
    for step, bs in enumerate([2, 3, 1, 2]):
        meta = np.array(
            [
                [100 + step + i for i in range(bs)],
                [10 * step + i for i in range(bs)],
                [1 + i % 2 for i in range(bs)],
            ],
            dtype=np.int64,
        )
        loc = torch.arange(1000 * step, 1000 * step + bs, dtype=torch.int64)
        b = builder.build_decode([], loc, meta)
        got = [
            t.tolist()
            for t in (
                b.input_ids,
                b.positions,
                b.req_pool_indices,
                b.seq_lens,
                b.extend_lens,
                b.prefix_lens,
                b.out_cache_loc,
            )
        ]
        assert got == [
            meta[0].tolist(),
            meta[1].tolist(),
            meta[2].tolist(),
            (meta[1] + 1).tolist(),
            [1] * bs,
            meta[1].tolist(),
            loc.tolist(),
        ]
        assert pool.req_to_token[meta[2], meta[1]].tolist() == loc.tolist()
        seen.append(b)
    # reused: step 2's 1-request batch now shows step 3's first request
    assert seen[2].input_ids.tolist() == [103] and seen[3].input_ids.tolist() == [103, 104]


def test_unknown_flatten_rejected() -> None:
    with pytest.raises(ValueError, match="flatten"):
        BatchBuilder(ReqToTokenPool(1, 4), "bogus")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_build_extend_on_cuda_matches_cpu() -> None:
    outs = []
    for dev in ("cpu", "cuda"):
        pool = ReqToTokenPool(2, 16, dev)
        alloc = TokenToKVPoolAllocator(32, dev)
        r = _req(0, [5, 6, 7, 8], torch.empty(0, dtype=torch.int64, device=dev), row=1)
        batch = BatchBuilder(pool, "numpy").build_extend([r], alloc.alloc(4))
        assert batch.input_ids.device.type == dev
        outs.append((batch.input_ids.cpu().tolist(), pool.req_to_token[1, :4].cpu().tolist()))
    assert outs[0] == outs[1]


def test_decode_meta_filled_in_place_gives_the_same_batch() -> None:
    import numpy as np

    pool = ReqToTokenPool(4, 64)
    a, b = BatchBuilder(pool), BatchBuilder(ReqToTokenPool(4, 64))
    meta = np.array([[7, 8, 9], [3, 4, 5], [1, 2, 3]], dtype=np.int64)
    loc = torch.tensor([11, 12, 13])
    want = a.build_decode([], loc, meta)
    m = b.decode_meta(3)
    m[:] = meta
    got = b.build_decode([], loc, m)
    for f in ("input_ids", "positions", "seq_lens", "extend_lens", "req_pool_indices"):
        assert getattr(got, f).tolist() == getattr(want, f).tolist(), f
    assert np.shares_memory(got.input_ids.numpy(), m)  # built in place, not copied


_DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
        ],
    ),
]


@pytest.mark.parametrize("dev", _DEVICES)
def test_rows_only_writes_what_the_builds_write(dev: str) -> None:
    """``--no-batch-builder``: ``write_extend_rows`` / ``write_decode_rows`` leave
    ``req_to_token`` exactly as ``build_extend`` / ``build_decode`` do (prefix, new slots, a
    decode slot at ``seq_len``), on twin pools."""
    import numpy as np

    tables = []
    for rows_only in (False, True):
        pool = ReqToTokenPool(4, 32, dev)
        alloc = TokenToKVPoolAllocator(64, dev)
        builder = BatchBuilder(pool, "numpy")
        prefix = alloc.alloc(2)
        a = _req(0, [10, 11, 12, 13, 14], prefix, row=1)
        b = _req(1, [20, 21], torch.empty(0, dtype=torch.int64, device=dev), row=2)
        loc = alloc.alloc(5)
        meta = np.array([[99, 98], [5, 2], [1, 2]], dtype=np.int64)
        dec = alloc.alloc(2)
        if rows_only:
            builder.write_extend_rows([a, b], loc)
            builder.write_decode_rows([a, b], dec, meta)
        else:
            builder.build_extend([a, b], loc)
            builder.build_decode([a, b], dec, meta)
        tables.append(pool.req_to_token.cpu().clone())
    assert tables[0][1, :6].tolist() != [0] * 6
    assert torch.equal(tables[0], tables[1])
