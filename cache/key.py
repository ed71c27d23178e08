"""Radix keys: token ids plus a namespace, and the child-dict key of a page.

Mirrors ``RadixKey`` and its ``child_key`` / ``child_key_at`` of sglang 0.5.23
(``sglang/srt/mem_cache/radix_cache.py``). Token ids are held in ``array('q')`` (int64,
contiguous), as in 0.5.23, so that slice compares run in C and a ``memoryview`` can be taken
without a copy. Differences that stay on purpose (docs/SGLANG-FIDELITY.md): EAGLE bigram keys
hold packed bigrams (0.5.23 keeps the raw tokens with ``is_bigram=True`` and pairs them up in
``__iter__`` / ``child_key_at`` / ``match_at``); bigram-ness is part of the namespace, so one tree
can hold both kinds (0.5.23 switches a whole tree with ``is_eagle``); a ``cache_salt`` of ``""``
is a namespace of its own (0.5.23 maps it to ``None``). ``limit`` caps a key's tokens without a
copy, as 0.5.23's: the admission match of a request's tokens minus the last.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from typing import overload

ChildKey = int | tuple[int, ...] | tuple[object, int | tuple[int, ...]]
Namespace = str | tuple[str | None, str | None, bool] | None

#: A bigram ``(a, b)`` of two token ids in ``[0, 2**31)`` is packed into one int64 as
#: ``a << 32 | b``, an injective map, so bigram keys stay ``array('q')`` and every matcher applies.
BIGRAM_SHIFT = 32
_BIGRAM_MAX = 1 << 31


def to_bigrams(tokens: Iterable[int]) -> array:
    """EAGLE bigram ids of raw tokens: ``L`` tokens give ``L-1`` packed bigrams
    ``tokens[i] << 32 | tokens[i+1]`` (``[]`` when ``L < 2``): the pairs ``(t[i], t[i+1])`` of
    0.5.23's bigram view (``RadixKey`` with ``is_bigram=True``, which keeps the raw tokens and
    builds the pairs on demand; SGLang before 0.5.23 materialized them with
    ``_convert_to_bigram_key``), one int each. Raises ``ValueError`` for a token outside
    ``[0, 2**31)``."""
    t = tokens if isinstance(tokens, array) else array("q", tokens)
    if len(t) and (min(t) < 0 or max(t) >= _BIGRAM_MAX):
        raise ValueError("bigram keys need token ids in [0, 2**31)")
    return array("q", ((t[i] << BIGRAM_SHIFT) | t[i + 1] for i in range(len(t) - 1)))


class RadixKey:
    """A sequence of token ids in one namespace. Mirrors ``RadixKey`` of sglang 0.5.23.

    ``token_ids``: ``array('q')`` of token ids (int64), or of packed bigrams when ``is_bigram``.
    Namespace: ``extra_key`` (e.g. a LoRA id), ``cache_salt`` (per-user isolation; 0.5.23 keeps
    it as a separate field too and wraps child keys as ``((extra_key, cache_salt), plain)``) and
    ``is_bigram`` (EAGLE keys). Keys of different namespaces never share a prefix (the namespace
    is part of every child key) and comparing them raises ``ValueError``. Slicing returns a new
    ``RadixKey`` (a copy, as 0.5.23's ``array`` slice) in the same namespace; ``key[i]`` a
    one-token key (0.5.23 likewise). Build bigram keys with ``RadixKey.bigram``.

    ``limit`` (0.5.23 ``RadixKey.limit``): the key behaves as ``token_ids[:limit]`` (length,
    iteration, slicing, equality, matching, inserting) without copying ``token_ids``; ``None``
    (or a limit past the end) is no cap. Code that reads ``token_ids`` itself takes
    :meth:`raw` (or ``len(key)`` of it) when a key may carry a limit.
    """

    __slots__ = ("cache_salt", "extra_key", "is_bigram", "limit", "namespace", "token_ids")

    def __init__(
        self,
        token_ids: Iterable[int] | array,
        extra_key: str | None = None,
        cache_salt: str | None = None,
        is_bigram: bool = False,
        limit: int | None = None,
    ) -> None:
        if limit is not None and limit < 0:
            raise ValueError(f"RadixKey limit must be >= 0, got {limit}")
        self.limit = limit
        if isinstance(token_ids, array) and token_ids.typecode == "q":
            self.token_ids = token_ids
        else:
            self.token_ids = array("q", token_ids)
        self.extra_key = extra_key
        self.cache_salt = cache_salt
        self.is_bigram = is_bigram
        ns: Namespace = extra_key
        if cache_salt is not None or is_bigram:
            ns = (extra_key, cache_salt, is_bigram)
        #: What child keys are wrapped with: ``None``, the ``extra_key`` alone (as SGLang), or
        #: ``(extra_key, cache_salt, is_bigram)``.
        self.namespace = ns

    @classmethod
    def bigram(
        cls, raw_tokens: Iterable[int], extra_key: str | None = None, cache_salt: str | None = None
    ) -> RadixKey:
        """EAGLE key: ``L`` raw tokens give ``L-1`` bigrams (see ``to_bigrams``)."""
        return cls(to_bigrams(raw_tokens), extra_key, cache_salt, is_bigram=True)

    def _like(self, ids: array) -> RadixKey:
        return RadixKey(ids, self.extra_key, self.cache_salt, self.is_bigram)

    def __len__(self) -> int:
        n = len(self.token_ids)
        lim = self.limit
        return n if lim is None or lim >= n else lim

    def raw(self) -> array:
        """The key's tokens: ``token_ids`` itself, or a copy of its first ``limit`` when the
        limit cuts it (0.5.23 ``raw_token_ids``)."""
        n = len(self)
        t = self.token_ids
        return t if n == len(t) else t[:n]

    def __iter__(self) -> Iterator[int]:
        return iter(self.raw())

    @overload
    def __getitem__(self, idx: int) -> RadixKey: ...
    @overload
    def __getitem__(self, idx: slice) -> RadixKey: ...
    def __getitem__(self, idx: int | slice) -> RadixKey:
        """``key[i]`` is a one-token key; ``key[a:b]`` a sub-key. Raises ``IndexError``."""
        n = len(self)
        if isinstance(idx, slice):
            if n == len(self.token_ids):
                return self._like(self.token_ids[idx])
            return self._like(self.token_ids[slice(*idx.indices(n))])
        if not -n <= idx < n:
            raise IndexError(f"RadixKey index {idx} out of range for length {n}")
        return self._like(array("q", (self.token_ids[idx % n],)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RadixKey):
            return NotImplemented
        return self.namespace == other.namespace and self.raw() == other.raw()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the token list it wraps

    def __repr__(self) -> str:
        head = list(self.token_ids[: min(8, len(self))])
        more = "..." if len(self) > 8 else ""
        return f"RadixKey(len={len(self)}, namespace={self.namespace!r}, ids={head}{more})"


def check_namespaces(a: RadixKey, b: RadixKey) -> None:
    """Raise ``ValueError`` if two keys live in different namespaces (extra_key, cache_salt or
    bigram-ness differ); sglang 0.5.23 ``RadixKey._check_compatible`` (extra_key, cache_salt)
    plus the bigram-mode check of ``RadixKey.match_at``."""
    if a.namespace != b.namespace:
        raise ValueError(
            f"cannot match keys of different namespaces: {a.namespace!r} vs {b.namespace!r}"
        )


def child_key(tokens: array, offset: int, page_size: int, extra_key: Namespace) -> ChildKey:
    """Key of the child dict entry for ``tokens[offset:]``.

    ``page_size == 1``: the token id; otherwise the tuple of the first page's ids. A namespace
    wraps it as ``(extra_key, plain)``. Mirrors ``RadixKey.child_key_at`` of sglang 0.5.23
    (the same plain keys for token keys, where a bigram's is one packed int instead of 0.5.23's
    pair; 0.5.23 wraps a salted key as ``((extra_key, cache_salt), plain)``, ours wraps salted and
    bigram keys as ``((extra_key, cache_salt, is_bigram), plain)``).
    """
    plain: int | tuple[int, ...]
    plain = tokens[offset] if page_size == 1 else tuple(tokens[offset : offset + page_size])
    if extra_key is None:
        return plain
    return (extra_key, plain)
