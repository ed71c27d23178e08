from __future__ import annotations

from array import array

import pytest

from radixbench.sim.request import Req


def _counting(ids: array) -> tuple[list[int], object]:
    calls: list[int] = []

    def expand() -> array:
        calls.append(1)
        return ids

    return calls, expand


def test_on_demand_request_makes_its_prompt_once_at_the_first_read() -> None:
    ids = array("q", range(10, 20))
    calls, expand = _counting(ids)
    req = Req.on_demand(7, 1.5, 10, 4, expand)  # type: ignore[arg-type]
    assert (req.rid, req.arrival_s, req.input_len, req.output_len) == (7, 1.5, 10, 4)
    assert len(req.input_ids) == 0 and not calls  # nothing made while it waits
    assert req.full_ids() == ids and req.fill_ids == ids and req.input_ids == ids
    assert req.full_ids() is req.input_ids and len(calls) == 1  # made once
    assert req.expand is None


def test_token_ids_of_an_on_demand_request_makes_the_prompt_too() -> None:
    ids = array("q", range(5))
    calls, expand = _counting(ids)
    req = Req.on_demand(1, 0.0, 5, 2, expand)  # type: ignore[arg-type]
    assert req.token_ids(3) == array("q", [0, 1, 2]) and len(calls) == 1
    req.output_ids.append(99)
    assert req.token_ids(6) == array("q", [0, 1, 2, 3, 4, 99]) and len(calls) == 1


def test_an_expand_of_the_wrong_length_names_the_request() -> None:
    req = Req.on_demand(3, 0.0, 8, 1, lambda: array("q", range(5)))
    with pytest.raises(ValueError, match="request 3: expand\\(\\) gave 5 prompt tokens"):
        req.full_ids()


def test_released_request_drops_its_expand() -> None:
    req = Req.on_demand(3, 0.0, 2, 1, lambda: array("q", [1, 2]))
    req.release_tokens()
    assert req.expand is None and req.full_ids() == array("q")
