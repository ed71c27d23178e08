"""The radix prefix cache.

Mirrors SGLang ``RadixCache`` (python/sglang/srt/mem_cache/radix_cache.py @ a7ec6b97): same tree
shape, same splits, same lock accounting (``evictable_size_`` / ``protected_size_``), same
``cache_finished_req`` KV-slot bookkeeping. Differences, all deliberate and documented:
time is a logical clock (one tick per ``match_prefix`` / ``insert``) so runs are reproducible;
the prefix compare and the eviction order are pluggable (``Matcher``, ``Evictor`` +
``EvictionPolicy``); eviction ties break by node id; ``node.evictable`` is kept exact so evictors
never need to rescan.
"""

from __future__ import annotations

from typing import TextIO

import torch

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.config import CacheConfig, CacheReq, EvictResult, MatchResult
from radixbench.cache.evictor import make_evictor
from radixbench.cache.key import RadixKey, child_key
from radixbench.cache.matcher import make_matcher
from radixbench.cache.node import TreeNode
from radixbench.cache.policy import make_policy

__all__ = ["CacheConfig", "CacheReq", "EvictResult", "MatchResult", "RadixCache"]


class RadixCache:
    """A radix tree of token prefixes whose nodes hold KV-slot indices.

    Sizes (tokens): ``evictable_size()`` = tokens in nodes with ``lock_ref == 0``;
    ``protected_size()`` = tokens in locked nodes; ``total_size()`` = their sum. The root holds no
    tokens and is permanently locked (``lock_ref == 1``).
    """

    def __init__(
        self,
        req_to_token_pool: ReqToTokenPool | None,
        token_to_kv_pool_allocator: TokenToKVPoolAllocator,
        config: CacheConfig | None = None,
    ) -> None:
        self.config = config or CacheConfig()
        self.page_size = self.config.page_size
        self.req_to_token_pool = req_to_token_pool
        self.allocator = token_to_kv_pool_allocator
        self.device = token_to_kv_pool_allocator.device
        self.matcher = make_matcher(self.config.matcher)
        self.policy = make_policy(self.config.policy)
        self.evictor = make_evictor(self.config.evictor, self.policy)
        self._empty = torch.empty((0,), dtype=torch.int64, device=self.device)
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Drop the whole tree (KV slots are *not* freed; the caller clears the allocator)."""
        self._next_id = 0
        self._clock = 0
        self.root = self._new_node(RadixKey(()), self._empty, None, priority=-(2**62))
        self.root.lock_ref = 1
        self.evictable_size_ = 0
        self.protected_size_ = 0
        self.num_nodes = 0  # excluding the root
        self.num_evictable_leaves = 0
        self.evictor.reset()

    def _new_node(
        self, key: RadixKey, value: torch.Tensor, parent: TreeNode | None, priority: int = 0
    ) -> TreeNode:
        node = TreeNode(self._next_id, key, value, parent, self._clock, priority)
        self._next_id += 1
        return node

    def _refresh(self, node: TreeNode) -> None:
        """Recompute ``node.evictable`` and tell the evictor when it flips."""
        evictable = node.lock_ref == 0 and not node.children and node.parent is not None
        if evictable is not node.evictable:
            node.evictable = evictable
            self.num_evictable_leaves += 1 if evictable else -1
            self.evictor.on_change(node)

    def evictable_size(self) -> int:
        """Tokens in unlocked nodes: all of them can be freed by cascading leaf evictions."""
        return self.evictable_size_

    def protected_size(self) -> int:
        """Tokens in nodes locked by running requests."""
        return self.protected_size_

    def total_size(self) -> int:
        """Tokens held by the tree (O(1); ``check_integrity`` verifies it against a walk)."""
        return self.evictable_size_ + self.protected_size_

    # ------------------------------------------------------------------ match
    def match_prefix(self, key: RadixKey) -> MatchResult:
        """Longest cached prefix of ``key``, in whole pages.

        Mutates: ``last_access_time`` of every node on the matched path (and the root); splits at
        most one node when the match ends inside it. Never changes sizes or locks.
        Keys of another namespace (``extra_key``, ``cache_salt``, bigram) never match: the
        namespace is part of every child key, so no node of another namespace is ever compared
        (comparing such keys directly raises ``ValueError``, ``key.check_namespaces``).
        Bigram (EAGLE) keys: ``L`` raw tokens are ``L-1`` bigrams, so the match is the raw
        tokens matched minus one, rounded down to a page.
        Mirrors SGLang ``match_prefix`` / ``_match_prefix_helper`` @ a7ec6b97.
        """
        self._clock += 1
        now = self._clock
        page = self.page_size
        tokens = key.token_ids
        limit = len(tokens) // page * page
        node = self.root
        node.last_access_time = now
        if limit == 0:
            return MatchResult(self._empty, node, 0)
        values: list[torch.Tensor] = []
        offset = 0
        extra = key.namespace
        common_prefix = self.matcher.common_prefix
        while offset < limit:
            child = node.children.get(child_key(tokens, offset, page, extra))
            if child is None:
                break
            child.last_access_time = now
            if child.evictable:
                self.evictor.on_change(child)
            n = common_prefix(child.key.token_ids, tokens, offset, page)
            if n < len(child.key):
                child = self._split_node(child, n)
                values.append(child.value)
                node = child
                offset += n
                break
            values.append(child.value)
            node = child
            offset += n
        if not values:
            return MatchResult(self._empty, node, 0)
        indices = torch.cat(values)  # always a fresh tensor, never a view of a node (as SGLang)
        return MatchResult(indices, node, offset)

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """Split ``child`` after ``split_len`` tokens; returns the new upper node.

        The new node takes the first ``split_len`` tokens and inherits ``lock_ref``,
        ``priority``, ``hit_count`` and ``last_access_time``; sizes are unchanged.
        Mirrors SGLang ``_split_node``.
        """
        parent = child.parent
        assert parent is not None
        page, extra = self.page_size, child.key.namespace
        new = self._new_node(child.key[:split_len], child.value[:split_len], parent)
        new.lock_ref = child.lock_ref
        new.priority = child.priority
        new.hit_count = child.hit_count
        new.last_access_time = child.last_access_time
        parent.children[child_key(new.key.token_ids, 0, page, extra)] = new
        child.key = child.key[split_len:]
        child.value = child.value[split_len:]
        child.parent = new
        new.children[child_key(child.key.token_ids, 0, page, extra)] = child
        self.num_nodes += 1
        return new

    # ------------------------------------------------------------------ insert
    def insert(self, key: RadixKey, value: torch.Tensor | None = None, priority: int = 0) -> int:
        """Insert ``key`` with KV slots ``value`` (int64 ``[len(key)]``); returns the length of
        the prefix that was already cached (its slots in ``value`` are duplicates for the caller
        to free).

        Mutates: on the walked path ``last_access_time``, ``hit_count += 1`` and
        ``priority = max(priority, ...)``; may split one node per partially matched edge; adds one
        leaf for the uncached rest (``evictable_size_ += len(rest)``).
        Raises ``ValueError`` if ``len(key)`` is not a multiple of ``page_size`` or ``value`` is
        not int64 or has another length. Mirrors SGLang ``insert`` / ``_insert_helper``.
        """
        page = self.page_size
        tokens = key.token_ids
        if len(tokens) % page:
            raise ValueError(f"insert: key length {len(tokens)} is not a multiple of page {page}")
        if value is None:
            value = torch.tensor(tokens, dtype=torch.int64, device=self.device)
        elif key.is_bigram and value.numel() > len(tokens):
            value = value[: len(tokens)]  # SGLang (EAGLE): value len == bigram key len
        if value.dtype != torch.int64:
            raise ValueError(f"insert: value must be int64 KV slots, got {value.dtype}")
        if value.numel() != len(tokens):
            raise ValueError(f"insert: value has {value.numel()} slots for {len(tokens)} tokens")
        self._clock += 1
        now = self._clock
        node = self.root
        node.last_access_time = now
        extra = key.namespace
        common_prefix = self.matcher.common_prefix
        offset, n_tok = 0, len(tokens)
        while offset < n_tok:
            ck = child_key(tokens, offset, page, extra)
            child = node.children.get(ck)
            if child is None:
                leaf = self._new_node(key[offset:], value[offset:], node, priority)
                node.children[ck] = leaf
                self.num_nodes += 1
                self.evictable_size_ += n_tok - offset
                self._refresh(leaf)
                self._refresh(node)
                return offset
            n = common_prefix(child.key.token_ids, tokens, offset, page)
            # As SGLang, the child is touched before a split, so both halves carry the access.
            child.last_access_time = now
            child.hit_count += 1
            if priority > child.priority:
                child.priority = priority
            if child.evictable:
                self.evictor.on_change(child)
            if n < len(child.key):
                child = self._split_node(child, n)
            node = child
            offset += n
        return offset

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: TreeNode) -> int:
        """Lock the path root..node for a running request; returns the change of
        ``evictable_size_`` (<= 0). A 0->1 transition moves ``len(key)`` tokens from evictable
        to protected. Mirrors SGLang ``inc_lock_ref``."""
        delta = 0
        root = self.root
        while node is not root:
            if node.lock_ref == 0:
                n = len(node.key)
                self.evictable_size_ -= n
                self.protected_size_ += n
                delta -= n
                node.lock_ref = 1
                self._refresh(node)
            else:
                node.lock_ref += 1
            node = node.parent
        return delta

    def dec_lock_ref(self, node: TreeNode) -> int:
        """Unlock the path root..node; returns the change of ``evictable_size_`` (>= 0).
        Raises ``RuntimeError`` on a node that is not locked. Mirrors SGLang ``dec_lock_ref``."""
        delta = 0
        root = self.root
        while node is not root:
            if node.lock_ref == 1:
                n = len(node.key)
                self.evictable_size_ += n
                self.protected_size_ -= n
                delta += n
                node.lock_ref = 0
                self._refresh(node)
            elif node.lock_ref <= 0:
                raise RuntimeError(f"dec_lock_ref on unlocked node {node.id}")
            else:
                node.lock_ref -= 1
            node = node.parent
        return delta

    # ------------------------------------------------------------------ evict
    def evict(self, num_tokens: int) -> EvictResult:
        """Free at least ``num_tokens`` KV slots by evicting unlocked leaves in the policy's
        order (fewer if not enough are evictable). Mutates the tree, the sizes and the allocator.
        Mirrors SGLang ``evict``; the victim order is the evictor's (identical for all)."""
        if num_tokens <= 0:
            return EvictResult(0, [])
        victims, evicted = self.evictor.evict(self, num_tokens)
        return EvictResult(evicted, [v.id for v in victims])

    def collect_evictable_leaves(self) -> list[TreeNode]:
        """All unlocked leaves by DFS (SGLang ``_collect_leaves``); O(nodes)."""
        leaves = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif node.lock_ref == 0:
                leaves.append(node)
        return leaves

    def delete_leaf(self, node: TreeNode) -> int:
        """Free an unlocked leaf's KV slots and unlink it; returns its tokens. Refreshes the
        parent (which may become an evictable leaf). Mirrors SGLang ``_delete_leaf``."""
        parent = node.parent
        assert parent is not None and not node.children and node.lock_ref == 0
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
    def cache_finished_req(self, req: CacheReq) -> int:
        """Insert a finished request's tokens and release it; see ``requests.cache_finished_req``
        (mirrors SGLang ``cache_finished_req`` @ a7ec6b97)."""
        from radixbench.cache.requests import cache_finished_req

        return cache_finished_req(self, req)

    def cache_unfinished_req(self, req: CacheReq, key: RadixKey) -> int:
        """Cache a chunked-prefill request's filled tokens ``key``; see
        ``requests.cache_unfinished_req`` (mirrors SGLang ``cache_unfinished_req`` @ a7ec6b97)."""
        from radixbench.cache.requests import cache_unfinished_req

        return cache_unfinished_req(self, req, key)

    def pretty_print(self, file: TextIO | None = None, max_tokens: int = 8) -> None:
        """Print the tree, one node per line indented by depth: id, token count, first
        ``max_tokens`` ids, lock_ref, access time, hit count, priority; then the sizes. Mutates
        nothing. Mirrors SGLang ``pretty_print`` / ``_print_helper``."""
        from radixbench.cache.printing import pretty_print

        pretty_print(self, file, max_tokens)
