"""A simulated request's life: waiting -> (chunked) prefill -> decode -> finished, with
retraction back to waiting when decode runs out of KV slots."""

from __future__ import annotations

from array import array

import torch

from radixbench.cache.key import RadixKey
from radixbench.cache.node import TreeNode


class Req:
    """Mutable per-request state, as SGLang ``Req`` keeps it.

    ``input_ids``/``output_ids``: ``array('q')`` token ids. ``fill_ids``: the tokens whose KV the
    next extend step leaves in ``req_to_token`` (input + outputs so far, truncated to the chunk
    during chunked prefill). ``prefix_indices``: int64 KV slots of the cached prefix (matched at
    admission, refreshed by ``cache_unfinished_req``); ``last_node``: the locked tree node ending
    it. ``seq_len``: tokens whose KV is in ``req_to_token``. ``token_s``: simulated time (s) of
    every output token. ``retractions``: times decode retracted it.
    """

    __slots__ = (
        "arrival_s",
        "extra_key",
        "fill_ids",
        "finish_s",
        "first_token_s",
        "input_ids",
        "input_len",
        "last_node",
        "output_ids",
        "output_len",
        "output_plan",
        "prefix_hit_tokens",
        "prefix_indices",
        "req_pool_idx",
        "retractions",
        "rid",
        "seq_len",
        "status",
        "token_s",
    )

    def __init__(self, rid: int, arrival_s: float, input_ids: array, output_len: int) -> None:
        self.rid = rid
        self.arrival_s = arrival_s
        self.input_ids = input_ids
        self.input_len = len(input_ids)  # kept after ``release_tokens``
        self.fill_ids = input_ids
        self.output_len = output_len
        self.output_ids = array("q")
        self.output_plan = array("q")  # the tokens this request will sample, in order
        self.extra_key: str | None = None
        self.prefix_indices = torch.empty(0, dtype=torch.int64)
        self.last_node: TreeNode | None = None
        self.req_pool_idx = -1
        self.seq_len = 0
        self.prefix_hit_tokens = -1  # set at the first admission
        self.first_token_s = float("nan")
        self.finish_s = float("nan")
        self.token_s = array("d")
        self.retractions = 0
        self.status = "waiting"

    def release_tokens(self) -> None:
        """Drop the token arrays of a finished request (a full trace holds ~10^8 tokens);
        lengths, times and counters stay."""
        empty = array("q")
        self.input_ids = self.fill_ids = self.output_ids = self.output_plan = empty
        self.prefix_indices = torch.empty(0, dtype=torch.int64)
        self.last_node = None

    def full_ids(self) -> array:
        """``input_ids + output_ids``: what a (re-)prefill computes (SGLang ``fill_ids`` of
        ``init_next_round_input``)."""
        return self.input_ids + self.output_ids if self.output_ids else self.input_ids

    def committed_token_ids(self) -> RadixKey:
        """Tokens with KV in ``req_to_token``: the first ``seq_len`` of input + output."""
        n_in = len(self.input_ids)
        if self.seq_len <= n_in:
            ids = self.input_ids if self.seq_len == n_in else self.input_ids[: self.seq_len]
        else:
            ids = self.input_ids + self.output_ids[: self.seq_len - n_in]
        return RadixKey(ids, self.extra_key)
