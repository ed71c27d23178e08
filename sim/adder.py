"""Prefill admission: which waiting requests join the next extend batch.

Modeled on ``PrefillAdder`` of SGLang before 0.5.23 (commit a7ec6b97,
``python/sglang/srt/managers/schedule_policy.py``). sglang 0.5.23 (same file, plus
``PrefillBudget`` in ``sglang/srt/mem_cache/prefill_budget.py``) differs, and radixbench keeps the
older rules (docs/SGLANG-FIDELITY.md): 0.5.23 adds one page per request (``page_size``) to the
admission check (PR #22495) and to every budget update (``PrefillBudget.reserve``); checks a
re-admitted (retracted) request with its remaining ``max_new_tokens - len(output_ids)``, where
radixbench checks ``min(max_new_tokens, clip)`` (both then reserve the latter); applies the
``max_prefill_tokens`` cap per request only when chunked prefill is off; caps a continued chunk
by the remaining KV budget (``available_chunk_tokens``); and returns ``NO_TOKEN`` right after an
admission that used up the KV budget (``budget_state``; here the next candidate's check says
so). The rules kept:

- ``rem_total_tokens = available + evictable - offset``, where ``offset`` starts at the decode
  reservation of the running requests, ``sum(min(remaining_new, clip) * new_token_ratio)``, and
  grows by every admitted request's ``extend + min(max_new_tokens, clip)``. ``evictable`` is the
  tree's unlocked tokens: since locks cover whole root paths, every unlocked node can be freed
  by cascading leaf evictions, so this is space that can really be freed — and the request's own
  matched prefix is locked *before* the count, so it is never counted as free.
- ``rem_input_tokens`` (``max_prefill_tokens``) caps the batch's new tokens (the first request
  is always let through); ``rem_chunk_tokens`` (``chunked_prefill_size``) truncates the request
  that does not fit into a chunk, which becomes the ``chunked_req`` continued first next step.
- Pages (``page_size > 1``): a request's new tokens count rounded up to whole pages
  (``ceil_paged_tokens``) in the input and chunk checks and in every budget update
  (``_update_prefill_budget``); a truncated first chunk is cut to whole pages
  (``rem_chunk_tokens // page_size * page_size``). The KV check ``extend + max_new_tokens <
  rem_total_tokens`` stays in tokens, as SGLang's.
- The prefix is matched with the request's tokens minus the last (at least one token is
  computed), as 0.5.23's ``init_next_round_input`` (``RadixKey.limit``, no copy).
"""

from __future__ import annotations

from typing import Any

from radixbench.cache.interface import MatchResult, PrefixCache
from radixbench.cache.key import RadixKey
from radixbench.sim.config import SimConfig
from radixbench.sim.request import Req

NO_TOKEN, OTHER, CONTINUE = "no_token", "other", "continue"


class PrefillAdder:
    """One admission round. ``running``: the decode batch; ``ratio``: ``new_token_ratio``."""

    def __init__(
        self,
        cfg: SimConfig,
        cache: PrefixCache,
        running: list[Req],
        ratio: float,
        remaining: list[int] | None = None,
        tiers: Any = None,
    ) -> None:
        """``remaining``: output tokens each running request has still to sample, in batch
        order (default: read from ``running``'s ``output_len - len(output_ids)``); ``tiers``:
        the scheduler's :class:`~radixbench.sim.tiers.TierDriver` when the cache has HiCache
        tiers (host hits are loaded back, :meth:`add_one_req`)."""
        self.cfg, self.cache, self.tiers = cfg, cache, tiers
        clip = cfg.clip_max_new_tokens
        if remaining is None:
            remaining = [r.output_len - len(r.output_ids) for r in running]
        if remaining and max(remaining) > clip:
            remaining = [min(left, clip) for left in remaining]
        # sum(min(left, clip) * ratio ...), the same float additions in the same order
        self.offset = sum(map(ratio.__mul__, remaining))
        self.rem_input = cfg.max_prefill_tokens
        self.rem_chunk = cfg.chunked_prefill_size
        self.page_size = cfg.page_size
        self.can_run: list[Req] = []
        self.new_chunked: Req | None = None

    def rem_total(self) -> float:
        c = self.cache
        return c.allocator.available_size() + c.evictable_size() - self.offset

    def ceil_paged(self, tokens: int) -> int:
        """``tokens`` rounded up to whole pages (``PrefillAdder.ceil_paged_tokens``)."""
        return -(-tokens // self.page_size) * self.page_size

    def _budget(self, extend: int, new_tokens: int) -> None:
        """``PrefillAdder._update_prefill_budget`` before 0.5.23: the extend counts in whole
        pages (0.5.23 also reserves one more page per request)."""
        extend = self.ceil_paged(extend)
        self.offset += extend + new_tokens
        self.rem_input -= extend
        if self.rem_chunk is not None:
            self.rem_chunk -= extend

    def has_budget(self) -> bool:
        """Whether another request could still join (prefill and chunk budgets left)."""
        return self.rem_input > 0 and (self.rem_chunk is None or self.rem_chunk > 0)

    def add_chunked_req(self, req: Req) -> Req | None:
        """Continue ``req``'s chunked prefill (``PrefillAdder.add_chunked_req`` before 0.5.23;
        0.5.23 also caps the chunk by the remaining KV budget); returns it while chunks remain,
        else None. Its prefix stays locked from the previous chunk."""
        full = req.full_ids()
        extend = len(full) - req.prefix_indices.numel()
        truncated = self.rem_chunk is not None and extend > self.rem_chunk
        if truncated:
            assert self.rem_chunk is not None
            extend = self.rem_chunk
        req.fill_ids = full[: req.prefix_indices.numel() + extend] if truncated else full
        self.can_run.append(req)
        new = 0 if truncated else min(req.output_len, self.cfg.clip_max_new_tokens)
        self._budget(extend, new)
        return req if truncated else None

    def add_one_req(self, req: Req) -> str:
        """Try to admit ``req``: match its prefix, lock it, check the budgets; on success it is
        in ``can_run`` with ``prefix_indices``/``last_node``/``fill_ids`` set and its prefix
        locked. Returns ``CONTINUE``, ``NO_TOKEN`` (KV budget) or ``OTHER`` (token budgets)."""
        cache = self.cache
        full = req.full_ids()
        # As SGLang (``_compute_max_prefix_len``), at least one token is always computed (it
        # yields the logits).
        match = cache.match_prefix(RadixKey(full, req.extra_key, limit=len(full) - 1))
        prefix = match.prefix_len
        host = match.host_hit_length if self.tiers is not None else 0
        extend = len(full) - prefix - host  # tokens computed: a host hit is loaded instead
        input_tokens = self.ceil_paged(extend)
        total = len(full) - prefix + min(req.output_len, self.cfg.clip_max_new_tokens)
        if total >= self.rem_total():
            return NO_TOKEN
        if input_tokens >= self.rem_input and self.can_run:
            return OTHER
        lock = cache.lock(match.last_node)
        if total >= self.rem_total():  # the lock took the prefix out of `evictable`
            cache.unlock(lock)
            return NO_TOKEN
        device = prefix
        if self.tiers is not None:
            match, lock, prefix = self._load_back(match, lock)
            if prefix - device < host:  # not loaded: the host hit is recomputed
                extend = len(full) - prefix
                input_tokens = self.ceil_paged(extend)
                if input_tokens >= self.rem_input and self.can_run:
                    cache.unlock(lock)
                    return OTHER
        chunked = self.rem_chunk is not None and input_tokens > self.rem_chunk
        trunc = 0
        if chunked:
            assert self.rem_chunk is not None
            trunc = self.rem_chunk // self.page_size * self.page_size  # whole pages
            if trunc <= 0:  # less than a page of chunk budget left
                cache.unlock(lock)
                return OTHER
        req.prefix_indices = match.device_indices
        req.last_node = match.last_node
        req.lock = lock
        req.cache_protected_len = prefix  # 0.5.23: the tree owns the matched prefix
        if req.prefix_hit_tokens < 0:
            req.prefix_hit_tokens = prefix
            if self.tiers is not None:
                self.tiers.admitted(req, device, prefix - device)
        if not chunked:
            req.fill_ids = full
            self.can_run.append(req)
            self._budget(extend, min(req.output_len, self.cfg.clip_max_new_tokens))
        else:
            req.fill_ids = full[: prefix + trunc]
            self.can_run.append(req)
            self.new_chunked = req
            self._budget(trunc, 0)
        if not self.has_budget():
            return OTHER
        return CONTINUE

    def _load_back(self, match: Any, lock: Any) -> tuple[Any, Any, int]:
        """sglang 0.5.23's load-back at admission (``schedule_policy.py:1470-1579``): with the
        match pinned, ``init_load_back`` (``TierOps.load_back``); when it loaded, the request
        locks the new last node before the pin is released (``_commit_prefill_admission``
        inside ``_lock_node``). Returns ``(match, the request's lock, prefix tokens)``."""
        cache = self.cache
        prefix, node, indices = self.tiers.tiers.load_back(match)
        if prefix == match.prefix_len:
            return match, lock, prefix
        new_lock = cache.lock(node)
        cache.unlock(lock)
        return MatchResult(indices, node, prefix), new_lock, prefix
