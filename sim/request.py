"""A simulated request's life: waiting -> running (prefill, then decode) -> finished."""

from __future__ import annotations

from array import array

import torch

from radixbench.cache.key import RadixKey
from radixbench.cache.node import TreeNode


class Req:
    """Mutable per-request state, as SGLang ``Req`` keeps it.

    ``input_ids``/``output_ids``: ``array('q')`` token ids. ``prefix_indices``: int64 KV slots of
    the cached prefix matched at admission; ``last_node``: the locked tree node ending it.
    ``seq_len``: tokens whose KV is in ``req_to_token`` (input + all outputs but the last).
    Times are simulated seconds.
    """

    __slots__ = (
        "arrival_s",
        "extra_key",
        "finish_s",
        "first_token_s",
        "input_ids",
        "last_node",
        "output_ids",
        "output_len",
        "output_plan",
        "prefix_hit_tokens",
        "prefix_indices",
        "req_pool_idx",
        "rid",
        "seq_len",
        "status",
    )

    def __init__(self, rid: int, arrival_s: float, input_ids: array, output_len: int) -> None:
        self.rid = rid
        self.arrival_s = arrival_s
        self.input_ids = input_ids
        self.output_len = output_len
        self.output_ids = array("q")
        self.output_plan = array("q")  # the tokens this request will sample, in order
        self.extra_key: str | None = None
        self.prefix_indices = torch.empty(0, dtype=torch.int64)
        self.last_node: TreeNode | None = None
        self.req_pool_idx = 0
        self.seq_len = 0
        self.prefix_hit_tokens = 0
        self.first_token_s = float("nan")
        self.finish_s = float("nan")
        self.status = "waiting"

    @property
    def input_len(self) -> int:
        return len(self.input_ids)

    def committed_token_ids(self) -> RadixKey:
        """Tokens with KV in ``req_to_token``: input + output[:-1] (``seq_len`` tokens)."""
        return RadixKey(
            self.input_ids + self.output_ids[: self.seq_len - len(self.input_ids)], self.extra_key
        )
