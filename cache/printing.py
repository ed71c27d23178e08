"""Human-readable dump of a radix tree.

Modeled on ``RadixCache.pretty_print`` / ``_print_helper`` of sglang 0.5.23
(``sglang/srt/mem_cache/radix_cache.py``): the same stack-driven depth-first walk, indented two
spaces per level, then the token total. It prints more than 0.5.23 (node id, access time, hit
count and priority besides length, first tokens and ``lock_ref``; the evictable / protected split
and the node count), shows ``max_tokens`` ids instead of 10, and visits children in id order
(0.5.23: reverse child-dict order). Output only; nothing depends on it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from radixbench.cache.node import TreeNode
    from radixbench.cache.tree_view import TreeView


def pretty_print(cache: TreeView, file: TextIO | None = None, max_tokens: int = 8) -> None:
    """Print ``cache``'s tree to ``file`` (default stdout), one node per line indented by depth,
    children in id order, then the sizes in tokens. Mutates nothing."""
    out = file if file is not None else sys.stdout
    stack: list[tuple[TreeNode, int]] = [(cache.root, 0)]
    while stack:
        node, depth = stack.pop()
        ids = list(node.key.token_ids[:max_tokens])
        more = "..." if len(node.key) > max_tokens else ""
        print(
            f"{' ' * depth}[{node.id}] len={len(node.key)} {ids}{more} "
            f"lock_ref={node.lock_ref} t={node.last_access_time} "
            f"hits={node.hit_count} prio={node.priority}",
            file=out,
        )
        for child in sorted(node.children.values(), key=lambda c: c.id, reverse=True):
            stack.append((child, depth + 2))
    print(
        f"#tokens: {cache.total_size()} (evictable {cache.evictable_size_}, "
        f"protected {cache.protected_size_}), #nodes: {cache.num_nodes}",
        file=out,
    )
