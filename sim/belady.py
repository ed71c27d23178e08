"""Belady's bound: the prefix hit rate of optimal offline eviction at a given KV capacity.

The model (the sequential replay of :mod:`radixbench.sim.replay`, request by request in arrival
order, the whole KV pool serving as cache): request ``j`` hits the cached part of its first
``input_length - 1`` prompt tokens, rounded down to whole pages (as the simulator and SGLang: the
last prompt token is always computed); then its prompt is inserted and the cache is cut back to
``capacity_tokens // page_size`` pages. A page is identified by the token path from the root to
its last token, so request ``j`` *hits* page ``k`` of its path when that page is cached and
``(k + 1) * page_size <= input_length - 1``. Every eviction policy of a radix cache picks, after
each request, a set of at most ``C`` cached pages out of what was cached plus what the request
inserted; its hits at the next request are the pages of that request's path in the set.

Optimal offline choice (Belady's MIN, furthest next use): after each request keep the ``C`` pages
whose next hit comes soonest. For unit-size pages chosen freely from "cached + just inserted"
this is optimal (the classical exchange argument), so it bounds every policy of this model —
radixbench's ``RadixCache`` under any eviction policy included, whose leaf evictions are one such
choice — at page granularity. Ties are broken deepest page first, so the kept set is always
prefix-closed: it *is* a radix tree, reached by evicting, from the leaf with the furthest next
use, its deepest pages. For a radix cache this is "evict the evictable leaf whose next use (the
next request whose hit would include the leaf's first page) is furthest in the future", with
leaves split at the page where the next use changes; a cache that must evict whole nodes (as
SGLang's and radixbench's) can only do worse. It is a bound *under this model only*: the
simulator shares the pool with running requests (less room for the cache) and admits requests in
batches (a request cannot hit what a request admitted in the same batch is still computing), so
its hit rate is normally lower still; a scheduler that reorders requests (``lpm``) serves them in
another order than the one bounded here.

Computed on hash blocks, never on tokens: the same trie over hash chains as
``workloads.ceiling`` (equal hash prefixes give equal token prefixes; distinct blocks give
distinct tokens up to a ``1 / vocab_size`` chance per block boundary, as there). The pages of one
trie node (one block of a chain) are grouped into *segments*, maximal runs of pages that the same
requests insert and hit (a node splits only where some request's prompt ends inside it), and a
chain of segments that exactly the same requests insert and hit is merged into one (path
compression: a shared system prompt of many blocks is one segment), so MIN touches a few segments
per request instead of one page per token: about 2 s on the whole Mooncake conversation trace
(12,031 requests, 1.4e8 prompt tokens), under 1 s on 5,000 requests. Output tokens are left
out: they never reappear in a prompt (synthetic, unique per request), so MIN drops them first and
they cannot change the bound.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from radixbench.workloads.tokens import HashBlocks
from radixbench.workloads.trace import MOONCAKE_BLOCK_SIZE, TraceRequest

__all__ = ["BeladyResult", "belady_bound", "belady_hits"]


def _block_size(r: TraceRequest) -> int:
    h = r.hash_ids
    return h.block_size if isinstance(h, HashBlocks) else MOONCAKE_BLOCK_SIZE


def _pairs(requests: Sequence[TraceRequest], page_size: int) -> tuple[np.ndarray, ...]:
    """One row per (request, prompt block) holding a page end: request index, trie node of the
    block's hash chain, first page of the node, and the node-relative page counts the request
    inserts and hits there. Rows in request order, blocks root to leaf; int64 arrays."""
    p = page_size
    n = np.array([r.input_length for r in requests], dtype=np.int64)
    bs = np.array([_block_size(r) for r in requests], dtype=np.int64)
    nb = np.array(
        [min(len(r.hash_ids), -(-r.input_length // b)) for r, b in zip(requests, bs.tolist())],
        dtype=np.int64,
    )
    req = np.repeat(np.arange(len(requests), dtype=np.int64), nb)
    blk = np.arange(len(req), dtype=np.int64) - np.repeat(np.cumsum(nb) - nb, nb)
    hashes = np.fromiter(
        (h for r, k in zip(requests, nb.tolist()) for h in r.hash_ids[:k]),
        dtype=np.int64,
        count=len(req),
    )
    # trie node of each row: unique (parent node, hash) per depth; a root row's parent is
    # -1 - block size, so workloads of two block sizes never share a node
    node = np.empty(len(req), dtype=np.int64)
    order = np.argsort(blk, kind="stable")
    bounds = np.searchsorted(blk[order], np.arange(int(blk.max(initial=-1)) + 2))
    next_id = 0
    small = len(req) < 2**30 and int(hashes.max(initial=0)) < 2**31 and int(bs.max()) < 2**30
    for d in range(len(bounds) - 1):
        rows = order[bounds[d] : bounds[d + 1]]
        parent = -1 - bs[req[rows]] if d == 0 else node[rows - 1]
        if small:  # one int64 key per row: (parent + 2**30) << 32 | hash
            _, inv = np.unique(((parent + 2**30) << 32) | hashes[rows], return_inverse=True)
        else:
            pairs = np.stack([parent, hashes[rows]], axis=1)
            _, inv = np.unique(pairs, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        node[rows] = next_id + inv
        next_id += int(inv.max(initial=-1)) + 1
    bsr = bs[req]
    lo = blk * bsr // p  # pages whose last token lies in block b: [lo, lo + width)
    width = (blk + 1) * bsr // p - lo
    ins = np.clip(n[req] // p - lo, 0, width)
    hit = np.clip(np.maximum(n[req] - 1, 0) // p - lo, 0, width)
    keep = ins > 0
    return req[keep], node[keep], lo[keep], ins[keep], hit[keep]


def _events(requests: Sequence[TraceRequest], page_size: int) -> tuple[list[int], ...]:
    """MIN's input: one event per (request, segment it inserts), in request order, segments
    root to leaf. Returns ``(offsets, segment, hit, next_hit, weight, depth)``: request ``j``'s
    events are ``offsets[j]:offsets[j + 1]``; ``hit`` (0/1) whether the request hits the
    segment; ``next_hit`` the next request that hits it (``len(requests)`` if none); per
    segment its ``weight`` (pages) and ``depth`` (index of its first page on the path)."""
    req, node, lo, ins, hit = _pairs(requests, page_size)
    span = int(ins.max(initial=0)) + 1
    # segments: per node, the pages between consecutive thresholds (a request's ins or hit)
    keys = np.unique(np.concatenate([node * span + ins, (node * span + hit)[hit > 0]]))
    seg_node, seg_end = keys // span, keys % span
    seg_lo = np.zeros(len(keys), dtype=np.int64)
    same = seg_node[1:] == seg_node[:-1]
    seg_lo[1:][same] = seg_end[:-1][same]
    node_lo = np.zeros(int(node.max(initial=-1)) + 1, dtype=np.int64)
    node_lo[node] = lo
    weight = seg_end - seg_lo
    depth = node_lo[seg_node] + seg_lo
    first = np.searchsorted(keys, node * span, side="left")
    n_ins = np.searchsorted(keys, node * span + ins, side="right") - first
    n_hit = np.searchsorted(keys, node * span + hit, side="right") - first
    # expand rows into events
    e_req = np.repeat(req, n_ins)
    within = np.arange(len(e_req), dtype=np.int64) - np.repeat(np.cumsum(n_ins) - n_ins, n_ins)
    e_seg = np.repeat(first, n_ins) + within
    e_hit = within < np.repeat(n_hit, n_ins)
    e_req, e_seg, e_hit, weight = _merge_chains(e_req, e_seg, e_hit, weight)
    # the next request after this one that hits the segment
    n_req = len(requests)
    hk = np.sort(e_seg[e_hit] * n_req + e_req[e_hit])
    pos = np.searchsorted(hk, e_seg * n_req + e_req, side="right")
    nxt = np.full(len(e_seg), n_req, dtype=np.int64)
    ok = pos < len(hk)
    ok[ok] = hk[pos[ok]] // n_req == e_seg[ok]
    nxt[ok] = hk[pos[ok]] % n_req
    offsets = np.searchsorted(e_req, np.arange(n_req + 1))
    return (
        offsets.tolist(),
        e_seg.tolist(),
        e_hit.astype(np.int64).tolist(),
        nxt.tolist(),
        weight.tolist(),
        depth.tolist(),
    )


def _merge_chains(
    e_req: np.ndarray, e_seg: np.ndarray, e_hit: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Path compression: a segment that exactly the same requests insert and hit as its parent
    segment (the one before it on every path through it) is merged into the parent, whose
    weight grows by its pages; its events go. Counts suffice: the requests through a segment
    are a subset of those through its parent. A long prefix shared by many requests (a system
    prompt of many blocks) becomes one segment, so MIN touches it once per request, not once
    per block. Returns the kept events and the new weights (0 for merged segments); a kept
    segment keeps its depth (its first page, the top of the merged run)."""
    n_seg = len(weight)
    n_ins = np.bincount(e_seg, minlength=n_seg)
    n_hit = np.bincount(e_seg[e_hit], minlength=n_seg)
    has_prev = np.zeros(len(e_seg), dtype=bool)
    has_prev[1:] = e_req[1:] == e_req[:-1]
    parent = np.full(n_seg, -1, dtype=np.int64)
    parent[e_seg[has_prev]] = e_seg[np.flatnonzero(has_prev) - 1]
    ok = parent >= 0
    merge = np.zeros(n_seg, dtype=bool)
    merge[ok] = (n_ins[ok] == n_ins[parent[ok]]) & (n_hit[ok] == n_hit[parent[ok]])
    rep = np.where(merge, parent, np.arange(n_seg, dtype=np.int64))
    while True:  # pointer jumping to the top of each merged run
        up = rep[rep]
        if np.array_equal(up, rep):
            break
        rep = up
    merged = np.bincount(rep, weights=weight, minlength=n_seg).astype(np.int64)
    keep = ~merge[e_seg]
    return e_req[keep], e_seg[keep], e_hit[keep], merged


def belady_hits(
    requests: Sequence[TraceRequest], capacity_tokens: int, page_size: int = 1
) -> np.ndarray:
    """Per request (in the given order): prompt tokens hit under optimal offline eviction.

    Returns int64 ``[len(requests)]`` token counts, each a multiple of ``page_size`` and at most
    ``input_length - 1``. ``capacity_tokens``: the KV pool (the bound keeps
    ``capacity_tokens // page_size`` whole pages). The model, what it bounds and how it is
    computed: see the module docstring. Mutates nothing. Raises ``ValueError`` for a
    non-positive capacity or page size.
    """
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1 token, got {page_size}")
    if capacity_tokens < 1:
        raise ValueError(f"capacity must be >= 1 token, got {capacity_tokens}")
    out = np.zeros(len(requests), dtype=np.int64)
    if not requests:
        return out
    cap = capacity_tokens // page_size
    offsets, e_seg, e_hit, e_next, weight, depth = _events(requests, page_size)
    never = len(requests)
    kept = [0] * len(weight)  # pages of each segment in the cache
    version = [0] * len(weight)
    heap: list[tuple[int, int, int, int]] = []  # (-next hit, -depth, segment, version)
    push, pop = heapq.heappush, heapq.heappop
    total = 0
    for j in range(len(requests)):
        hit = 0
        for k in range(offsets[j], offsets[j + 1]):
            s = e_seg[k]
            if e_hit[k]:
                hit += kept[s]
            version[s] += 1
            nxt = e_next[k]
            if nxt == never:  # never hit again: keeping it cannot help
                total -= kept[s]
                kept[s] = 0
                continue
            total += weight[s] - kept[s]  # inserted: back in full
            kept[s] = weight[s]
            push(heap, (-nxt, -depth[s], s, version[s]))
        out[j] = hit * page_size
        while total > cap:  # evict the furthest next hit first, deepest pages first
            _, _, s, ver = heap[0]
            if ver != version[s] or not kept[s]:
                pop(heap)
                continue
            cut = min(kept[s], total - cap)
            kept[s] -= cut
            total -= cut
            if not kept[s]:
                pop(heap)
        if len(heap) > 2 * len(weight) + 1024:  # drop stale entries now and then
            heap = [e for e in heap if e[3] == version[e[2]] and kept[e[2]]]
            heapq.heapify(heap)
    return out


@dataclass(frozen=True)
class BeladyResult:
    """``hits``: int64 ``[n]`` tokens hit per request; ``input_tokens``: int64 ``[n]``."""

    hits: np.ndarray
    input_tokens: np.ndarray
    capacity_tokens: int
    page_size: int

    def rate(self, start: int = 0) -> float:
        """Hit tokens / input tokens over requests ``start`` onward (NaN without input)."""
        tot = int(self.input_tokens[start:].sum())
        return float(self.hits[start:].sum()) / tot if tot else float("nan")


def belady_bound(
    requests: Sequence[TraceRequest], capacity_tokens: int, page_size: int = 1
) -> dict[str, float | int]:
    """``{"all", "last_half", "kv_capacity_tokens", "page_size"}``: Belady's hit rate (hit
    tokens / input tokens) over all requests and over the second half (requests ``len // 2``
    onward), as ``workloads.ceiling.hit_ceiling`` reports the infinite-cache ceiling, plus the
    capacity (tokens) and page size it was computed at. NaN rates without input tokens. Raises
    ``ValueError`` as :func:`belady_hits`."""
    hits = belady_hits(requests, capacity_tokens, page_size)
    res = BeladyResult(
        hits,
        np.array([r.input_length for r in requests], dtype=np.int64),
        capacity_tokens,
        page_size,
    )
    return {
        "all": res.rate(0),
        "last_half": res.rate(len(requests) // 2),
        "kv_capacity_tokens": int(capacity_tokens),
        "page_size": int(page_size),
    }
