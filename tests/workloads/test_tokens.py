"""Tests for radixbench.workloads.tokens (synthetic token ids from block hashes)."""

from __future__ import annotations

from array import array

import pytest

from radixbench.workloads import DEFAULT_VOCAB_SIZE, block_tokens, load_mooncake, output_tokens

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def ref_mix64(z: int) -> int:
    """Independent pure-Python splitmix64 finalizer (reference for the documented formula)."""
    z &= M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def ref_block_tokens(hashes: list[int], n: int, bs: int, vocab: int) -> list[int]:
    salt = 0x5DEECE66D2B79F5A
    out = [ref_mix64((h * bs + j) * GAMMA + salt) % vocab for h in hashes for j in range(bs)]
    return out[:n]


def ref_output_tokens(rid: int, n: int, vocab: int) -> list[int]:
    seed = ref_mix64(rid ^ 0xD1B54A32D192ED03)
    return [ref_mix64(seed + (i + 1) * GAMMA) % vocab for i in range(n)]


def test_block_tokens_matches_reference_formula() -> None:
    hashes = [0, 7, 2**40 + 3, 2**63 - 1]
    got = block_tokens(hashes, 3 * 512 + 17)
    assert got.tolist() == ref_block_tokens(hashes, 3 * 512 + 17, 512, DEFAULT_VOCAB_SIZE)
    small = block_tokens([5, 9], 20, block_size=16, vocab_size=1000)
    assert small.tolist() == ref_block_tokens([5, 9], 20, 16, 1000)


def test_block_tokens_results_outlive_the_reused_work_buffer_and_threads_agree() -> None:
    from concurrent.futures import ThreadPoolExecutor

    first = block_tokens([1, 2, 3], 1300)
    kept = first.tolist()
    block_tokens([9] * 300, 300 * 512)  # grows and overwrites the work buffer
    assert first.tolist() == kept == ref_block_tokens([1, 2, 3], 1300, 512, DEFAULT_VOCAB_SIZE)
    jobs = [([h, h + 1], 600 + h) for h in range(40)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda a: block_tokens(*a).tolist(), jobs))
    assert got == [ref_block_tokens(h, n, 512, DEFAULT_VOCAB_SIZE) for h, n in jobs]


def test_block_tokens_type_length_range() -> None:
    toks = block_tokens((0, 1, 2), 1500)
    assert isinstance(toks, array)
    assert toks.typecode == "q"
    assert len(toks) == 1500
    assert min(toks) >= 0
    assert max(toks) < DEFAULT_VOCAB_SIZE
    assert len(set(toks)) > 1400  # pseudo-random, not constant or periodic
    tiny = block_tokens((3,), 512, vocab_size=10)
    assert set(tiny) == set(range(10))


def test_block_tokens_deterministic() -> None:
    a = block_tokens((4, 8, 15, 16), 2000)
    b = block_tokens([4, 8, 15, 16], 2000)
    assert a == b
    assert a != block_tokens((4, 8, 15, 17), 2000)


def test_shared_hash_prefix_gives_shared_token_prefix() -> None:
    a = block_tokens((0, 1, 2, 3), 2048)
    b = block_tokens((0, 1, 2, 9), 2048)
    assert a[:1536] == b[:1536]
    same = sum(x == y for x, y in zip(a[1536:], b[1536:], strict=True))
    assert same < 5  # the differing block has (almost) no equal tokens
    assert a[1536] != b[1536]


def test_block_position_matters() -> None:
    # Same hash at a different position is the same block (content-addressed), but
    # different hashes in the first block differ from the very first token.
    assert block_tokens((5, 6), 1024)[512:] == block_tokens((6,), 512)
    assert block_tokens((1,), 512)[0] != block_tokens((2,), 512)[0]


def test_distinct_hashes_give_distinct_blocks() -> None:
    heads = {tuple(block_tokens((h,), 8)) for h in range(3000)}
    assert len(heads) == 3000


def test_cut_to_input_length() -> None:
    full = block_tokens((10, 11, 12), 1536)
    assert block_tokens((10, 11, 12), 700) == full[:700]
    assert block_tokens((10, 11, 12), 1025) == full[:1025]
    # Only the blocks that input_length reaches matter.
    assert block_tokens((10, 11, 99), 1024) == full[:1024]
    assert len(block_tokens((10,), 0)) == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "word"),
    [
        (((1, 2), 1025), {}, "input_length"),
        (((1, 2), -1), {}, "input_length"),
        (((1, 2), 10), {"block_size": 0}, "block_size"),
        (((1, 2), 10), {"vocab_size": 0}, "vocab_size"),
        (((-1, 2), 10), {}, "hash_ids"),
        (((2**64, 2), 10), {}, "hash_ids"),
    ],
)
def test_block_tokens_bad_arguments(args: tuple, kwargs: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        block_tokens(*args, **kwargs)


def test_bundled_requests_share_first_block() -> None:
    reqs = load_mooncake(max_requests=3)
    toks = [block_tokens(r.hash_ids, r.input_length) for r in reqs]
    assert all(len(t) == r.input_length for t, r in zip(toks, reqs, strict=True))
    assert toks[0][:512] == toks[1][:512] == toks[2][:512]  # all start with hash 0
    assert toks[0][512:1024] != toks[1][512:1024]  # second hashes 1 vs 14


def test_output_tokens_matches_reference_and_is_deterministic() -> None:
    got = output_tokens(42, 100)
    assert got.typecode == "q"
    assert got.tolist() == ref_output_tokens(42, 100, DEFAULT_VOCAB_SIZE)
    assert output_tokens(42, 100) == got
    assert output_tokens(42, 30) == got[:30]
    assert output_tokens(7, 50, vocab_size=97).tolist() == ref_output_tokens(7, 50, 97)
    assert len(output_tokens(3, 0)) == 0


def test_output_tokens_differ_per_rid_and_from_prompt_stream() -> None:
    streams = {tuple(output_tokens(rid, 16)) for rid in range(500)}
    assert len(streams) == 500
    assert output_tokens(0, 512) != block_tokens((0,), 512)
    assert all(0 <= t < DEFAULT_VOCAB_SIZE for t in output_tokens(1, 1000))


@pytest.mark.parametrize(
    ("args", "word"), [((-1, 5), "rid"), ((0, -5), "n"), ((0, 5, 0), "vocab_size")]
)
def test_output_tokens_bad_arguments(args: tuple, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        output_tokens(*args)
