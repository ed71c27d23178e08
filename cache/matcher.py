"""Prefix matchers: length of the common prefix of a node's key and the rest of a query key.

All matchers answer the same question, ``common_prefix(a, b, offset, page_size)``: the length of
the longest common prefix of ``a`` and ``b[offset:]`` rounded down to a whole page. They differ only
in how they compare, which is what the workbench measures. Registered by name.

``linear`` and ``galloping`` are SGLang-faithful and copy the query suffix ``b[offset:]`` at every
node, as SGLang's walk does (``key = key[prefix_len:]``). ``memview`` and ``numpy`` copy nothing:
the walk passes the whole query and an offset, and they compare zero-copy views.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from array import array
from typing import ClassVar

import numpy as np


class Matcher(ABC):
    """Computes common-prefix lengths in tokens. Stateless; mutates nothing."""

    name: ClassVar[str]

    @abstractmethod
    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        """Tokens ``n`` (a multiple of ``page_size``) with ``a[:n] == b[offset:offset+n]``.

        ``a``, ``b``: ``array('q')`` token ids; ``offset``: start of the unmatched rest of ``b``
        (a multiple of ``page_size``). Result is maximal among page multiples.
        """


class LinearMatcher(Matcher):
    """Per-token Python loop; SGLang before PR #27364 (``_key_match_page_size1`` /
    ``_key_match_paged`` @ a7ec6b97).

    Like SGLang's tree walk (``key = key[prefix_len:]`` at every node), it first copies the
    remaining query suffix, so its cost on deep paths includes those copies.
    """

    name = "linear"

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        rest = b[offset:]
        if page_size == 1:
            i = 0
            for x, y in zip(a, rest):
                if x != y:
                    break
                i += 1
            return i
        n = min(len(a), len(rest))
        i = 0
        while i < n:
            if a[i : i + page_size] != rest[i : i + page_size]:
                break
            i += page_size
        return min(i, n) // page_size * page_size


class GallopingMatcher(Matcher):
    """Exponential then binary search on slice compares; SGLang PR #27364.

    Compares slices of doubling length ``[lo, lo+step)`` until one differs, then bisects that
    slice, so a match of length ``m`` costs O(log m) C-level slice compares. Each compare copies
    its two slices, and, as in SGLang's walk, the query suffix is copied at every node.
    """

    name = "galloping"

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        rest = b[offset:]
        n = min(len(a), len(rest))
        lo, step = 0, page_size
        while True:
            if lo >= n:
                return n // page_size * page_size
            hi = min(lo + step, n)
            if a[lo:hi] != rest[lo:hi]:
                break
            lo, step = hi, step * 2
        # Invariant: a[:lo] == rest[:lo] and the first mismatch lies in [lo, hi).
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[lo:mid] == rest[lo:mid]:
                lo = mid
            else:
                hi = mid
        return lo // page_size * page_size


def _gallop(eq, n: int, page_size: int) -> int:
    """Longest page-multiple ``m <= n`` with ``eq(0, m)``, given ``eq(lo, hi)`` tells whether the
    two keys agree on ``[lo, hi)``. Galloping (doubling) then bisection: O(log m) range compares
    whose total length is O(m)."""
    lo, step = 0, page_size
    while True:
        if lo >= n:
            return n // page_size * page_size
        hi = min(lo + step, n)
        if not eq(lo, hi):
            break
        lo, step = hi, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if eq(lo, mid):
            lo = mid
        else:
            hi = mid
    return lo // page_size * page_size


class MemviewMatcher(Matcher):
    """Galloping search on zero-copy ``memoryview`` slices of the two ``array('q')`` buffers.

    Same compares as ``galloping``, but neither the query suffix nor any compared slice is copied:
    ``memoryview(a)[lo:hi] == memoryview(b)[offset+lo:offset+hi]`` compares the buffers in place
    (CPython compares memoryviews item by item in C). Taking a memoryview is O(1), so a deep walk
    costs O(matched tokens) compare work, never O(depth x key length) copying.
    """

    name = "memview"

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        mb = memoryview(b)
        ma = memoryview(a)
        n = min(len(a), len(b) - offset)
        if n <= 0:
            return 0
        return _gallop(lambda lo, hi: ma[lo:hi] == mb[offset + lo : offset + hi], n, page_size)


class NumpyMatcher(Matcher):
    """Chunked mismatch search on zero-copy ``np.frombuffer`` int64 views of the two arrays.

    Compares chunks of doubling length (``page_size`` up to 64 Ki tokens) with one vectorised
    ``!=``, whose only temporary is a bool mask of the chunk (1 byte/token, never a copy of the
    keys); the first ``True`` of the first mismatching chunk is the answer. Nothing of the query
    suffix is copied (``np.frombuffer`` is an O(1) view).
    """

    name = "numpy"
    max_chunk: ClassVar[int] = 1 << 16

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        n = min(len(a), len(b) - offset)
        if n <= 0:
            return 0
        va = np.frombuffer(a, dtype=np.int64)
        vb = np.frombuffer(b, dtype=np.int64)
        lo, step = 0, min(max(page_size, 8), n)
        while lo < n:
            hi = min(lo + step, n)
            diff = va[lo:hi] != vb[offset + lo : offset + hi]
            k = int(diff.argmax())
            if diff[k]:
                return (lo + k) // page_size * page_size
            lo = hi
            step = min(step * 2, self.max_chunk)
        return n // page_size * page_size


MATCHERS: dict[str, type[Matcher]] = {
    cls.name: cls for cls in (LinearMatcher, GallopingMatcher, MemviewMatcher, NumpyMatcher)
}


def make_matcher(name: str) -> Matcher:
    """Instantiate a matcher by name; raises ``ValueError`` naming the known ones."""
    try:
        return MATCHERS[name]()
    except KeyError:
        raise ValueError(f"unknown matcher {name!r}; known: {', '.join(MATCHERS)}") from None
