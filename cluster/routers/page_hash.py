"""Page keys of a request's prompt for the routers' own indexes.

:func:`prefix_keys`: one 64-bit key per whole page of tokens that identifies the whole prefix
up to that page (a chained hash), computed with numpy in O(tokens) and no Python loop: the page
hash ``p_j = sum_k w_k * t_{j,k}`` (fixed random odd weights) chained polynomially,
``H_j = H_{j-1} * B + p_j + 1 (mod 2**64)``, evaluated as ``B**j * cumsum((p_k + 1) * B**-k)``
(``B`` odd, so invertible mod 2**64; numpy's uint64 arithmetic wraps). Two different prefixes
collide with probability about 2**-64 per pair: an approximate index may treat keys as
prefixes. Used by the approximate tree of ``cache-aware`` (lightseekorg/smg
``crates/kv_index/src/token_tree.rs`` works on 16-token pages, ``PAGE_SIZE``, ``:44``).

:func:`engine_block_ids`: the ids an engine's KV events give the same pages (sglang 0.5.23's
SHA-256 chain, :mod:`radixbench.cache.kv_events`), for routers fed by events.
"""

from __future__ import annotations

from array import array

import numpy as np

from radixbench.cache.kv_events import block_ids, page_digests

__all__ = ["engine_block_ids", "prefix_keys"]

_RNG = np.random.default_rng(0x5EED)
_B = np.uint64(0x9E3779B97F4A7C15)  # odd
_B_INV = np.uint64(pow(int(_B), -1, 1 << 64))
_weights: dict[int, np.ndarray] = {}
_pow: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]


def _page_weights(page: int) -> np.ndarray:
    """int64 ``[page]``: odd weights (as int64 bit patterns: products and sums wrap mod 2**64
    alike in signed and unsigned arithmetic)."""
    if page not in _weights:
        w = _RNG.integers(1, 1 << 63, size=page, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        _weights[page] = w.view(np.int64)
    return _weights[page]


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``B**j`` and ``B**-j`` for ``j < n`` (uint64, wrapping), grown on demand."""
    if _pow[0].size < n:
        size = max(n, 2 * _pow[0].size)
        with np.errstate(over="ignore"):
            fwd = np.concatenate(([np.uint64(1)], np.cumprod(np.full(size - 1, _B, np.uint64))))
            inv = np.concatenate(([np.uint64(1)], np.cumprod(np.full(size - 1, _B_INV, np.uint64))))
        _pow[0], _pow[1] = fwd, inv
    return _pow[0][:n], _pow[1][:n]


def prefix_keys(tokens: array | np.ndarray, page: int) -> np.ndarray:
    """uint64 ``[len(tokens) // page]``: the chained key of each whole page's prefix (a last
    partial page gets none). Mutates nothing."""
    t = np.frombuffer(tokens, dtype=np.int64) if isinstance(tokens, array) else tokens
    n = len(t) // page
    if n == 0:
        return np.empty(0, np.uint64)
    pages = t[: n * page].reshape(n, page)  # a view: no copy of the tokens
    with np.errstate(over="ignore"):
        p = (pages @ _page_weights(page)).view(np.uint64) + np.uint64(1)
        fwd, inv = _powers(n)
        return fwd * np.cumsum(p * inv, dtype=np.uint64)


def engine_block_ids(tokens: array, page: int) -> list[int]:
    """The KV-event block ids (no namespace) of every whole page of ``tokens``, as an engine
    of ``page`` tokens per page publishes them (sglang 0.5.23's chain from the root)."""
    n = len(tokens) // page * page
    if n == 0:
        return []
    return block_ids(page_digests(tokens[:n], page, None))
