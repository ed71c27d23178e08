"""The radix prefix cache.

Mirrors ``RadixCache`` of sglang 0.5.23 (``sglang/srt/mem_cache/radix_cache.py``): same tree
shape, same splits, same lock accounting (``evictable_size_`` / ``protected_size_``), same
``hit_count`` / ``priority`` / access-time bookkeeping, same request paths (``checkpoint`` after
each extend, release on finish and retraction). The clock is injected: it is read exactly where
SGLang reads ``time.monotonic()``, so under one deterministic clock both trees hold the same
timestamps (the differential tests against sglang 0.5.23 run both on one counter). The prefix
compare and the eviction order are pluggable (``Matcher``, ``Evictor`` + ``EvictionPolicy``).
Every difference from 0.5.23 that stays on purpose is listed in ``docs/SGLANG-FIDELITY.md``.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable

import torch
from torch import Tensor

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig
from radixbench.cache.evictor import make_evictor
from radixbench.cache.interface import (
    EvictResult,
    MatchResult,
    OpTimer,
    TierOps,
)
from radixbench.cache.key import RadixKey, child_key
from radixbench.cache.kv_recorder import KVEventRecorder
from radixbench.cache.locks import LockOps
from radixbench.cache.matcher import make_matcher
from radixbench.cache.node import TreeNode
from radixbench.cache.policy import make_policy
from radixbench.cache.requests import RequestOps
from radixbench.cache.tree_view import TreeView

__all__ = ["RadixCache", "counter_clock"]


def counter_clock(start: int = 1) -> Callable[[], int]:
    """A deterministic clock: returns ``start, start + 1, ...`` on successive calls."""
    return itertools.count(start).__next__


class RadixCache(TreeView, LockOps, RequestOps):
    """A radix tree of token prefixes whose nodes hold KV-slot indices.

    Sizes (tokens): ``evictable_size()`` = tokens in nodes with ``lock_ref == 0``;
    ``protected_size()`` = tokens in locked nodes; ``total_size()`` = their sum. The root holds no
    tokens and is permanently locked (``lock_ref == 1``).

    ``clock``: called where SGLang calls ``time.monotonic()`` (twice per new node: access then
    creation time; once per match and per insert); must return ints that never decrease
    (the packed heaps need ints). Default: ``counter_clock()``, so runs are reproducible.
    """

    #: one tier (``PrefixCache.tiers``); radixbench's cache with HiCache is ``TieredRadixCache``
    tiers: TierOps | None = None

    def __init__(
        self,
        req_to_token_pool: ReqToTokenPool | None,
        token_to_kv_pool_allocator: TokenToKVPoolAllocator,
        config: CacheConfig | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.config = config or CacheConfig()
        self.page_size = self.config.page_size
        self.req_to_token_pool = req_to_token_pool
        self.allocator = token_to_kv_pool_allocator
        self.device = token_to_kv_pool_allocator.device
        self.matcher = make_matcher(self.config.matcher)
        self.policy = make_policy(self.config.policy, dict(self.config.policy_config))
        self.tlru = self.policy.needs_tlru_lengths
        self.evictor = make_evictor(self.config.evictor, self.policy)
        self.clock = clock or counter_clock()
        self.served_split = self.config.split_rule == "served"
        self._empty = torch.empty((0,), dtype=torch.int64, device=self.device)
        #: the KV-event recorder (``config.kv_events``), ``None`` with events off
        self.kv_events: KVEventRecorder | None = None
        if self.config.kv_events is not None:
            self.kv_events = KVEventRecorder(self.page_size, self.config.kv_events)
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Drop the whole tree (KV slots are *not* freed; the caller clears the allocator).
        Reads the clock twice (the new root), as SGLang ``reset``; with KV events on, queues
        one ``AllBlocksCleared`` (also at construction, as sglang 0.5.23's
        ``UnifiedRadixCache.reset``)."""
        self._next_id = 0
        self.root = self._new_node(RadixKey(()), self._empty, None, priority=-(2**62))
        self.root.lock_ref = 1
        self.evictable_size_ = 0
        self.protected_size_ = 0
        self.num_nodes = 0  # excluding the root
        self.num_evictable_leaves = 0
        self.evictor.reset()
        if self.kv_events is not None:
            self.kv_events.record_all_cleared()

    def _new_node(
        self, key: RadixKey, value: torch.Tensor, parent: TreeNode | None, priority: int = 0
    ) -> TreeNode:
        clock = self.clock
        access = clock()  # SGLang TreeNode.__init__: last_access_time, then creation_time
        node = TreeNode(self._next_id, key, value, parent, access, clock(), priority)
        self._next_id += 1
        return node

    def _refresh(self, node: TreeNode) -> None:
        """Recompute ``node.evictable`` and tell the evictor when it flips."""
        evictable = node.lock_ref == 0 and not node.children and node.parent is not None
        if evictable is not node.evictable:
            node.evictable = evictable
            self.num_evictable_leaves += 1 if evictable else -1
            self.evictor.on_change(node)

    def instrument(self, timer: OpTimer) -> None:
        """Put ``timer`` around this instance's ``match_prefix``, ``insert``, ``evict``,
        ``inc_lock_ref``, ``dec_lock_ref``, ``checkpoint`` and ``release`` (instance
        attributes, so the calls the cache makes to itself — ``checkpoint`` -> ``insert`` —
        are timed too) and record after every ``evict`` row an ``evict_kv_free`` row: the ns
        its ``allocator.free`` calls took inside it (one per evicted leaf, as SGLang's
        ``_delete_leaf``), so the evictor's own time can be told apart from the KV free.
        Mutates this instance and ``allocator.free``."""
        from radixbench.cache.timing import time_standard_ops

        time_standard_ops(self, timer, kv_free_in_evict=True)

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Longest cached prefix of ``key``, in whole pages.

        Mutates: reads the clock once (unless the page-aligned key is empty) and sets
        ``last_access_time`` of the root and of every node on the matched path to it; splits at
        most one node when the match ends inside it (the new upper node reads the clock twice).
        Never changes sizes or locks.
        Keys of another namespace (``extra_key``, ``cache_salt``, bigram) never match: the
        namespace is part of every child key, so no node of another namespace is ever compared
        (comparing such keys directly raises ``ValueError``, ``key.check_namespaces``).
        Bigram (EAGLE) keys: ``L`` raw tokens are ``L-1`` bigrams, so the match is the raw
        tokens matched minus one, rounded down to a page. A key's ``limit`` is honoured without
        a copy: the matcher may compare tokens past it, and each node's match is cut there.
        Mirrors ``RadixCache.match_prefix`` / ``_match_prefix_helper`` of sglang 0.5.23; the
        indices are returned concatenated (SGLang: ``path_device_indices`` of the last node).
        """
        page = self.page_size
        tokens = key.token_ids  # may run past the key's limit: matches are cut at ``limit``
        limit = len(key) // page * page
        node = self.root
        if limit == 0:
            return MatchResult(self._empty, node, 0)
        now = self.clock()
        node.last_access_time = now
        values: list[torch.Tensor] = []
        offset = 0
        extra = key.namespace
        common_prefix = self.matcher.common_prefix
        on_change = self.evictor.on_change
        while offset < limit:
            child = node.children.get(child_key(tokens, offset, page, extra))
            if child is None:
                break
            child.last_access_time = now
            n = common_prefix(child.key.token_ids, tokens, offset, page)
            if n > limit - offset:  # both page multiples: the match of the cut key
                n = limit - offset
            if n < len(child.key):
                child = self._split_node(child, n)  # re-keys the touched lower half
                values.append(child.value)
                node = child
                offset += n
                break
            if child.evictable:
                on_change(child)
            values.append(child.value)
            node = child
            offset += n
        if not values:
            return MatchResult(self._empty, node, 0)
        indices = torch.cat(values)  # always a fresh tensor, never a view of a node (as SGLang)
        return MatchResult(indices, node, offset)

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """Split ``child`` after ``split_len`` tokens; returns the new upper node.

        The new node takes the first ``split_len`` tokens and copies ``lock_ref``, ``priority``
        and ``hit_count``; it is a new node, so it reads the clock twice (access, then creation
        time). Both halves' values are cloned. Sizes are unchanged. Node times by the
        config's ``split_rule``: ``served`` (default) as sglang 0.5.23's ``UnifiedRadixCache``
        (``UnifiedTreeCore._split_node``, ``unified_cache/unified_tree_core.py:1467-1531``):
        the new node keeps the lower half's ``creation_time`` and the lower half reads the
        clock once more for its ``last_access_time`` ("splitting does not access the suffix;
        retain its recency"); ``legacy`` as its ``RadixCache._split_node``
        (``radix_cache.py:677-700``): the new node's own two readings, the lower half left
        alone. The rules differ in FIFO / FILO victims after a split. T-LRU lengths as
        ``UnifiedRadixCache``'s split.
        """
        parent = child.parent
        assert parent is not None
        page, extra = self.page_size, child.key.namespace
        new = self._new_node(child.key[:split_len], child.value[:split_len].clone(), parent)
        new.lock_ref = child.lock_ref
        new.priority = child.priority
        new.hit_count = child.hit_count
        if self.tlru:
            new.tlru_cached_prefix_len = parent.tlru_cached_prefix_len + split_len
            new.tlru_history_len = child.tlru_history_len
        parent.children[child_key(new.key.token_ids, 0, page, extra)] = new
        child.key = child.key[split_len:]
        child.value = child.value[split_len:].clone()
        child.parent = new
        new.children[child_key(child.key.token_ids, 0, page, extra)] = child
        self.num_nodes += 1
        if self.kv_events is not None:
            self.kv_events.on_split(new, child, split_len)
        if self.served_split:
            new.creation_time = child.creation_time
            child.last_access_time = self.clock()
        if child.evictable:
            # its key (T-LRU: where it starts) and maybe its access time changed
            self.evictor.on_change(child)
        return new

    def _set_tlru_lengths(self, leaf: TreeNode, parent: TreeNode) -> None:
        """A new leaf's depth, raised into every ancestor's high-water mark (sglang 0.5.23
        ``unified_tree_core._set_tlru_lens_and_raise_history``)."""
        depth = parent.tlru_cached_prefix_len + len(leaf.key.token_ids)
        leaf.tlru_cached_prefix_len = depth
        leaf.tlru_history_len = max(leaf.tlru_history_len, depth)
        cur: TreeNode | None = parent
        while cur is not None and cur.tlru_history_len < depth:
            cur.tlru_history_len = depth
            cur = cur.parent

    def _insert_input(
        self, key: RadixKey, value: torch.Tensor | None
    ) -> tuple[RadixKey, array, torch.Tensor, int]:
        """What ``insert`` works on: ``(key, tokens, value, n_tok)``, the key cut to its limit
        and to whole pages (``n_tok`` tokens; SGLang truncates, never raises), ``tokens`` its
        token ids (exactly ``n_tok``), ``value`` the given slots (the token ids as int64 on the
        device when None). Raises ``ValueError`` if
        ``value`` is not int64 or shorter than ``n_tok``. Mutates nothing."""
        page = self.page_size
        tokens = key.token_ids
        if len(key) < len(tokens):  # a limit cuts the key: insert the cut copy
            key = key[:]
            tokens = key.token_ids
        n_tok = len(tokens) // page * page
        if n_tok < len(tokens):
            tokens = tokens[:n_tok]
            key = key[:n_tok]
        if value is None:
            value = torch.tensor(tokens, dtype=torch.int64, device=self.device)
        if value.dtype != torch.int64:
            raise ValueError(f"insert: value must be int64 KV slots, got {value.dtype}")
        if value.numel() < n_tok:
            raise ValueError(f"insert: value has {value.numel()} slots for {n_tok} tokens")
        return key, tokens, value, n_tok

    # ------------------------------------------------------------------ insert
    def insert(
        self,
        key: RadixKey,
        value: Tensor | None = None,
        priority: int = 0,
        inserted_len: int = 0,
        session_id: str | None = None,
    ) -> int:
        """Insert ``key`` with KV slots ``value`` (int64 ``[>= len(key)]``); returns the length
        of the prefix that was already cached (its slots in ``value`` are duplicates for the
        caller to free). ``session_id``: the inserting request's session, carried by the KV
        event of a new node (0.5.23 ``InsertParams.session_id``).

        The key is cut to whole pages and ``value`` to the key's length (SGLang truncates, never
        raises); the tree keeps a clone of the new part of ``value``, never a view of the
        caller's tensor. ``inserted_len``: tokens of this key the same request inserted before
        (0.5.23 ``req.kv.cache_inserted_len``): only nodes ending beyond it count a hit.
        Mutates: reads the clock once; sets ``last_access_time`` of the root and every walked
        node; raises ``priority`` to ``max(priority, ...)`` on the root, every fully matched
        node and the upper half of a split (not the lower half); ``hit_count += 1`` on every
        walked node (the upper half of a split) ending beyond ``inserted_len``; splits at most
        one node; adds one leaf for the uncached rest (``hit_count`` 1 when it ends beyond
        ``inserted_len``, ``evictable_size_ += len(rest)``).
        Raises ``ValueError`` if ``value`` is not int64 or shorter than the key.
        Mirrors ``RadixCache.insert`` / ``_insert_helper`` of sglang 0.5.23.
        """
        page = self.page_size
        key, tokens, value, n_tok = self._insert_input(key, value)
        now = self.clock()
        node = self.root
        node.last_access_time = now
        if priority > node.priority:
            node.priority = priority
        extra = key.namespace
        common_prefix = self.matcher.common_prefix
        on_change = self.evictor.on_change
        offset = 0
        while offset < n_tok:
            ck = child_key(tokens, offset, page, extra)
            child = node.children.get(ck)
            if child is None:
                leaf = self._new_node(key[offset:], value[offset:n_tok].clone(), node, priority)
                if n_tok > inserted_len:
                    leaf.hit_count = 1
                if self.tlru:
                    self._set_tlru_lengths(leaf, node)
                node.children[ck] = leaf
                self.num_nodes += 1
                self.evictable_size_ += n_tok - offset
                self._refresh(node)
                self._refresh(leaf)
                if self.kv_events is not None:
                    self.kv_events.record_store(leaf, session_id)
                return offset
            child.last_access_time = now
            n = common_prefix(child.key.token_ids, tokens, offset, page)
            offset += n
            if n < len(child.key):
                # the lower half keeps its priority and hits, not its time (re-keyed in the split)
                child = self._split_node(child, n)
            if priority > child.priority:
                child.priority = priority
            if offset > inserted_len:
                child.hit_count += 1
            if child.evictable:
                on_change(child)
            node = child
        return offset

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int) -> EvictResult:
        """Free at least ``num_tokens`` KV slots by evicting unlocked leaves in the policy's
        order (fewer if not enough are evictable). Mutates the tree, the sizes and the allocator.
        Mirrors SGLang ``evict``; the victim order is the evictor's (identical for all)."""
        if num_tokens <= 0:
            return EvictResult(0, [])
        victims, evicted = self.evictor.evict(self, num_tokens)
        return EvictResult(evicted, [v.id for v in victims])

    def delete_leaf(self, node: TreeNode) -> int:
        """Free an unlocked leaf's KV slots and unlink it; returns its tokens. Refreshes the
        parent (which may become an evictable leaf). Mirrors SGLang ``_delete_leaf``."""
        parent = node.parent
        assert parent is not None and not node.children and node.lock_ref == 0
        if self.kv_events is not None:
            self.kv_events.record_remove(node)
        self.allocator.free(node.value)
        del parent.children[child_key(node.key.token_ids, 0, self.page_size, node.key.namespace)]
        n = len(node.key.token_ids)
        self.evictable_size_ -= n
        self.num_nodes -= 1
        node.parent = None
        node.evictable = False  # detached (it was an evictable leaf: asserted above)
        self.num_evictable_leaves -= 1
        self.evictor.on_change(node)
        if not parent.children:  # else it stays an internal node: nothing to refresh
            self._refresh(parent)
        return n

    # ------------------------------------------------------------------ requests
