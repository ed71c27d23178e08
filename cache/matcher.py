"""Prefix matchers: length of the common prefix of a node's key and the rest of a query key.

All matchers answer the same question, ``common_prefix(a, b, offset, page_size)``: the length of
the longest common prefix of ``a`` and ``b[offset:]`` rounded down to a whole page. They differ only
in how they compare, which is what the workbench measures. Registered by name.

``linear`` and ``galloping`` are SGLang-faithful: like SGLang's walk (``key = key[prefix_len:]``
after every fully matched node) they compare against a copy of the query suffix ``b[offset:]``
at every node below the root, and against the query itself at the root (no copy there).
``memview``, ``numpy`` and ``memcmp`` copy nothing: the walk passes the whole query and an
offset, and they compare the buffers in place (zero-copy memoryviews, numpy views, libc memcmp).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable
from typing import ClassVar, cast

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
    ``_key_match_paged`` of ``radix_cache.py``, e.g. sglang 0.5.0).

    Like SGLang's tree walk (``key = key[prefix_len:]`` after each fully matched node), below the
    root it compares against a copy of the remaining query suffix, so its cost on deep paths
    includes those copies.
    """

    name = "linear"

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        rest = b[offset:] if offset else b
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
    """Exponential then binary search on slice compares: how sglang 0.5.23's ``RadixCache``
    matches (``RadixKey.match`` -> ``match_at(other, offset=0)``, PR #27364).

    Compares token slices ``[lo, lo+step)`` with ``step`` = 1, 2, 4, … until one differs, then
    bisects that slice, so a match of length ``m`` costs O(log m) C-level slice compares; the
    result is rounded down to a page. Each compare copies its two slices, and, as 0.5.23's walk
    (``key = key[prefix_len:]`` after each fully matched node, ``match`` on the sliced key), the
    query suffix is copied once per node below the root.
    """

    name = "galloping"

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        rest = b[offset:] if offset else b
        la, lr = len(a), len(rest)
        n = la if la < lr else lr
        lo, step = 0, 1
        while lo < n:  # the loop of 0.5.23's match_at, statement for statement
            hi = lo + step if lo + step < n else n
            if a[lo:hi] != rest[lo:hi]:
                # a[:lo] == rest[:lo] and the first mismatch lies in [lo, hi)
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if a[lo:mid] == rest[lo:mid]:
                        lo = mid
                    else:
                        hi = mid
                return lo // page_size * page_size
            lo = hi
            step *= 2
        return n // page_size * page_size


def _memview_prefix(ma: memoryview, mb: memoryview, lo: int, n: int, offset: int) -> int:
    """Longest ``m`` in ``[lo, n]`` with ``ma[lo:m] == mb[offset+lo:offset+m]``, given that
    ``[0, lo)`` agrees. One in-place compare of the whole range first (CPython stops at the first
    differing item), then galloping + bisection on zero-copy slices only if it differs."""
    if ma[lo:n] == mb[offset + lo : offset + n]:
        return n
    step = 8
    while True:
        hi = min(lo + step, n)
        if ma[lo:hi] != mb[offset + lo : offset + hi]:
            break
        lo, step = hi, step * 2
    while hi - lo > 1:  # the first mismatch lies in [lo, hi)
        mid = (lo + hi) // 2
        if ma[lo:mid] == mb[offset + lo : offset + mid]:
            lo = mid
        else:
            hi = mid
    return lo


class MemviewMatcher(Matcher):
    """In-place compares of zero-copy ``memoryview`` slices of the two ``array('q')`` buffers.

    First compares the whole overlap ``memoryview(a)[:n] == memoryview(b)[offset:offset+n]``
    in place (CPython compares memoryviews item by item in C and stops at the first difference);
    only if it differs, gallops then bisects on zero-copy slices to find the mismatch. Neither the
    query suffix nor any slice is copied, and taking a memoryview is O(1), so a deep walk costs
    O(matched tokens) compare work, never O(depth x key length) copying.
    """

    name = "memview"

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        n = min(len(a), len(b) - offset)
        if n <= 0:
            return 0
        return _memview_prefix(memoryview(a), memoryview(b), 0, n, offset) // page_size * page_size


class NumpyMatcher(Matcher):
    """Vectorised mismatch search on zero-copy ``np.frombuffer`` int64 views, for long edges.

    Overlaps up to ``short`` tokens (where numpy's per-call overhead of a few µs would dominate)
    are compared as in ``memview``. Longer ones: the first ``short`` tokens by memview, then
    chunks of doubling length (from ``short`` up to ``max_chunk`` tokens) with one vectorised
    ``!=`` each, whose only temporary is a bool mask of the chunk (1 byte/token, never a copy of
    the keys); the first ``True`` of the first mismatching chunk is the answer. Nothing of the
    query suffix is copied (``np.frombuffer`` is an O(1) view).
    """

    name = "numpy"
    short: ClassVar[int] = 4096
    max_chunk: ClassVar[int] = 1 << 18

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        n = min(len(a), len(b) - offset)
        if n <= 0:
            return 0
        ma, mb = memoryview(a), memoryview(b)
        short = self.short
        if n <= short:
            return _memview_prefix(ma, mb, 0, n, offset) // page_size * page_size
        head = _memview_prefix(ma, mb, 0, short, offset)
        if head < short:
            return head // page_size * page_size
        va = np.frombuffer(a, dtype=np.int64)
        vb = np.frombuffer(b, dtype=np.int64)
        lo, step = short, short
        while lo < n:
            hi = min(lo + step, n)
            diff = va[lo:hi] != vb[offset + lo : offset + hi]
            if diff.any():
                return (lo + int(diff.argmax())) // page_size * page_size
            lo = hi
            step = min(step * 2, self.max_chunk)
        return n // page_size * page_size


def _load_memcmp() -> Callable[[int, int, int], int] | None:
    """libc ``memcmp(void*, void*, size_t)`` through ctypes, or ``None`` where no libc is found."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).memcmp
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
    return cast(Callable[[int, int, int], int], fn)


_MEMCMP = _load_memcmp()


class MemcmpMatcher(Matcher):
    """libc ``memcmp`` on the two ``array('q')`` buffers in place, through ctypes.

    One ``memcmp`` of the whole overlap (``8 n`` bytes at the arrays' addresses,
    ``buffer_info()``, O(1)); only if it differs, galloping then bisection with further
    ``memcmp`` calls locate the first differing token. Nothing is copied; each call costs a fixed
    ctypes overhead (~1 µs) plus memcmp at memory speed, so it approaches a whole-array ``==``
    even along deep paths. Where no libc can be loaded it falls back to ``memview``'s compares
    (stated here; the result is the same).
    """

    name = "memcmp"

    def common_prefix(self, a: array, b: array, offset: int, page_size: int) -> int:
        n = min(len(a), len(b) - offset)
        if n <= 0:
            return 0
        memcmp = _MEMCMP
        if memcmp is None:  # pragma: no cover - platforms without a loadable libc
            return (
                _memview_prefix(memoryview(a), memoryview(b), 0, n, offset)
                // page_size
                * (page_size)
            )
        pa = a.buffer_info()[0]
        pb = b.buffer_info()[0] + 8 * offset
        if memcmp(pa, pb, 8 * n) == 0:
            return n // page_size * page_size
        lo, step = 0, 8
        while True:
            hi = min(lo + step, n)
            if memcmp(pa + 8 * lo, pb + 8 * lo, 8 * (hi - lo)) != 0:
                break
            lo, step = hi, step * 2
        while hi - lo > 1:  # the first mismatch lies in [lo, hi)
            mid = (lo + hi) // 2
            if memcmp(pa + 8 * lo, pb + 8 * lo, 8 * (mid - lo)) == 0:
                lo = mid
            else:
                hi = mid
        return lo // page_size * page_size


MATCHERS: dict[str, type[Matcher]] = {
    cls.name: cls
    for cls in (LinearMatcher, GallopingMatcher, MemviewMatcher, NumpyMatcher, MemcmpMatcher)
}


def make_matcher(name: str) -> Matcher:
    """Instantiate a matcher by name; raises ``ValueError`` naming the known ones."""
    try:
        return MATCHERS[name]()
    except KeyError:
        raise ValueError(f"unknown matcher {name!r}; known: {', '.join(MATCHERS)}") from None
