"""PagedTokenToKVPoolAllocator.alloc_extend / alloc_decode (SGLang @ a7ec6b97): hand-worked
examples, then a property test against a per-request model of positions and pages."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radixbench.cache import DoubleFreeError, PagedTokenToKVPoolAllocator, make_allocator
from radixbench.cache.allocator import unique_pages, unique_pages_np

T = torch.tensor


def paged(size: int = 64, page: int = 4, debug: bool = True) -> PagedTokenToKVPoolAllocator:
    """Pages 1..size/page, free list in order; page p holds slots 4p..4p+3 (page 4)."""
    alloc = make_allocator(size, page, debug=debug)
    assert isinstance(alloc, PagedTokenToKVPoolAllocator)
    return alloc


def extend(alloc, pre, seq, last):
    return alloc.alloc_extend(T(pre), T(seq), T(last), sum(s - p for p, s in zip(pre, seq)))


def test_fresh_requests_take_whole_pages_in_request_order() -> None:
    alloc = paged()
    # A: 6 tokens -> pages 1, 2 (the 2nd half used); B: 4 tokens -> page 3.
    out = extend(alloc, [0, 0], [6, 4], [-1, -1])
    assert out.tolist() == [4, 5, 6, 7, 8, 9, 12, 13, 14, 15]
    assert alloc.available_size() == 64 - 3 * 4
    assert not bool(alloc.is_free[4:16].any())  # page 2's unused slots 10, 11 are A's


def test_partial_last_page_is_filled_before_new_pages() -> None:
    alloc = paged()
    extend(alloc, [0, 0], [6, 4], [-1, -1])  # A: slots 4..9 (last 9), B: 12..15 (last 15)
    # A continues at position 6: slots 10, 11 finish page 2, then positions 8..12 take pages 4
    # and 5 (16..19, 20). B (prefix 4, page-aligned) continues at position 4: page 6 -> 24.
    out = extend(alloc, [6, 4], [13, 5], [9, 15])
    assert out.tolist() == [10, 11, 16, 17, 18, 19, 20, 24]
    assert alloc.available_size() == 64 - 6 * 4
    # A at 13 tokens (last slot 20) grows by 2 inside its page 5: no new page.
    before = alloc.available_size()
    assert extend(alloc, [13], [15], [20]).tolist() == [21, 22]
    assert alloc.available_size() == before


def test_decode_takes_a_new_page_only_on_a_page_boundary() -> None:
    alloc = paged()
    extend(alloc, [0, 0], [15, 5], [-1, -1])  # A: pages 1-4 (last slot 18), B: pages 5, 6 (24)
    free = alloc.available_size()
    # seq_lens count the token decoded now: A's 16th token is position 15, inside page 4.
    assert alloc.alloc_decode(T([16]), T([18])).tolist() == [19]
    assert alloc.available_size() == free
    # A's 17th token (position 16) starts a page; B's position 5 continues page 6; C (a fresh
    # request, last_loc -1) starts a page. New pages go in request order: 7 to A, 8 to C.
    out = alloc.alloc_decode(T([17, 6, 1]), T([19, 24, -1]))
    assert out.tolist() == [28, 25, 32]
    assert alloc.available_size() == free - 2 * 4


def test_too_few_pages_returns_none_and_takes_nothing() -> None:
    alloc = paged(size=16)  # 4 pages
    extend(alloc, [0], [10], [-1])  # pages 1-3, last slot 13 (page 3 half used)
    free_pages = alloc.free_list()
    mask = alloc.is_free.clone()
    assert extend(alloc, [10], [19], [13]) is None  # needs 2 new pages, 1 is free
    assert alloc.alloc_decode(T([13, 1]), T([15, -1])) is None  # 2 new pages, 1 free
    assert torch.equal(alloc.free_list(), free_pages) and torch.equal(alloc.is_free, mask)
    assert extend(alloc, [10], [14], [13]).tolist() == [14, 15, 16, 17]  # 1 page: fits


@pytest.mark.parametrize("debug", [False, True])
def test_pages_freed_by_requests_are_reused_after_the_free_list(debug: bool) -> None:
    alloc = paged(size=16, debug=debug)
    a = extend(alloc, [0], [5], [-1])  # pages 1, 2
    alloc.free(a)  # both pages back, behind pages 3, 4
    out = extend(alloc, [0], [16], [-1])
    assert (out // 4).unique_consecutive().tolist() == [3, 4, 1, 2]


@pytest.mark.parametrize("debug", [False, True])
def test_free_returns_each_page_once_in_ascending_order(debug: bool) -> None:
    alloc = paged(size=32, debug=debug)  # 8 pages
    a = alloc.alloc(16)  # pages 1..4
    assert a is not None
    alloc.free(T([15, 5, 14, 6]))  # pages 3, 1 (each twice)
    assert alloc.available_size() == (4 + 2) * 4
    assert alloc.free_list().tolist() == [5, 6, 7, 8, 1, 3]
    free_pages = alloc.is_free.view(-1, 4)[:, 0].tolist()
    assert free_pages == [False, True, False, True, False] + [True] * 4


def test_debug_free_of_a_free_page_raises_and_frees_nothing() -> None:
    alloc = paged(size=32, debug=True)
    a = alloc.alloc(8)  # pages 1, 2
    assert a is not None
    alloc.free(a[:1])
    with pytest.raises(DoubleFreeError, match=r"pages \[1\]"):
        alloc.free(a)  # page 1 is free, page 2 is not: neither is freed
    with pytest.raises(DoubleFreeError, match="out of range"):
        alloc.free(T([40]))  # page 10 of 8
    assert alloc.available_size() == 28 and alloc.free_list().tolist() == [3, 4, 5, 6, 7, 8, 1]


def test_without_debug_a_double_free_of_a_page_is_found_by_the_mask() -> None:
    alloc = paged(size=32, debug=False)
    a = alloc.alloc(8)
    assert a is not None
    alloc.free(a[:1])
    alloc.free(a)  # page 1 again: not checked on free
    with pytest.raises(DoubleFreeError, match=r"KV pages in the free list twice: \[1\]"):
        _ = alloc.is_free


@pytest.mark.parametrize(
    ("pre", "seq", "last", "n", "match"),
    [
        ([6], [8], [10], 2, "continue"),  # (10 + 1) % 4 != 6 % 4
        ([2], [3], [41], 1, "free page"),  # page 10 was never allocated
        ([4], [3], [7], -1, "shorter"),
        ([0], [4], [-1], 5, "extend_num_tokens"),
        ([0, 0], [4], [-1], 4, "length"),
    ],
)
def test_alloc_extend_rejects_inconsistent_input_and_takes_nothing(
    pre, seq, last, n, match
) -> None:
    alloc = paged()
    extend(alloc, [0], [8], [-1])  # pages 1, 2 (slots 4..11) are in use
    free = alloc.available_size()
    with pytest.raises(ValueError, match=match):
        alloc.alloc_extend(T(pre), T(seq), T(last), n)
    assert alloc.available_size() == free


@pytest.mark.parametrize(("seq", "last", "match"), [([7], [8], "match"), ([3], [41], "free page")])
def test_alloc_decode_rejects_inconsistent_input(seq, last, match) -> None:
    alloc = paged()
    extend(alloc, [0], [8], [-1])
    with pytest.raises(ValueError, match=match):
        alloc.alloc_decode(T(seq), T(last))


# ---------------------------------------------------------------- property: model of positions
ops = st.lists(
    st.tuples(st.sampled_from(["extend", "decode", "free"]), st.integers(0, 3), st.integers(1, 9)),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, page=st.sampled_from([2, 4, 8]))
def test_slots_follow_positions_page_by_page(ops, page) -> None:
    """Random extends (batches of one), decodes and frees of 4 requests. Invariants: position
    ``i`` of a request lies at offset ``i % page`` of the request's ``i // page``-th page; no
    page has two owners; free + ``sum(ceil(len / page))`` pages == all pages. Debug checks off,
    as the simulator runs it."""
    alloc = make_allocator(24 * page, page, debug=False)
    assert isinstance(alloc, PagedTokenToKVPoolAllocator)
    slots: dict[int, list[int]] = {r: [] for r in range(4)}
    for op, r, n in ops:
        have = slots[r]
        last = T([have[-1] if have else -1])
        if op == "free":
            if have:
                alloc.free(T(have))
            slots[r] = []
            continue
        if op == "extend":
            out = alloc.alloc_extend(T([len(have)]), T([len(have) + n]), last, n)
        else:
            out = alloc.alloc_decode(T([len(have) + 1]), last)
        if out is None:  # pool full: the model says so too
            need = -(-(len(have) + (n if op == "extend" else 1)) // page) - -(-len(have) // page)
            assert need > alloc.available_size() // page
            continue
        have.extend(out.tolist())
    owner: dict[int, int] = {}
    for r, have in slots.items():
        pages = [s // page for s in have[::page]]
        for i, s in enumerate(have):
            assert s // page == pages[i // page] and s % page == i % page
        for p in pages:
            assert owner.setdefault(p, r) == r
    assert alloc.available_size() // page + len(owner) == 24
    assert not any(bool(alloc.is_free[p * page]) for p in owner)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lens=st.lists(st.lists(st.integers(1, 9), min_size=1, max_size=6), min_size=1, max_size=6),
    page=st.sampled_from([2, 4, 16]),
    debug=st.booleans(),
)
def test_numpy_paths_hand_out_the_torch_paths_slots(lens, page, debug) -> None:
    """``alloc_extend_np`` / ``alloc_decode_np`` (the CPU paths of ``alloc_extend`` /
    ``alloc_decode``) against ``_alloc_extend_torch`` / ``_alloc_decode_torch`` (the paths on a
    GPU), on twin pools: batches of fresh requests extended, then decoded step by step; the
    same slots (or ``None``), the same free lists, every step; then a next chunk of each
    request from where it stands (its last page continued)."""
    a, b = (PagedTokenToKVPoolAllocator(32 * page, page, debug=debug) for _ in range(2))

    def extend_both(pre: list[int], seq: list[int], last: list[int]):
        n = sum(seq) - sum(pre)
        got = a.alloc_extend_np(T(pre).numpy(), T(seq).numpy(), T(last).numpy(), n)
        want = b._alloc_extend_torch(T(pre), T(seq), T(last), n)
        assert (got is None) == (want is None)
        if want is not None:
            assert got is not None and got.tolist() == want.tolist()
        assert torch.equal(a.free_list(), b.free_list())
        return want

    for batch in lens:
        n = len(batch)
        out = extend_both([0] * n, batch, [-1] * n)
        if out is None:
            break
        ends = torch.cumsum(T(batch), 0) - 1
        last, seq = out[ends], T(batch)
        for _ in range(page + 2):
            got = a.alloc_decode_np((seq + 1).numpy(), last.numpy())
            want = b._alloc_decode_torch(seq + 1, last)
            if want is None:
                assert got is None
                break
            assert got is not None and got.tolist() == want.tolist()
            assert torch.equal(a.free_list(), b.free_list())
            last, seq = want, seq + 1
        # a next chunk of every request, continuing its last page
        more = extend_both(seq.tolist(), (seq + 3).tolist(), last.tolist())
        if more is None:
            break


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pages=st.lists(st.integers(1, 40), min_size=1, max_size=12),
    cut=st.integers(0, 64),
    shuffle=st.randoms(use_true_random=False),
    page=st.sampled_from([1, 16, 64]),
)
def test_numpy_free_frees_the_pages_torch_unique_does(pages, cut, shuffle, page) -> None:
    """``free`` on a CPU pool (``unique_pages_np``: runs of one page cut, then ``np.unique``)
    against 0.5.23's ``torch.unique(indices // page_size)``: the slots of some pages (repeats
    allowed), a partial last page, in page order and shuffled; the same pages, in the same
    ascending order, land behind the free list."""
    slots = [p * page + o for p in pages for o in range(page)]
    slots = slots[: max(1, len(slots) - cut % page)]
    for order in (slots, shuffle.sample(slots, len(slots))):
        idx = T(order)
        want = torch.unique(idx // page)
        alloc = PagedTokenToKVPoolAllocator(40 * page, page, debug=False)
        got = unique_pages_np(idx.numpy(), page)
        assert got.dtype == want.numpy().dtype and got.tolist() == want.tolist()
        assert unique_pages(idx, page).tolist() == want.tolist()
        assert unique_pages(idx.to(torch.int32), page).tolist() == want.tolist()
        alloc.free(idx)
        assert alloc.free_list().tolist()[40:] == want.tolist()
