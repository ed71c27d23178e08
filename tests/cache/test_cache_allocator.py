"""TokenToKVPoolAllocator and ReqToTokenPool (radixbench.cache.allocator)."""

from __future__ import annotations

import pytest
import torch

from radixbench.cache import (
    DoubleFreeError,
    IntegrityError,
    RadixCache,
    RadixKey,
    ReqToTokenPool,
    TokenToKVPoolAllocator,
    check_integrity,
    make_allocator,
)
from radixbench.cache.allocator import DEBUG_ENV


def test_alloc_free_round_trip() -> None:
    a = TokenToKVPoolAllocator(16)
    assert a.available_size() == 16
    x = a.alloc(5)
    assert x is not None
    assert x.dtype == torch.int64
    assert x.numel() == 5
    assert a.available_size() == 11
    y = a.alloc(11)
    assert y is not None
    assert a.available_size() == 0
    # Every slot 1..16 handed out exactly once, never slot 0.
    assert sorted(torch.cat([x, y]).tolist()) == list(range(1, 17))
    a.free(x)
    assert a.available_size() == 5
    a.free(y)
    assert a.available_size() == 16
    z = a.alloc(16)
    assert z is not None
    assert sorted(z.tolist()) == list(range(1, 17))


def test_alloc_order_is_deterministic_fifo() -> None:
    a = TokenToKVPoolAllocator(8)
    x = a.alloc(3)
    assert x is not None and x.tolist() == [1, 2, 3]
    a.free(torch.tensor([2]))
    y = a.alloc(5)
    # Front of the free list first (4..8), freed slots are appended at the back.
    assert y is not None and y.tolist() == [4, 5, 6, 7, 8]
    z = a.alloc(1)
    assert z is not None and z.tolist() == [2]


def test_alloc_zero() -> None:
    a = TokenToKVPoolAllocator(4)
    x = a.alloc(0)
    assert x is not None and x.numel() == 0
    assert a.available_size() == 4


def test_alloc_more_than_available_returns_none_and_takes_nothing() -> None:
    a = TokenToKVPoolAllocator(8)
    assert a.alloc(3) is not None
    assert a.alloc(6) is None
    assert a.available_size() == 5
    x = a.alloc(5)
    assert x is not None and x.tolist() == [4, 5, 6, 7, 8]


def test_alloc_negative_raises_and_takes_nothing() -> None:
    a = TokenToKVPoolAllocator(10)
    assert a.alloc(3) is not None
    with pytest.raises(ValueError):
        a.alloc(-1)
    assert a.available_size() == 7
    x = a.alloc(7)
    assert x is not None and x.tolist() == [4, 5, 6, 7, 8, 9, 10]


def test_double_free_raises_and_frees_nothing() -> None:
    a = TokenToKVPoolAllocator(8, debug=True)
    x = a.alloc(4)
    assert x is not None
    a.free(x[:2])
    before = a.available_size()
    # x[1] is already free; x[2], x[3] are not — none of them may be freed.
    with pytest.raises(DoubleFreeError):
        a.free(x[1:])
    assert a.available_size() == before
    assert not bool(a.is_free[x[2:]].any())
    a.free(x[2:])  # still allocated, so this works
    assert a.available_size() == 8


def test_repeated_slot_in_one_free_raises() -> None:
    a = TokenToKVPoolAllocator(8, debug=True)
    x = a.alloc(3)
    assert x is not None
    with pytest.raises(DoubleFreeError):
        a.free(torch.tensor([x[0].item(), x[1].item(), x[0].item()]))
    assert a.available_size() == 5


@pytest.mark.parametrize("bad", [0, -1, 9, 1000])
def test_free_out_of_range_raises(bad: int) -> None:
    a = TokenToKVPoolAllocator(8, debug=True)
    x = a.alloc(8)
    assert x is not None
    with pytest.raises(DoubleFreeError):
        a.free(torch.tensor([x[0].item(), bad]))
    assert a.available_size() == 0


def test_free_of_another_dtype_copies_so_the_caller_may_reuse_its_buffer() -> None:
    a = TokenToKVPoolAllocator(4)
    x = a.alloc(4)
    assert x is not None
    t = x.to(torch.int32)  # as req_to_token rows are: free converts, which copies
    a.free(t)
    t.zero_()  # the caller reuses its buffer
    y = a.alloc(4)
    assert y is not None and y.tolist() == [1, 2, 3, 4]


def test_debug_catches_a_freed_tensor_written_to_and_keeps_the_pool_intact() -> None:
    a = TokenToKVPoolAllocator(4, debug=True)
    x = a.alloc(4)
    assert x is not None
    t = x.clone()
    a.free(t)
    t.zero_()  # breaks free()'s ownership contract
    with pytest.raises(ValueError, match="written to afterwards"):
        a.alloc(4)
    y = a.alloc(4)  # debug kept its own copy: the pool is intact
    assert y is not None and y.tolist() == [1, 2, 3, 4]


def test_without_debug_a_double_free_is_found_by_the_mask() -> None:
    a = TokenToKVPoolAllocator(8)
    assert not a.debug
    x = a.alloc(4)
    assert x is not None
    a.free(x[:2])
    a.free(x[1:3])  # slot 2 twice: not checked here (no synchronisation on free)
    with pytest.raises(DoubleFreeError, match=r"twice: \[2\]"):
        _ = a.is_free


def test_without_debug_a_bad_slot_is_found_by_the_mask() -> None:
    a = TokenToKVPoolAllocator(8)
    a.free(torch.tensor([0]))  # the padding slot
    with pytest.raises(DoubleFreeError, match=r"outside 1\.\.8"):
        _ = a.is_free


def test_check_integrity_finds_a_double_free_of_a_tree_slot() -> None:
    alloc = TokenToKVPoolAllocator(16)
    cache = RadixCache(None, alloc)
    v = alloc.alloc(4)
    assert v is not None
    cache.insert(RadixKey([1, 2, 3, 4]), v)
    check_integrity(cache)
    alloc.free(v[1:2])  # the tree still holds slot 2
    with pytest.raises(IntegrityError, match="held by the tree and free"):
        check_integrity(cache)
    alloc.free(v[1:2])  # and now slot 2 is free twice
    with pytest.raises(DoubleFreeError):
        check_integrity(cache)


def test_debug_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEBUG_ENV, "1")
    assert TokenToKVPoolAllocator(4).debug and make_allocator(8, 4).debug
    assert not TokenToKVPoolAllocator(4, debug=False).debug
    monkeypatch.delenv(DEBUG_ENV)
    assert not TokenToKVPoolAllocator(4).debug and not make_allocator(8, 4).debug
    # check_repeats is the older name of debug
    assert TokenToKVPoolAllocator(4, check_repeats=True).debug
    assert make_allocator(8, 4, check_repeats=True).check_repeats


@pytest.mark.parametrize("page", [1, 4])
def test_debug_and_fast_paths_hand_out_the_same_slots(page: int) -> None:
    """A fixed random stream of allocs and frees: both modes give the same slots in the same
    order, the same free list, sizes and masks after every call."""
    gen = torch.Generator().manual_seed(page)
    sides = [make_allocator(32 * page, page, debug=d) for d in (False, True)]
    held: list[list[torch.Tensor]] = [[], []]
    for _ in range(300):
        n = int(torch.randint(0, 6, (1,), generator=gen)) * page
        pick = float(torch.rand(1, generator=gen))
        for side, h in zip(sides, held):
            if pick < 0.55 or not h:
                out = side.alloc(n)
                h.append(out if out is not None else torch.empty(0, dtype=torch.int64))
            else:
                side.free(h.pop(int(pick * 1000) % len(h)))
        a, b = held
        assert [t.tolist() for t in a] == [t.tolist() for t in b]
        assert sides[0].available_size() == sides[1].available_size()
        assert torch.equal(sides[0].free_list(), sides[1].free_list())
        assert torch.equal(sides[0].is_free, sides[1].is_free)


def test_alloc_result_not_aliased_with_pool() -> None:
    a = TokenToKVPoolAllocator(8)
    x = a.alloc(4)
    assert x is not None
    x.zero_()  # scribbling on a handed-out tensor must not corrupt the free list
    y = a.alloc(4)
    assert y is not None and y.tolist() == [5, 6, 7, 8]


def test_double_free_error_is_value_error() -> None:
    assert issubclass(DoubleFreeError, ValueError)


def test_free_empty_is_noop() -> None:
    a = TokenToKVPoolAllocator(4)
    a.free(torch.empty((0,), dtype=torch.int64))
    assert a.available_size() == 4


def test_slot_zero_never_handed_out() -> None:
    a = TokenToKVPoolAllocator(5)
    seen = set()
    for _ in range(3):
        x = a.alloc(5)
        assert x is not None
        seen |= set(x.tolist())
        a.free(x.flip(0))
    assert 0 not in seen
    assert seen == {1, 2, 3, 4, 5}
    assert not bool(a.is_free[0])


def test_clear_restores_everything() -> None:
    a = TokenToKVPoolAllocator(6)
    assert a.alloc(4) is not None
    a.clear()
    assert a.available_size() == 6
    x = a.alloc(6)
    assert x is not None and x.tolist() == [1, 2, 3, 4, 5, 6]


def test_allocator_rejects_nonpositive_size() -> None:
    with pytest.raises(ValueError):
        TokenToKVPoolAllocator(0)


# ---------------------------------------------------------------- ReqToTokenPool


def test_req_pool_alloc_free() -> None:
    p = ReqToTokenPool(3, 16)
    assert p.available_size() == 3
    rows = [p.alloc(), p.alloc(), p.alloc()]
    assert rows == [3, 2, 1]  # row 0 is padding; taken from the tail, as sglang 0.5.23
    assert p.alloc() is None
    assert p.available_size() == 0
    p.free(2)
    assert p.available_size() == 1
    assert p.alloc() == 2
    assert p.req_to_token.shape == (4, 16)
    assert p.req_to_token.dtype == torch.int32


def test_req_pool_double_free_and_out_of_range() -> None:
    p = ReqToTokenPool(2, 4)
    r = p.alloc()
    assert r == 2
    p.free(r)
    with pytest.raises(DoubleFreeError):
        p.free(r)
    with pytest.raises(DoubleFreeError):
        p.free(1)  # never allocated
    with pytest.raises(DoubleFreeError):
        p.free(0)  # padding row
    with pytest.raises(DoubleFreeError):
        p.free(3)
    assert p.available_size() == 2
    assert sorted([p.alloc(), p.alloc()]) == [1, 2]  # type: ignore[type-var]


def test_req_pool_reuses_rows_lifo() -> None:
    # Rows start in order 1..max_reqs; alloc() pops the back, free() appends to it (SGLang
    # 0.5.23 alloc_rows / free_rows).
    p = ReqToTokenPool(4, 4)
    assert [p.alloc(), p.alloc()] == [4, 3]
    p.free(3)
    p.free(4)
    assert [p.alloc(), p.alloc(), p.alloc(), p.alloc()] == [4, 3, 2, 1]
    assert p.alloc() is None


def test_req_pool_write() -> None:
    p = ReqToTokenPool(2, 8)
    r = p.alloc()
    assert r is not None
    p.write(r, 2, torch.tensor([7, 8, 9], dtype=torch.int64))
    assert p.req_to_token[r].tolist() == [0, 0, 7, 8, 9, 0, 0, 0]
    assert p.req_to_token.dtype == torch.int32
    p.write(r, 0, torch.tensor([1, 2]))
    assert p.req_to_token[r].tolist() == [1, 2, 7, 8, 9, 0, 0, 0]
    # Other rows untouched.
    assert p.req_to_token[0].tolist() == [0] * 8
    assert p.req_to_token[3 - r].tolist() == [0] * 8


def test_req_pool_rejects_nonpositive() -> None:
    with pytest.raises(ValueError):
        ReqToTokenPool(0, 4)
    with pytest.raises(ValueError):
        ReqToTokenPool(4, 0)


def test_req_pool_reuses_the_row_freed_last() -> None:
    """sglang 0.5.23 ``ReqToTokenPool.alloc_rows`` pops ``free_slots`` from the tail and
    ``free_rows`` extends it (LIFO): with two requests at a time out of eight rows, only rows
    8 and 7 are ever used, and the rest of the table is never written."""
    p = ReqToTokenPool(8, 16)
    used = set()
    for _ in range(20):
        a, b = p.alloc(), p.alloc()
        assert a is not None and b is not None
        used |= {a, b}
        p.free(b)
        p.free(a)
    assert used == {7, 8}
