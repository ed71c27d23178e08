"""A simulated request's life: waiting -> (chunked) prefill -> decode -> finished, with
retraction back to waiting when decode runs out of KV slots."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import torch

from radixbench.cache.interface import LockHandle, NodeHandle


class Req:
    """Mutable per-request state, as SGLang ``Req`` keeps it.

    ``input_ids``/``output_ids``: ``array('q')`` token ids. ``fill_ids``: the tokens whose KV the
    next extend step leaves in ``req_to_token`` (input + outputs so far, truncated to the chunk
    during chunked prefill). ``prefix_indices``: int64 KV slots of the tokens already computed
    before the next extend (matched at admission; after a chunk, the row's first
    ``len(fill_ids)`` slots). ``last_node``: the tree node ending the request's published
    prefix, locked by ``lock`` (the cache's handle). ``cache_protected_len`` (page aligned) /
    ``cache_inserted_len``: 0.5.23's ``req.kv`` fields — the row's first tokens that the tree
    owns, and the tokens this request has inserted into the tree (both reset on retraction).
    ``seq_len``: tokens whose KV is in ``req_to_token``. ``token_s``: simulated time (s) of
    every output token. ``retractions``: times decode retracted it. ``expand``: makes the
    prompt tokens of a request built by :meth:`on_demand` the first time :meth:`full_ids` is
    called, then ``None``. ``tier``: its HiCache record (tokens hit per tier, I/O times), None
    without HiCache. ``session_id``: its conversation (``TraceRequest.session_id``; 0.5.23
    ``Req.session_id``), which its checkpoints' inserts hand to the KV events; ``None``: none.
    """

    __slots__ = (
        "arrival_s",
        "cache_inserted_len",
        "cache_protected_len",
        "expand",
        "extra_key",
        "fill_ids",
        "finish_s",
        "first_token_s",
        "input_ids",
        "input_len",
        "last_node",
        "lock",
        "output_ids",
        "output_len",
        "output_plan",
        "prefix_hit_tokens",
        "prefix_indices",
        "priority",
        "req_pool_idx",
        "retractions",
        "rid",
        "seq_len",
        "session_id",
        "status",
        "tier",
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
        self.session_id: str | None = None
        self.prefix_indices = torch.empty(0, dtype=torch.int64)
        self.last_node: NodeHandle | None = None
        self.lock: LockHandle = None
        self.priority = 0
        self.cache_protected_len = 0
        self.cache_inserted_len = 0
        self.req_pool_idx = -1
        self.seq_len = 0
        self.prefix_hit_tokens = -1  # set at the first admission
        self.first_token_s = float("nan")
        self.finish_s = float("nan")
        self.token_s = array("d")
        self.retractions = 0
        self.status = "waiting"
        self.expand: Callable[[], array] | None = None
        self.tier: Any = None  # HiCache: a ``radixbench.sim.tiers.TierStats``

    @classmethod
    def on_demand(
        cls,
        rid: int,
        arrival_s: float,
        input_len: int,
        output_len: int,
        expand: Callable[[], array],
    ) -> Req:
        """A request whose ``input_len`` prompt tokens ``expand()`` makes when they are first
        read (:meth:`full_ids`: at its first admission attempt or queue ordering), not at
        arrival. Tokens, results and the order of every cache operation are the same as with
        the tokens given up front; a waiting queue of thousands of long prompts just holds no
        tokens (on the whole Mooncake trace up to ~8,000 requests wait: ~0.6 GB of ids)."""
        req = cls(rid, arrival_s, array("q"), output_len)
        req.input_len = input_len
        req.expand = expand
        return req

    def _materialize(self) -> array:
        """Run ``expand`` (once): the prompt tokens become ``input_ids`` / ``fill_ids``. Raises
        ``ValueError`` when it returns other than ``input_len`` tokens."""
        assert self.expand is not None
        ids = self.expand()
        if len(ids) != self.input_len:
            raise ValueError(
                f"request {self.rid}: expand() gave {len(ids)} prompt tokens, "
                f"expected input_len {self.input_len}"
            )
        self.input_ids = self.fill_ids = ids
        self.expand = None
        return ids

    def release_tokens(self) -> None:
        """Drop the token arrays of a finished request (a full trace holds ~10^8 tokens);
        lengths, times and counters stay."""
        empty = array("q")
        self.input_ids = self.fill_ids = self.output_ids = self.output_plan = empty
        self.expand = None
        self.prefix_indices = torch.empty(0, dtype=torch.int64)
        self.last_node = None

    def full_ids(self) -> array:
        """``input_ids + output_ids``: what a (re-)prefill computes (SGLang ``fill_ids`` of
        ``init_next_round_input``). Makes the prompt tokens of an :meth:`on_demand` request
        first (mutates ``input_ids`` / ``fill_ids`` / ``expand``)."""
        if self.expand is not None:
            self._materialize()
        return self.input_ids + self.output_ids if self.output_ids else self.input_ids

    def token_ids(self, up_to: int | None = None) -> array:
        """The cache's ``CacheReq.token_ids``: ``full_ids()[:up_to]`` (0.5.23
        ``full_untruncated_fill_ids[:up_to]``) with one copy at most; ``input_ids`` itself
        when that is the answer (arrays are never written in place once a request holds them)."""
        if up_to is None:
            return self.full_ids()
        inp = self.input_ids if self.expand is None else self._materialize()
        k = len(inp)
        if up_to <= k:
            return inp if up_to == k else inp[:up_to]
        return inp + self.output_ids[: up_to - k]

    @property
    def origin_input_len(self) -> int:
        """Prompt tokens (0.5.23 ``len(req.origin_input_ids)``)."""
        return self.input_len

    def reset_for_retract(self) -> None:
        """Back to waiting after ``release`` freed the KV (0.5.23 ``Req.reset_for_retract``):
        nothing cached, nothing locked; outputs so far are kept and re-prefilled."""
        self.req_pool_idx = -1
        self.prefix_indices = torch.empty(0, dtype=torch.int64)
        self.last_node = None
        self.lock = None
        self.cache_protected_len = 0
        self.cache_inserted_len = 0
        self.seq_len = 0
        self.retractions += 1
        self.status = "waiting"
