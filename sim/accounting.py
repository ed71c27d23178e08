"""KV-pool accounting: every slot is free, held by the tree, or held by one live request.

Checked at the end of every simulation run (``VariantSim.result``) and, in the tests, before
every scheduler step (``Scheduler.before_step``). Between steps a live request (running, or the
chunked request) owns the KV slots ``req_to_token[row, own_start : seq_len]`` — everything past
the page-aligned part of its prefix that the tree holds — in whole pages: a partly filled last
page counts whole, since no one else can use it. The invariant is

    free pages * page_size + tree tokens + pages held by live requests * page_size == pool size

with no page both free and held, held by two owners, or held by the tree and a request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from radixbench.cache.allocator import unique_pages
from radixbench.cache.interface import PrefixCache
from radixbench.sim.request import Req


class KVAccountingError(AssertionError):
    """The KV pool's slots do not add up (a leak or a double ownership); the message says how."""


@dataclass(frozen=True, slots=True)
class KVAccount:
    """Tokens of the pool by owner (all multiples of ``page_size``): ``free`` (allocator),
    ``tree`` (radix tree), ``requests`` (whole pages held by live requests), ``pool`` (size)."""

    pool: int
    free: int
    tree: int
    requests: int
    live_requests: int


def kv_account(cache: PrefixCache, live: Iterable[Req]) -> KVAccount:
    """Count the pool's tokens by owner and check no page is owned twice.

    ``cache``: the simulation's cache, any ``PrefixCache`` (its ``allocator``,
    ``req_to_token_pool``, ``page_size``, ``held_slots()``, ``total_size()``);
    ``live``: the requests holding KV (running ones and the chunked request). Reads
    ``req_to_token``; mutates nothing. Raises :class:`KVAccountingError` if a request's own
    slots are free, in the tree or shared with another request, if a request holds other than
    ``ceil(seq_len / ps) - own_start / ps`` pages, or if the counts do not add up to the pool.
    """
    alloc, pool, ps = cache.allocator, cache.req_to_token_pool, cache.page_size
    if pool is None:
        raise KVAccountingError("no ReqToTokenPool: request KV cannot be accounted")
    tree_slots = cache.held_slots().to(torch.int64)
    tree_tokens = cache.total_size()
    if tree_slots.numel() != tree_tokens:
        raise KVAccountingError(f"tree holds {tree_slots.numel()} slots for {tree_tokens} tokens")
    if tree_slots.numel() and bool(alloc.is_free[tree_slots].any()):
        raise KVAccountingError("a KV slot is both held by the tree and free")
    tree_pages = unique_pages(tree_slots, ps)  # torch.unique's pages (numpy on the CPU)
    if tree_pages.numel() * ps != tree_tokens:
        raise KVAccountingError(f"tree's {tree_tokens} tokens fill {tree_pages.numel()} pages")
    owner = torch.zeros(alloc.is_free.numel() // ps, dtype=torch.int64, device=alloc.device)
    owner[tree_pages] = -1  # -1 = the tree
    held_pages, n_live = 0, 0
    for req in live:
        n_live += 1
        start = req.cache_protected_len
        row = pool.req_to_token[req.req_pool_idx]
        protected = row[:start].to(torch.int64)
        if protected.numel() and bool((owner[protected // ps] != -1).any()):
            raise KVAccountingError(f"request {req.rid}: its prefix is not held by the tree")
        pages = unique_pages(row[start : req.seq_len].to(torch.int64), ps)
        expect = -(-req.seq_len // ps) - start // ps
        if pages.numel() != expect:
            raise KVAccountingError(
                f"request {req.rid}: holds {pages.numel()} pages for positions "
                f"[{start}, {req.seq_len}), expected {expect}"
            )
        if pages.numel():
            if bool(alloc.is_free[pages * ps].any()):
                raise KVAccountingError(f"request {req.rid}: holds a free page")
            if bool((owner[pages] != 0).any()):
                raise KVAccountingError(
                    f"request {req.rid}: a page it holds is also held by the tree or another "
                    "request"
                )
            owner[pages] = req.rid + 1
        held_pages += pages.numel()
    free = alloc.available_size()
    acct = KVAccount(alloc.size, free, tree_tokens, held_pages * ps, n_live)
    if free + tree_tokens + held_pages * ps != alloc.size:
        raise KVAccountingError(
            f"KV pool does not add up: free {free} + tree {tree_tokens} + requests "
            f"{held_pages * ps} != pool {alloc.size} ({n_live} live requests)"
        )
    return acct
