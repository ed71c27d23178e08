"""radixbench's keys, pools and requests as SGLang's caches see them, and the request path
both adapters share.

SGLang's ``RadixCache`` (``SGLangCache``, :mod:`radixbench.cache.sglang.legacy`) and
``UnifiedRadixCache`` (``ServedSGLangCache``, :mod:`radixbench.cache.sglang.served`) get
SGLang ``RadixKey`` s of radixbench's keys (:func:`sglang_key`), are built on shims over
radixbench's allocator and ``req_to_token`` table, and checkpoint proxies of radixbench's
requests; :func:`release_kv_cache` is sglang 0.5.23's ``release_kv_cache``
(``mem_cache/common.py:400-444``) for a FULL tree, run by both adapters.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import torch

from radixbench.cache.allocator import ReqToTokenPool, TokenToKVPoolAllocator
from radixbench.cache.key import RadixKey


def sglang_key(
    radix_key: Callable[..., Any], key: RadixKey, label: str, copy: bool, takes_limit: bool
) -> Any:
    """SGLang's ``RadixKey`` (the load's class ``radix_key``) of radixbench's ``key``: its
    tokens, ``extra_key`` and ``cache_salt``. A limit that cuts the key is passed on as
    ``limit=`` (no copy) where SGLang takes one (``takes_limit``: sglang 0.5.23's does) and no
    ``copy`` is asked, else the first ``len(key)`` tokens are copied; ``copy``: the tokens are
    copied (a key the tree keeps). Raises ``ValueError`` (naming ``label``) for a bigram (EAGLE)
    key: SGLang keys raw tokens and turns the whole tree bigram with ``is_eagle``, radixbench
    packs bigrams per key."""
    if key.is_bigram:
        raise ValueError(
            f"{label}: bigram (EAGLE) keys are not supported by the SGLang adapters (SGLang keys "
            "raw tokens and turns the whole tree bigram with is_eagle)"
        )
    ids, n = key.token_ids, len(key)
    if n < len(ids):
        if takes_limit and not copy:
            return radix_key(ids, key.extra_key, cache_salt=key.cache_salt, limit=n)
        return radix_key(ids[:n], key.extra_key, cache_salt=key.cache_salt)
    return radix_key(ids[:] if copy else ids, key.extra_key, cache_salt=key.cache_salt)


class AllocatorShim:
    """The ``token_to_kv_pool_allocator`` SGLang sees: frees go to radixbench's allocator, as
    copies. sglang 0.5.23's allocators never keep the tensor they free (``torch.cat`` into the
    free list, ``allocator/token.py:73``; ``torch.unique`` of its pages, ``paged.py:333``), and
    SGLang frees views of a ``req_to_token`` row it then rewrites (``_insert_cache``), while
    radixbench's allocator keeps what it is given (its class docstring, Ownership)."""

    def __init__(self, allocator: TokenToKVPoolAllocator, page_size: int) -> None:
        self.allocator = allocator
        self.device = allocator.device
        self.page_size = page_size

    def free(self, indices: torch.Tensor) -> None:
        if indices.numel():
            self.allocator.free(indices.to(torch.int64, copy=True))

    def free_segment(self, indices: torch.Tensor, start_pos: int = 0) -> None:
        if indices.numel():
            self.allocator.free(indices.to(torch.int64, copy=True))

    def available_size(self) -> int:
        return self.allocator.available_size()


class ServedAllocatorShim(AllocatorShim):
    """The allocator ``UnifiedRadixCache`` sees: frees go to radixbench's allocator (copies);
    no Mamba donor (``evict_for_alloc``). ``group()`` collects the frees of a block and frees
    them in one call at its end, as sglang 0.5.23's free group (``free_group_begin`` /
    ``free_group_end``, ``allocator/base.py:213-220``: one ``free(torch.cat(pending))``), which
    its scheduler opens around every batch's result processing, checkpoints included
    (``batch_result_processor.py:264,501``). The unified insert frees duplicates node by node
    (``unified_tree_core.py:1351-1362``); a paged ``free`` sorts its pages (``torch.unique``), so
    without the group the free list's page order (not the set) would depend on the tree's
    node boundaries."""

    _pending: list[torch.Tensor] | None = None

    def free(self, indices: torch.Tensor) -> None:
        if self._pending is None:
            super().free(indices)
        elif indices.numel():
            self._pending.append(indices.to(torch.int64, copy=True))

    def free_segment(self, indices: torch.Tensor, start_pos: int = 0) -> None:
        self.free(indices)

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        self._pending = []
        try:
            yield
        finally:
            pending, self._pending = self._pending, None
            if pending:
                self.allocator.free(torch.cat(pending))

    def mamba_full_cache_donor(self) -> None:
        return None


class ReqToTokenShim:
    """The ``req_to_token_pool`` SGLang sees: radixbench's int32 ``req_to_token`` table."""

    def __init__(self, pool: ReqToTokenPool) -> None:
        self.req_to_token = pool.req_to_token

    def write(self, indices: tuple[int, slice], values: torch.Tensor) -> None:
        self.req_to_token[indices] = values.to(self.req_to_token.dtype)


class LegacyReqProxy:
    """What 0.5.23's ``RadixCache.checkpoint`` / ``_insert_cache`` (``radix_cache.py:450,510``)
    read and write of a ``Req``: the tokens (``req.token_ids()``), ``kv`` (row, protected /
    inserted lengths, ``swa_evict_floor = 0``), namespace, priority, the prompt's length, lock
    and ``last_node``."""

    def __init__(self, req: Any) -> None:
        self.full_untruncated_fill_ids: array = req.token_ids()
        self.kv = SimpleNamespace(
            req_pool_idx=req.req_pool_idx,
            cache_protected_len=req.cache_protected_len,
            cache_inserted_len=req.cache_inserted_len,
            swa_evict_floor=0,  # no sliding window: ceil_align (stubbed) is never called
        )
        self.extra_key = req.extra_key
        self.cache_salt = getattr(req, "cache_salt", None)
        self.priority = req.priority
        self.origin_input_ids = range(req.origin_input_len)  # only its len is read
        self.lock = req.lock
        self.last_node = req.last_node


class ServedReqProxy:
    """What ``checkpoint_into_tree`` (``unified_radix_cache.py:1164``) reads and writes of a
    ``Req``: ``full_untruncated_fill_ids``, ``origin_input_ids`` (their tokens: the prompt key
    splits the leaf), ``kv`` (row, protected / inserted lengths), namespace, priority, lock,
    ``last_node``, ``finished()``, ``session_id`` (its inserts' ``InsertParams.session_id``,
    which the KV events carry; ``None`` when the request has none); no streaming session or
    rotation base."""

    def __init__(self, req: Any, finished: bool) -> None:
        tokens = req.token_ids()
        self.full_untruncated_fill_ids = tokens
        self.origin_input_ids = tokens[: req.origin_input_len]
        self.kv = SimpleNamespace(
            req_pool_idx=req.req_pool_idx,
            cache_protected_len=req.cache_protected_len,
            cache_inserted_len=req.cache_inserted_len,
        )
        self.extra_key = req.extra_key
        self.cache_salt = getattr(req, "cache_salt", None)
        self.priority = req.priority
        self.session = self.kv_rotation_base = None
        self.session_id = getattr(req, "session_id", None)
        self.lock = req.lock
        self.last_node = req.last_node
        self._finished = finished

    def finished(self) -> bool:
        return self._finished


def write_back(proxy: LegacyReqProxy | ServedReqProxy, req: Any) -> None:
    """Copy what SGLang's ``checkpoint`` changed on ``proxy`` onto ``req``:
    ``cache_protected_len``, ``cache_inserted_len``, ``lock``, ``last_node``."""
    req.cache_protected_len = proxy.kv.cache_protected_len
    req.cache_inserted_len = proxy.kv.cache_inserted_len
    req.lock = proxy.lock
    req.last_node = proxy.last_node


def release_kv_cache(
    pool: ReqToTokenPool | None,
    allocator: TokenToKVPoolAllocator,
    req: Any,
    owned_len: int,
    final_checkpoint: Callable[[], None] | None,
    unlock: Callable[[Any], None],
) -> None:
    """sglang 0.5.23's ``release_kv_cache`` (``mem_cache/common.py:400-444``) for a FULL tree:
    ``final_checkpoint()`` when given (the request's last ``checkpoint``; the adapters pass
    their untimed one, as radixbench's ``release`` calls an untimed helper); free a copy of
    ``req_to_token[row, cache_protected_len:owned_len]`` through ``allocator`` (the row goes to
    the next request; ``free_kv_row`` frees through the allocator, which copies); ``unlock(
    req.lock)``; ``req.lock = req.last_node = None``; free the row. Slots allocated beyond
    ``owned_len`` are the caller's (``_release_overallocated_kv_indices``). Run here rather than
    by calling SGLang's function: its ``free_kv_row`` imports ``common`` at run time and the
    rest needs a whole ``Req``. Raises ``RuntimeError`` when ``pool`` is None."""
    if pool is None:
        raise RuntimeError("release needs a ReqToTokenPool")
    if final_checkpoint is not None:
        final_checkpoint()
    start = req.cache_protected_len
    if owned_len > start:
        row = pool.req_to_token[req.req_pool_idx, start:owned_len]
        allocator.free(row.to(torch.int64, copy=True))
    unlock(req.lock)
    req.lock = None
    req.last_node = None
    pool.free(req.req_pool_idx)
