"""SimConfig validation of page_size and the settings that must agree with it."""

from __future__ import annotations

import pytest

from radixbench.sim import SimConfig


@pytest.mark.parametrize("page", [1, 2, 4, 16, 64])
def test_powers_of_two_are_accepted(page: int) -> None:
    assert SimConfig(page_size=page).page_size == page


@pytest.mark.parametrize("bad", [0, -4, 3, 12, 48, True, 16.0])
def test_page_size_must_be_a_positive_power_of_two(bad) -> None:
    with pytest.raises(ValueError, match=r"^page_size must be a positive power of two, got "):
        SimConfig(page_size=bad)


def test_chunk_must_be_whole_pages_and_the_pool_must_hold_one() -> None:
    with pytest.raises(ValueError, match="chunked_prefill_size 1000 must be a multiple of page"):
        SimConfig(page_size=16, chunked_prefill_size=1000)
    assert SimConfig(page_size=16, chunked_prefill_size=None).chunked_prefill_size is None
    with pytest.raises(ValueError, match="holds no page"):
        SimConfig(page_size=64, kv_capacity_tokens=32)
