"""The approximate radix tree of the ``cache-aware`` router: which instance was sent which prefix.

Modelled on the model gateway's ``TokenTree`` (lightseekorg/smg ``crates/kv_index/src/
token_tree.rs`` @73da68c): ONE radix tree of page-aligned token prefixes shared by all workers
("tenants"), each node holding the tenants it was routed to with their last access time;
``match_prefix_with_counts`` (``:620-745``) walks down while the next node has any tenant and
answers the deepest such node's tenant; ``insert_tokens`` (``:379``) adds a request's pages for
its tenant; ``evict_tenant_by_size`` (``:1482``) trims every tenant holding more than
``max_size`` tokens by removing its least recently used leaves.

Representation: an edge is a run of page keys (``page_hash.prefix_keys``: one chained 64-bit
key per whole page, so equal keys mean equal prefixes), ``array('Q')``; a node's children are
keyed by the first key of their edge. Because a key identifies its whole prefix, the common
part of an edge and a request is found by bisection on the last equal key. Tenant choice at a
node with several: the most recently touched one (the gateway answers a cached
``last_tenant``, updated on 1 touch in 16, else any: deterministic here). Time is a counter
that every touch advances (the gateway's ``next_timestamp``). Sizes are in tokens (pages x
``page``).
"""

from __future__ import annotations

import heapq
from array import array

__all__ = ["ApproxTree"]


class _Node:
    __slots__ = ("children", "edge", "parent", "tenants")

    def __init__(self, edge: array, parent: _Node | None) -> None:
        self.edge = edge
        self.parent = parent
        self.children: dict[int, _Node] = {}
        self.tenants: dict[int, int] = {}  # tenant -> last access


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
    """Prefixes routed per tenant (instance index), ``page`` tokens per key."""

    def __init__(self, page: int) -> None:
        self.page = page
        self.root = _Node(array("Q"), None)
        self.clock = 0
        self.tokens: dict[int, int] = {}  # tenant -> tokens held (the gateway's token count)

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def match(self, keys: array) -> tuple[int, int | None]:
        """``(matched tokens, tenant of the deepest matched node or None)`` for a request's
        page keys (``array('Q')``); touches the answered tenant on every matched node (``:690``)."""
        node, at, tenant = self.root, 0, None
        while at < len(keys):
            child = node.children.get(keys[at])
            if child is None or not child.tenants:
                break
            k = _common(child.edge, keys, at)
            tenant = max(child.tenants, key=child.tenants.__getitem__)
            child.tenants[tenant] = self._tick()
            at += k
            if k < len(child.edge):
                break
            node = child
        return at * self.page, tenant

    def insert(self, keys: array, tenant: int) -> None:
        """Add the request's pages for ``tenant`` (touching every node on the path)."""
        node, at = self.root, 0
        now = self._tick()
        while at < len(keys):
            child = node.children.get(keys[at])
            if child is None:
                leaf = _Node(keys[at:], node)
                leaf.tenants[tenant] = now
                node.children[keys[at]] = leaf
                self.tokens[tenant] = self.tokens.get(tenant, 0) + len(leaf.edge) * self.page
                return
            k = _common(child.edge, keys, at)
            if k < len(child.edge):
                child = self._split(child, k)
            if tenant not in child.tenants:
                self.tokens[tenant] = self.tokens.get(tenant, 0) + len(child.edge) * self.page
            child.tenants[tenant] = now
            at += k
            node = child

    def _split(self, child: _Node, k: int) -> _Node:
        """Cut ``child``'s edge after ``k`` keys; the new upper node keeps its tenants."""
        parent = child.parent
        assert parent is not None
        upper = _Node(child.edge[:k], parent)
        upper.tenants = dict(child.tenants)
        parent.children[child.edge[0]] = upper
        child.edge = child.edge[k:]
        child.parent = upper
        upper.children[child.edge[0]] = child
        return upper

    def evict_by_size(self, max_tokens: int) -> int:
        """Every tenant holding more than ``max_tokens`` loses its least recently used leaves
        (nodes it holds with no child it holds) until it fits; nodes left with no tenant and
        no child are removed. Returns the tokens removed."""
        over = [t for t, n in self.tokens.items() if n > max_tokens]
        removed = 0
        for tenant in over:
            removed += self._evict_tenant(tenant, max_tokens)
        return removed

    def _evict_tenant(self, tenant: int, max_tokens: int) -> int:
        heap: list[tuple[int, int, _Node]] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if tenant in node.tenants and not any(
                tenant in c.tenants for c in node.children.values()
            ):
                heapq.heappush(heap, (node.tenants[tenant], id(node), node))
        removed = 0
        while heap and self.tokens[tenant] > max_tokens:
            _, _, node = heapq.heappop(heap)
            del node.tenants[tenant]
            size = len(node.edge) * self.page
            self.tokens[tenant] -= size
            removed += size
            parent = node.parent
            if not node.tenants and not node.children and parent is not None:
                del parent.children[node.edge[0]]
            if (
                parent is not None
                and parent.parent is not None
                and tenant in parent.tenants
                and not any(tenant in c.tenants for c in parent.children.values())
            ):
                heapq.heappush(heap, (parent.tenants[tenant], id(parent), parent))
        return removed
