"""The approximate radix tree of the ``cache-aware`` router: which instance was sent which prefix.

A model of the model gateway's ``TokenTree`` (``crates/kv_index/src/token_tree.rs``) at two
SMG revisions, lightseekorg/smg @73da68c and smg-project/smg @f8daa88 (the repository moved;
same history), single-threaded: ONE radix tree of page-aligned prefixes shared by all workers
("tenants", here instance indices), each node holding its tenants with their last access time.

* **Time** is one counter that every draw advances (``next_timestamp``, ``:181-183`` @73da68c):
  a node's creation draws once (``Node::new``, ``:210-222``; a split's upper node copies its
  child's and draws nothing) and every ``touch_tenant`` once. The counter starts at 0 per tree
  (SMG's is per process: one gateway serving one model in token mode draws from no other tree).
* **The reported tenant** of a node is its cached ``last_tenant``, refreshed by a touch only when
  the timestamp it drew is a multiple of 16, and only while that tenant still holds the node;
  else the first tenant of the node's map (``get_any_tenant`` / ``touch_tenant``, ``:253-269``,
  ``:276-299`` @73da68c; ``:262-325`` @f8daa88). SMG's map order comes from a per-process
  random hasher; here it is the order tenants were attached (a dict).
* **Counting** (``count_once``): @73da68c every insert re-adds the tokens of each fully matched
  edge, owned or not (``insert_from`` ``:476-483``, ``:603-606``; the replay loop of
  ``match_and_insert_with`` ``:1183-1189``), so a tenant's count is cumulative; a split counts
  its upper part only for a tenant new to it (``:492-532``, ``:540-593``). Since smg#2126
  (aca8aca) every edge counts once, when the tenant is first attached (``:297-325``,
  ``:1283-1300`` @f8daa88).
* **Trim**: ``evict_tenants_by_size`` (@73da68c ``:1482-1495``): every tenant over the limit
  loses its least recently used tenant-leaves until ``count - max`` tokens are gone
  (``evict_tenant``, ``:1269-1334``); ``evict_tree_by_size`` (smg#2137, 21c84ae; ``:1675-1770``
  @f8daa88): the tree-wide total is the budget, tenant-leaves of every tenant leave in LRU order
  until the total fits. Both push a node's parent as a new leaf only when the node itself was
  removed (empty) and the parent became a tenant-leaf (``cleanup_empty_ancestors_with_parent``,
  ``:1414-1456`` @73da68c).

Representation: an edge is a run of page keys (``page_hash.prefix_keys``: one chained 64-bit key
per whole page, so equal keys mean equal prefixes), ``array('Q')``; children are keyed by the
first key of their edge; the common part of an edge and a request is found by bisection on the
last equal key. Sizes are tokens (keys x ``page``).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MATCHED_TENANTS_CAP", "ApproxTree", "Match"]

#: Tenants of the deepest matched node a match reports (``common.rs:41`` @f8daa88, smg#2161).
MATCHED_TENANTS_CAP = 8


class _Node:
    __slots__ = ("children", "edge", "last", "parent", "tenants")

    def __init__(self, edge: array, parent: _Node | None) -> None:
        self.edge = edge
        self.parent = parent
        self.children: dict[int, _Node] = {}
        self.tenants: dict[int, int] = {}  # tenant -> last access (timestamp)
        self.last: int | None = None  # the cached last_tenant


@dataclass
class Match:
    """A match (``PrefixMatchResult``): ``tokens`` matched, the reported ``tenant`` (None: the
    gateway's ``"empty"``) and ``tenants``, those of the deepest matched node in map order
    (at most :data:`MATCHED_TENANTS_CAP`)."""

    tokens: int = 0
    tenant: int | None = None
    tenants: list[int] = field(default_factory=list)


def _common(edge: array, keys: array, at: int) -> int:
    """How many leading keys of ``edge`` equal ``keys[at:]`` (>= 1: the first is equal)."""
    n = min(len(edge), len(keys) - at)
    if edge[n - 1] == keys[at + n - 1]:
        return n
    lo, hi = 1, n - 1  # edge[lo-1] equal, edge[hi] differs: find the last equal
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if edge[mid - 1] == keys[at + mid - 1]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class ApproxTree:
    """Prefixes routed per tenant (instance index), ``page`` tokens per key. ``tokens``:
    tenant -> counted tokens; ``total``: their sum; ``clock``: the next timestamp."""

    def __init__(self, page: int, count_once: bool = True) -> None:
        self.page = page
        self.count_once = count_once
        self.root = _Node(array("Q"), None)
        self.clock = 0
        self.tokens: dict[int, int] = {}
        self.total = 0

    # ------------------------------------------------------------------ nodes
    def _draw(self) -> int:
        ts = self.clock
        self.clock += 1
        return ts

    def _new(self, edge: array, parent: _Node) -> _Node:
        self._draw()  # Node::new draws its creation time
        node = _Node(edge, parent)
        parent.children[edge[0]] = node
        return node

    def _touch(self, node: _Node, tenant: int) -> bool:
        """``touch_tenant``: whether ``tenant`` was newly attached."""
        ts = self._draw()
        new = tenant not in node.tenants
        node.tenants[tenant] = ts
        if ts & 0xF == 0:
            node.last = tenant
        return new

    @staticmethod
    def _any(node: _Node) -> int | None:
        """``get_any_tenant``."""
        if node.last is not None and node.last in node.tenants:
            return node.last
        return next(iter(node.tenants), None)

    def _split(self, child: _Node, k: int) -> _Node:
        """Cut ``child``'s edge after ``k`` keys; the new upper node copies its tenants and
        cached tenant (draws nothing)."""
        parent = child.parent
        assert parent is not None
        upper = _Node(child.edge[:k], parent)
        upper.tenants = dict(child.tenants)
        upper.last = child.last
        parent.children[child.edge[0]] = upper
        child.edge = child.edge[k:]
        child.parent = upper
        upper.children[child.edge[0]] = child
        return upper

    def _add(self, tenant: int, n: int) -> None:
        self.tokens[tenant] = self.tokens.get(tenant, 0) + n
        self.total += n

    def _sub(self, tenant: int, n: int) -> None:
        removed = min(n, self.tokens.get(tenant, 0))
        if tenant in self.tokens:
            self.tokens[tenant] -= removed
            self.total -= removed

    # ------------------------------------------------------------------ match / insert
    def _descend(self, keys: array, for_insert: bool) -> tuple[Match, list[_Node], _Node, int]:
        """The match descent (``match_prefix_with_counts`` / phase 1 of
        ``match_and_insert_with``): the deepest matched node's tenant is touched on each
        matched node; a node with no tenant freezes the match (a plain match stops there, an
        insert keeps descending through full matches). Returns the match, the fully matched
        nodes, the fall-off node and the keys consumed."""
        m = Match()
        last: _Node | None = None
        node, at, frozen, path = self.root, 0, False, []
        while at < len(keys):
            child = node.children.get(keys[at])
            if child is None:
                break
            k = _common(child.edge, keys, at)
            if not frozen:
                t = self._any(child)
                if t is None:
                    frozen = True
                else:
                    self._touch(child, t)
                    m.tokens += k * self.page
                    m.tenant, last = t, child
            if k < len(child.edge) or (frozen and not for_insert):
                break
            path.append(child)
            at += k
            node = child
        if last is not None:
            m.tenants = list(last.tenants)[:MATCHED_TENANTS_CAP]
        return m, path, node, at

    def _insert_from(self, node: _Node, keys: array, at: int, tenant: int) -> int:
        """``insert_from``: add ``keys[at:]`` below ``node`` for ``tenant``; the tokens to
        count."""
        added, page = 0, self.page
        while at < len(keys):
            child = node.children.get(keys[at])
            if child is None:
                leaf = self._new(keys[at:], node)
                self._touch(leaf, tenant)
                return added + len(leaf.edge) * page
            k = _common(child.edge, keys, at)
            if k == len(child.edge):
                if self._touch(child, tenant) or not self.count_once:
                    added += k * page
                at += k
                node = child
                continue
            upper = self._split(child, k)
            if at + k < len(keys):  # a new branch beside the old suffix
                leaf = self._new(keys[at + k :], upper)
                self._touch(leaf, tenant)
                added += len(leaf.edge) * page
            if self._touch(upper, tenant):
                added += k * page
            return added
        return added

    def _attach_root(self, tenant: int) -> None:
        self.root.tenants.setdefault(tenant, 0)  # insert-side root bookkeeping
        self.tokens.setdefault(tenant, 0)

    def match(self, keys: array) -> Match:
        """``match_prefix_with_counts`` for a request's page keys (``array('Q')``)."""
        if not keys:
            return Match(0, self._any(self.root))
        return self._descend(keys, False)[0]

    def insert(self, keys: array, tenant: int) -> None:
        """``insert_tokens``: add the request's pages for ``tenant``."""
        if keys:
            self._attach_root(tenant)
            self._add(tenant, self._insert_from(self.root, keys, 0, tenant))

    def match_and_insert(self, keys: array, select: Callable[[Match], int | None]) -> Match:
        """``match_and_insert_with``: match, then insert for ``select(match)`` (None: no
        insert); the match is resolved against the tree before the insert."""
        if not keys:
            m = Match(0, self._any(self.root))
            select(m)
            return m
        m, path, node, at = self._descend(keys, True)
        tenant = select(m)
        if tenant is None:
            return m
        self._attach_root(tenant)
        added = 0
        for p in path:  # the replay of insert's per-node work on the matched edges
            if self._touch(p, tenant) or not self.count_once:
                added += len(p.edge) * self.page
        self._add(tenant, added + self._insert_from(node, keys, at, tenant))
        return m

    # ------------------------------------------------------------------ eviction
    @staticmethod
    def _is_leaf(node: _Node, tenant: int) -> bool:
        return tenant in node.tenants and not any(
            tenant in c.tenants for c in node.children.values()
        )

    def _remove(self, node: _Node, tenant: int) -> tuple[int, tuple[_Node, int] | None]:
        """``remove_tenant_and_cleanup``: drop ``tenant`` from ``node``, remove the nodes left
        empty upwards; returns the node's tokens and the parent that became a tenant-leaf."""
        if node.tenants.pop(tenant, None) is None:
            return 0, None
        size, info, cur = len(node.edge) * self.page, None, node
        while True:
            if cur.tenants or cur.children:
                if info is None and self._is_leaf(cur, tenant):
                    info = (cur, cur.tenants[tenant])
                break
            parent = cur.parent
            if parent is None:
                break
            del parent.children[cur.edge[0]]
            if info is None and self._is_leaf(parent, tenant):
                info = (parent, parent.tenants[tenant])
            cur = parent
        return size, info

    def _leaves(self, tenant: int | None) -> list[tuple[int, int, _Node, int]]:
        """Tenant-leaves ``(ts, order, node, tenant)`` below the root (children before the
        node, as ``collect_tenant_leaves`` / ``collect_all_tenant_leaves``), of ``tenant`` or
        of every tenant (None)."""
        out: list[tuple[int, int, _Node, int]] = []
        stack: list[tuple[_Node, bool]] = [(self.root, False)]
        while stack:
            node, done = stack.pop()
            if not done:
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(node.children.values()))
                continue
            if node is self.root:
                continue
            for t in node.tenants if tenant is None else (tenant,):
                if self._is_leaf(node, t):
                    out.append((node.tenants[t], len(out), node, t))
        return out

    def evict_tenant(self, tenant: int, max_tokens: int) -> int:
        """``evict_tenant``: remove ``tenant``'s least recently used tenant-leaves until
        ``count - max_tokens`` tokens are gone (or none is left); returns the tokens removed."""
        count = self.tokens.get(tenant, 0)
        if count <= max_tokens:
            return 0
        heap = self._leaves(tenant)
        heapq.heapify(heap)
        order, evicted = len(heap), 0
        while heap and evicted < count - max_tokens:
            _, _, node, _ = heapq.heappop(heap)
            size, info = self._remove(node, tenant)
            if size > 0:
                evicted += size
                if info is not None:
                    heapq.heappush(heap, (info[1], order, info[0], tenant))
                    order += 1
        self._sub(tenant, evicted)
        return evicted

    def evict_tenants_by_size(self, max_tokens: int) -> int:
        """@73da68c ``evict_tenant_by_size``: every tenant over ``max_tokens`` is trimmed
        (:meth:`evict_tenant`); returns the tokens removed."""
        over = [t for t, n in self.tokens.items() if n > max_tokens]
        return sum(self.evict_tenant(t, max_tokens) for t in over)

    def evict_tree_by_size(self, max_tokens: int) -> int:
        """smg#2137 ``evict_tenant_by_size``: tenant-leaves of every tenant leave in LRU
        order until the tree-wide total is at most ``max_tokens``; returns the tokens removed."""
        if self.total <= max_tokens:
            return 0
        start = self.total
        heap = self._leaves(None)
        heapq.heapify(heap)
        order = len(heap)
        while heap and self.total > max_tokens:
            _, _, node, tenant = heapq.heappop(heap)
            if not self._is_leaf(node, tenant):
                continue
            size, info = self._remove(node, tenant)
            if size > 0:
                self._sub(tenant, size)
                if info is not None:
                    heapq.heappush(heap, (info[1], order, info[0], tenant))
                    order += 1
        return start - self.total
