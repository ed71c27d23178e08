"""Packed sort keys: one int per key, with exactly the order of the key tuples."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixbench.cache import POLICIES, RadixKey
from radixbench.cache.node import TreeNode
from radixbench.cache.policy import FIELD_BITS, pack_key

SIGNED = st.integers(-(2**63), 2**63 - 1)
NODE_ID = st.integers(0, 2**64 - 1)


@st.composite
def key_pairs(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two keys of one length; ``b`` often shares leading fields with ``a`` (ties exercised)."""
    n = draw(st.integers(0, 3))  # fields before the id
    a_fields, a_id = draw(st.lists(SIGNED, min_size=n, max_size=n)), draw(NODE_ID)
    shared = draw(st.integers(0, n + 1))
    fresh = n - min(shared, n)
    b_fields = a_fields[:shared] + draw(st.lists(SIGNED, min_size=fresh, max_size=fresh))
    b_id = a_id if shared == n + 1 else draw(NODE_ID)
    return (*a_fields, a_id), (*b_fields, b_id)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(key_pairs())
def test_pack_key_preserves_order_and_keeps_id_low(pair) -> None:
    a, b = pair
    pa, pb = pack_key(a), pack_key(b)
    assert (pa < pb) == (a < b)
    assert (pa == pb) == (a == b)
    assert pa & ((1 << FIELD_BITS) - 1) == a[-1]


@pytest.mark.parametrize("bad", [(2**63, 1), (-(2**63) - 1, 1), (0, -1), (0, 2**64)])
def test_pack_key_rejects_fields_out_of_range(bad) -> None:
    with pytest.raises(OverflowError):
        pack_key(bad)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    t=st.integers(0, 2**40),
    c=st.integers(0, 2**40),
    hits=st.integers(0, 1000),
    prio=st.integers(-(2**31), 2**31),
    node_id=st.integers(0, 2**40),
    n_tokens=st.integers(1, 64),
    start=st.integers(0, 2**20),
    history_extra=st.integers(0, 2**20),
)
def test_every_policy_packs_its_own_key(
    t, c, hits, prio, node_id, n_tokens, start, history_extra
) -> None:
    node = TreeNode(node_id, RadixKey([1] * n_tokens), None, None, t, c, prio)
    node.hit_count = hits
    node.tlru_cached_prefix_len = start + n_tokens
    node.tlru_history_len = start + n_tokens + history_extra
    assert (node.last_access_time, node.creation_time, node.priority) == (t, c, prio)
    configs = {
        "tlru": [{}, {"threshold": 16, "next_prompt_estimate": 4}],
        "slru": [{}, {"protected_threshold": 5}],
    }
    for name, cls in POLICIES.items():
        for config in configs.get(name, [{}]):
            policy = cls(**config)
            assert policy.packed(node) == pack_key(policy.key(node)), name
