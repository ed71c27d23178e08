"""The KV-event recorder of radixbench's ``RadixCache``, modelled on sglang 0.5.23's
``KVCacheEventRecorder`` (``mem_cache/events.py:119-320``) as ``UnifiedTreeCore`` calls it
(``unified_cache/unified_tree_core.py``): a ``BlockStored`` of its pages per new node
(``_add_new_node``, ``:1561``), a ``BlockRemoved`` per evicted node (``_release_all_component
_layers``, ``:1889``), one ``AllBlocksCleared`` per ``reset`` (``unified_radix_cache.py:453``, also
at construction), each queued through the coalescing below; nothing on a match, a split, a lock
or a cached key. A split hands each half
its pages' digests (``split_node_hash_value``, ``utils.py:217``, ``unified_tree_core.py:1493``).

The queue coalesces an event with a compatible tail as ``KVCacheEventRecorder.enqueue``
(``events.py:139-170``) does: a removal joins consecutive removals of the same medium; a store
joins the tail store whose last block is its parent, when medium, LoRA id and name, block size,
salt and session agree (sglang records one store per page and merges them, so a node's pages
are one event, and so are successive nodes of one chain). Events, their boundaries included,
are those of sglang's Python tree core; its Rust core groups removals its own way (the blocks in
order are the same): ``tests/cache/sglang/test_kv_events_fidelity.py`` checks both.
``session_id`` is the inserting request's session (``InsertParams.session_id`` from
``req.session_id``, ``unified_radix_cache.py:1187``, ``unified_tree_core.py:1561``);
``lora_id`` is always ``None`` (sglang's recorder sets none either).

Cost: a cache with events off holds no recorder (``RadixCache.kv_events is None``): one
``is None`` test per new leaf, per evicted leaf, per split and per reset. On, a new node costs
one SHA-256 per page; ids are derived when events are built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from radixbench.cache.key import BIGRAM_SHIFT
from radixbench.cache.kv_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
    KVEventConfig,
    block_id,
    block_ids,
    namespace_seed,
    namespaced,
    page_digests,
    salt_digest,
)

if TYPE_CHECKING:
    from radixbench.cache.node import TreeNode

__all__ = ["KVEventRecorder"]


class KVEventRecorder:
    """Collects the KV events of one cache of ``page_size`` tokens per page, configured by
    ``config`` (:class:`~radixbench.cache.kv_events.KVEventConfig`). Keeps each node's page
    digests on the node (``TreeNode.page_digests``: ``list[bytes]``, root to leaf)."""

    __slots__ = ("_lora", "_queue", "_seeds", "config", "page_size")

    def __init__(self, page_size: int, config: KVEventConfig | None = None) -> None:
        self.page_size = page_size
        self.config = config or KVEventConfig()
        self._queue: list[KVEvent] = []
        self._seeds: dict[tuple[str | None, str | None], bytes | None] = {}
        self._lora: dict[str | None, str | None] = {}

    def _enqueue(self, event: KVEvent) -> None:
        """Queue ``event``, merged into a compatible tail (``KVCacheEventRecorder.enqueue``,
        module docstring). Mutates the tail event when merging."""
        queue = self._queue
        if queue:
            tail = queue[-1]
            if isinstance(tail, BlockRemoved) and isinstance(event, BlockRemoved):
                if tail.medium == event.medium:
                    tail.block_hashes.extend(event.block_hashes)
                    return
            elif (
                isinstance(tail, BlockStored)
                and isinstance(event, BlockStored)
                and tail.block_hashes
                and event.parent_block_hash == tail.block_hashes[-1]
                and tail.medium == event.medium
                and tail.lora_id == event.lora_id
                and tail.block_size == event.block_size
                and tail.cache_salt == event.cache_salt
                and tail.session_id == event.session_id
                and tail.lora_name == event.lora_name
            ):
                tail.block_hashes.extend(event.block_hashes)
                tail.token_ids.extend(event.token_ids)
                return
        queue.append(event)

    # ------------------------------------------------------------------ namespaces
    def _seed(self, extra_key: str | None, cache_salt: str | None) -> bytes | None:
        """The id namespace of a key (``KVCacheEventRecorder._namespace_seed``,
        ``events.py:190-202``), cached per namespace."""
        k = (extra_key, cache_salt)
        if k not in self._seeds:
            if self.config.dynamo_format:
                self._seeds[k] = namespace_seed(extra_key, cache_salt)
            else:
                lora = extra_key if self.config.lora_name(extra_key) is not None else None
                self._seeds[k] = namespace_seed(lora, None)
        return self._seeds[k]

    # ------------------------------------------------------------------ tree hooks
    def record_store(self, node: TreeNode, session_id: str | None = None) -> None:
        """A new node holds its pages: compute their digests (chained from the parent's last
        one) onto ``node.page_digests`` and queue a ``BlockStored`` of them carrying
        ``session_id`` (the inserting request's session). Mutates ``node``."""
        key, parent, page = node.key, node.parent, self.page_size
        assert parent is not None
        above = parent.page_digests if parent.parent is not None else None
        if above:
            prior: bytes | None = above[-1]
        elif key.cache_salt is not None:  # a salted chain under the root (utils.py:199)
            prior = salt_digest(key.cache_salt)
        else:
            prior = None
        tokens = key.raw()
        if key.is_bigram:  # 0.5.23 hashes a bigram page as its (a, b) pairs, uint32 each
            pairs = [(t >> BIGRAM_SHIFT, t & ((1 << BIGRAM_SHIFT) - 1)) for t in tokens]
            flat = [x for pair in pairs for x in pair]
            digests = page_digests(flat, page, prior, unit=2)
            shown: list = [list(p) for p in pairs]
        else:
            digests = page_digests(tokens, page, prior)
            shown = tokens.tolist()
        node.page_digests = digests
        seed = self._seed(key.extra_key, key.cache_salt)
        parent_id = namespaced(block_id(above[-1]), seed) if above else None
        extra = key.extra_key
        if extra in self._lora:
            lora = self._lora[extra]
        else:
            lora = self._lora[extra] = self.config.event_lora_name(extra)
        self._enqueue(
            BlockStored(
                block_ids(digests, seed),
                parent_id,
                shown,
                page,
                cache_salt=key.cache_salt,
                session_id=session_id,
                lora_name=lora,
            )
        )

    def record_remove(self, node: TreeNode) -> None:
        """An evicted node's pages are gone: queue one ``BlockRemoved`` (ids as stored)."""
        digests = node.page_digests or ()
        if digests:
            seed = self._seed(node.key.extra_key, node.key.cache_salt)
            self._enqueue(BlockRemoved(block_ids(digests, seed)))

    def on_split(self, upper: TreeNode, lower: TreeNode, split_len: int) -> None:
        """``lower`` was split after ``split_len`` tokens into ``upper`` + ``lower``: the
        upper half takes the first ``split_len // page_size`` digests. Mutates both."""
        digests = lower.page_digests
        if digests is not None:
            k = split_len // self.page_size
            upper.page_digests, lower.page_digests = digests[:k], digests[k:]

    def record_all_cleared(self) -> None:
        """The tree was reset: queue one ``AllBlocksCleared``."""
        self._enqueue(AllBlocksCleared())

    def take(self) -> list[KVEvent]:
        """The events queued since the last call, in order (and clear the queue)."""
        out, self._queue = self._queue, []
        return out
