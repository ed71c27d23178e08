"""Sequential cache replay: each eviction policy's prefix hit rate on a whole trace, no scheduler.

Request by request in arrival order, one cache per eviction policy (radixbench's real
``RadixCache``, persistent-heap evictor, memcmp matcher — every evictor and matcher gives the same
victims and matches, only faster), over a KV pool of ``capacity_tokens`` slots
(``make_allocator``; whole pages when ``page_size > 1``):

1. ``match_prefix`` of the prompt's first ``input_length - 1`` tokens: the request's hit, in
   whole pages (as the simulator's admission, ``sim.adder``: SGLang always computes the last
   prompt token);
2. lock the matched path, evict the shortfall of free slots for the request's new tokens
   (``RadixCache.evict``, the policy's order; as the simulator's ``evict_if_needed``), allocate
   them, unlock after the inserts;
3. insert as the simulator does for a request that runs alone: the prompt (the checkpoint after
   its prefill), then — unless ``include_outputs`` is off — prompt + output tokens but the last
   sampled one, followed by the prompt again at priority + 1, which splits the output tail into a
   leaf of its own (``RadixCache.checkpoint`` / ``release`` of sglang 0.5.23). Output tokens are
   included by default because the simulator keeps them in the tree, where they take KV capacity;
   they never produce a hit (synthetic, unique per request). A request too long to fit once
   everything else is evicted is not inserted (``not_cached``).

What it leaves out, on purpose: concurrency (the simulator's pool also holds the running
requests' KV and a request cannot hit what a request in the same batch is still computing, so
the simulator's hit rate is normally lower), chunk boundaries (the simulator's chunked prefill
splits nodes every chunk), the partial last page of a request (its KV is the request's and freed
on finish) and retractions. Tokens are those of the simulator (``block_tokens`` of the hash
blocks, ``output_tokens`` of the request id).

Counting, compared with block-level simulators (a replay of the Mooncake trace at its 512-token
hash blocks; engines that cache whole hashed blocks, as vLLM's prefix cache does with 16-token
blocks): those count whole blocks: a prompt's partial last block is never cached nor hit, a hit is
the number of leading blocks cached times the block size, and the capacity is a number of blocks,
often over a time window of the trace whose cache starts cold. Here the unit is the
token (or the page, ``page_size``): a partial last block is cached and hit token by token, a hit
is capped at ``input_length - 1`` tokens, and the capacity is KV slots. The rate is hit tokens /
prompt tokens over every request of the selection (the whole trace unless a request count or
time window selects part of it; no warm-up is excluded; the "last half" column is the warm-cache
rate). :func:`block_ceiling` gives the infinite-cache ceiling counted the block-level way, to
put the two countings side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter

import numpy as np
import pandas as pd
import torch

from radixbench.cache.key import RadixKey
from radixbench.cache.paged_allocator import make_allocator
from radixbench.cache.policy import POLICIES
from radixbench.cache.radix_cache import CacheConfig
from radixbench.cache.registry import make_cache
from radixbench.sim.belady import belady_hits
from radixbench.workloads.ceiling import hit_rates, prefix_hits
from radixbench.workloads.tokens import HashBlocks, block_tokens, output_tokens
from radixbench.workloads.trace import MOONCAKE_BLOCK_SIZE, TraceRequest

__all__ = ["PolicyReplay", "ReplayResult", "block_ceiling", "replay"]

#: The evictor and matcher of the replay's caches: the fastest; all give the same results.
EVICTOR, MATCHER = "persistent-heap", "memcmp"


class PolicyReplay:
    """One (implementation, policy)'s cache and counters, fed one request at a time by
    :func:`replay`.

    ``impl``: a registered implementation's spec (``radixbench.cache.registry``; default
    radixbench's cache with :data:`EVICTOR` / :data:`MATCHER`), ``label`` its label; ``name``
    the run's column in the per-request table (default: the policy; :func:`replay` names runs
    ``<label> <policy>`` when implementations are given). ``hits``: int64 ``[n]`` tokens hit
    per request; ``wall_s``: seconds spent in ``step``; ``evict_calls`` / ``evicted_tokens``:
    evictions made; ``not_cached``: requests too long for the pool. Raises ``ValueError`` for
    an unknown policy, an implementation that cannot run it, or a pool smaller than one page.
    """

    def __init__(
        self,
        policy: str,
        capacity_tokens: int,
        page_size: int,
        n: int,
        impl: str = "radixbench",
        label: str = "radixbench",
        name: str | None = None,
    ) -> None:
        self.policy, self.impl, self.label = policy, impl, label
        self.name = policy if name is None else name
        self.allocator = make_allocator(capacity_tokens, page_size, "cpu", check_repeats=False)
        config = CacheConfig(page_size, EVICTOR, MATCHER, policy)
        self.cache = make_cache(impl, None, self.allocator, config)
        self.page = page_size
        self.hits = np.zeros(n, dtype=np.int64)
        self.wall_s = 0.0
        self.evict_calls = 0
        self.evicted_tokens = 0
        self.not_cached = 0

    def step(self, j: int, prompt: RadixKey, full: RadixKey) -> None:
        """Replay request ``j``: ``prompt`` its tokens, ``full`` prompt + outputs but the last
        (``full is prompt`` when outputs are left out). Mutates the cache, the pool and the
        counters (see the module docstring for the steps)."""
        t0 = perf_counter()
        cache, alloc, page = self.cache, self.allocator, self.page
        n_prompt = len(prompt) // page * page
        n_full = len(full) // page * page
        match = cache.match_prefix(prompt[: len(prompt) - 1])
        hit = match.prefix_len
        self.hits[j] = hit
        need = n_full - hit
        lock = cache.lock(match.last_node)
        short = need - alloc.available_size()
        if short > 0:
            self.evict_calls += 1
            self.evicted_tokens += cache.evict(short).num_evicted
        new = alloc.alloc(need)
        if new is None:
            self.not_cached += 1
        else:
            values = torch.cat((match.device_indices, new)) if hit else new
            self._insert(prompt, values, n_prompt, full, n_full, hit)
        cache.unlock(lock)
        self.wall_s += perf_counter() - t0

    def _insert(
        self,
        prompt: RadixKey,
        values: torch.Tensor,
        n_prompt: int,
        full: RadixKey,
        n_full: int,
        hit: int,
    ) -> None:
        """The simulator's inserts for one request; frees the slots of tokens the tree held
        already (``values[hit:cached]``)."""
        cache, alloc = self.cache, self.allocator
        if n_prompt:
            cached = cache.insert(prompt, values[:n_prompt], 0, 0)  # checkpoint after prefill
            if cached > hit:
                alloc.free(values[hit:cached].clone())
        if n_full > n_prompt:  # release(checkpoint=True) on finish
            cached = cache.insert(full, values[:n_full], 0, n_prompt)
            if cached > n_prompt:
                alloc.free(values[n_prompt:cached].clone())
            if n_prompt:
                cache.insert(prompt, values[:n_prompt], 1, n_prompt)


@dataclass(frozen=True)
class ReplayResult:
    """``requests``: one row per request (``rid``, ``input_len``, ``output_len``, then hit
    tokens per policy, ``belady`` and ``ceiling``); ``summary``: one row per policy, then
    ``belady`` and ``ceiling`` (see :func:`summary_frame`); the settings it ran at."""

    requests: pd.DataFrame
    summary: pd.DataFrame
    capacity_tokens: int
    page_size: int
    include_outputs: bool
    block_ceiling: dict[str, float]
    tokens_s: float


def block_ceiling(requests: Sequence[TraceRequest]) -> dict[str, float]:
    """The infinite-cache ceiling counted as block-level simulators count: a request hits the
    leading *whole* hash blocks it shares with any earlier prompt's whole blocks (a partial last
    block is never cached nor hit; no ``input - 1`` cap). ``{"all", "last_half"}`` fractions of
    prompt tokens (NaN without prompt tokens)."""
    seen: set[tuple[int, ...]] = set()
    hits = []
    for r in requests:
        h = r.hash_ids
        bs = h.block_size if isinstance(h, HashBlocks) else MOONCAKE_BLOCK_SIZE
        whole = tuple(h[: r.input_length // bs])
        k = 0
        while k < len(whole) and whole[: k + 1] in seen:
            k += 1
        hits.append(k * bs)
        seen.update(whole[:i] for i in range(k + 1, len(whole) + 1))
    return hit_rates(hits, [r.input_length for r in requests])


def _rates(hits: np.ndarray, lens: np.ndarray) -> tuple[float, float]:
    half = len(lens) // 2
    out = []
    for a in (0, half):
        tot = int(lens[a:].sum())
        out.append(float(hits[a:].sum()) / tot if tot else float("nan"))
    return out[0], out[1]


def summary_frame(
    requests: pd.DataFrame,
    policies: Sequence[PolicyReplay],
    belady_s: float,
    ceiling_s: float | None = None,
) -> pd.DataFrame:
    """One row per run (implementation and policy), then ``belady`` and ``ceiling``:
    ``hit_rate`` / ``hit_rate_last_half`` (fractions of prompt tokens), ``vs_lru_pts``
    (percentage points above the first LRU row's rate, NaN without one), ``of_belady`` (rate /
    Belady's), ``evict_calls``, ``evicted_tokens``, ``not_cached``, ``wall_s`` (seconds of this
    row's own work, ``ceiling_s`` the ceiling's; the token ids, made once for all runs, are not
    in it; NaN only where a time was not given) and ``impl`` (the
    implementation's label; empty for the bounds)."""
    lens = requests["input_len"].to_numpy()
    rows: list[tuple[str, float, float, int | None, int | None, int | None, float | None]] = []
    for p in policies:
        all_, half = _rates(requests[p.name].to_numpy(), lens)
        rows.append((p.policy, all_, half, p.evict_calls, p.evicted_tokens, p.not_cached, p.wall_s))
    b_all, b_half = _rates(requests["belady"].to_numpy(), lens)
    c_all, c_half = _rates(requests["ceiling"].to_numpy(), lens)
    rows.append(("belady", b_all, b_half, None, None, None, belady_s))
    rows.append(("ceiling", c_all, c_half, None, None, None, ceiling_s))
    df = pd.DataFrame(
        rows,
        columns=[
            "policy",
            "hit_rate",
            "hit_rate_last_half",
            "evict_calls",
            "evicted_tokens",
            "not_cached",
            "wall_s",
        ],
    )
    lru = df.loc[df["policy"] == "lru", "hit_rate"]
    base = float(lru.iloc[0]) if len(lru) else float("nan")
    df.insert(3, "vs_lru_pts", 100.0 * (df["hit_rate"] - base))
    df.insert(4, "of_belady", df["hit_rate"] / b_all if b_all else float("nan"))
    for col in ("evict_calls", "evicted_tokens", "not_cached"):
        df[col] = df[col].astype("Int64")
    df["wall_s"] = df["wall_s"].astype("float64")
    df["impl"] = [p.label for p in policies] + ["", ""]
    return df


def replay(
    requests: Sequence[TraceRequest],
    capacity_tokens: int,
    page_size: int = 1,
    policies: Sequence[str] | None = None,
    include_outputs: bool = True,
    on_request: Callable[[], None] | None = None,
    impls: Sequence[tuple[str, str]] = (),
) -> ReplayResult:
    """Replay ``requests`` (arrival order) through one cache per policy (default: every
    registered policy, ``cache.policy.POLICIES``), and compute Belady's bound
    (``sim.belady``) and the infinite-cache ceiling (``workloads.ceiling``) on them.

    ``capacity_tokens``: KV slots of each pool; ``page_size``: tokens per page (a power of
    two); ``include_outputs``: insert the output tokens as the simulator does (see the module
    docstring); ``on_request``: called after each request (progress); ``impls``: ``(spec,
    label)`` of the implementations to replay each policy on (default radixbench's cache: a
    policy patch of SGLang's, e.g., beside upstream). The token ids of a request
    are made once and fed to every policy in turn; torch runs on one intra-op thread meanwhile
    (restored after). Raises ``ValueError`` for an unknown policy,
    an empty request list or a pool smaller than one page.
    """
    names = list(POLICIES) if policies is None else list(policies)
    for name in names:
        if name not in POLICIES:
            raise ValueError(f"unknown eviction policy {name!r}; known: {', '.join(POLICIES)}")
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"policies must be distinct and non-empty, got {names}")
    if not requests:
        raise ValueError("the replay needs at least one request")
    n = len(requests)
    pairs = list(impls) if impls else [("radixbench", "radixbench")]
    runs = [
        PolicyReplay(
            name, capacity_tokens, page_size, n, spec, label, f"{label} {name}" if impls else None
        )
        for spec, label in pairs
        for name in names
    ]
    tokens_s = 0.0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensor ops: thread hand-offs would cost more than they do
    try:
        for j, r in enumerate(requests):
            t0 = perf_counter()
            ids = block_tokens(r.hash_ids, r.input_length)
            prompt = RadixKey(ids)
            full = prompt
            if include_outputs and r.output_length > 1:
                full = RadixKey(ids + output_tokens(r.rid, r.output_length - 1))
            tokens_s += perf_counter() - t0
            for run in runs:
                run.step(j, prompt, full)
            if on_request is not None:
                on_request()
    finally:
        torch.set_num_threads(threads)
    t0 = perf_counter()
    belady = belady_hits(requests, capacity_tokens, page_size)
    belady_s = perf_counter() - t0
    t0 = perf_counter()
    ceiling = np.asarray(prefix_hits(requests), dtype=np.int64) // page_size * page_size
    ceiling_s = perf_counter() - t0
    table = pd.DataFrame(
        {
            "rid": np.array([r.rid for r in requests], dtype=np.int64),
            "input_len": np.array([r.input_length for r in requests], dtype=np.int64),
            "output_len": np.array([r.output_length for r in requests], dtype=np.int64),
            **{run.name: run.hits for run in runs},
            "belady": belady,
            "ceiling": ceiling,
        }
    )
    return ReplayResult(
        table,
        summary_frame(table, runs, belady_s, ceiling_s),
        capacity_tokens,
        page_size,
        include_outputs,
        block_ceiling(requests),
        tokens_s,
    )
