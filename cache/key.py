"""Radix keys: token ids plus a namespace, and the child-dict key of a page.

Mirrors SGLang ``RadixKey`` / ``get_child_key`` (python/sglang/srt/mem_cache/radix_cache.py
@ a7ec6b97). Token ids are held in ``array('q')`` (int64, contiguous) so that slice compares run
in C and a ``memoryview`` can be taken without a copy.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from typing import overload

ChildKey = int | tuple[int, ...] | tuple[str, int | tuple[int, ...]]


class RadixKey:
    """A sequence of token ids in one namespace.

    ``token_ids``: ``array('q')`` of token ids (int64). ``extra_key``: namespace string (e.g. a
    LoRA id); keys of different namespaces never share a prefix, and comparing them raises
    ``ValueError``. Slicing returns a new ``RadixKey`` (a copy of the ids, as SGLang's list slice).
    """

    __slots__ = ("extra_key", "token_ids")

    def __init__(self, token_ids: Iterable[int] | array, extra_key: str | None = None) -> None:
        if isinstance(token_ids, array) and token_ids.typecode == "q":
            self.token_ids = token_ids
        else:
            self.token_ids = array("q", token_ids)
        self.extra_key = extra_key

    def __len__(self) -> int:
        return len(self.token_ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self.token_ids)

    @overload
    def __getitem__(self, idx: int) -> RadixKey: ...
    @overload
    def __getitem__(self, idx: slice) -> RadixKey: ...
    def __getitem__(self, idx: int | slice) -> RadixKey:
        """``key[i]`` is a one-token key; ``key[a:b]`` a sub-key. Raises ``IndexError``."""
        if isinstance(idx, slice):
            return RadixKey(self.token_ids[idx], self.extra_key)
        return RadixKey(array("q", (self.token_ids[idx],)), self.extra_key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RadixKey):
            return NotImplemented
        return self.extra_key == other.extra_key and self.token_ids == other.token_ids

    __hash__ = None  # type: ignore[assignment]  # mutable, like the token list it wraps

    def __repr__(self) -> str:
        head = list(self.token_ids[:8])
        more = "..." if len(self.token_ids) > 8 else ""
        return f"RadixKey(len={len(self)}, extra_key={self.extra_key!r}, ids={head}{more})"


def check_namespaces(a: RadixKey, b: RadixKey) -> None:
    """Raise ``ValueError`` if two keys live in different namespaces (SGLang _check_extra_key)."""
    if a.extra_key != b.extra_key:
        raise ValueError(
            f"cannot match keys of different namespaces: {a.extra_key!r} vs {b.extra_key!r}"
        )


def child_key(tokens: array, offset: int, page_size: int, extra_key: str | None) -> ChildKey:
    """Key of the child dict entry for ``tokens[offset:]``.

    ``page_size == 1``: the token id; otherwise the tuple of the first page's ids. A namespace
    wraps it as ``(extra_key, plain)``. Mirrors SGLang ``get_child_key`` @ a7ec6b97.
    """
    plain: int | tuple[int, ...]
    plain = tokens[offset] if page_size == 1 else tuple(tokens[offset : offset + page_size])
    if extra_key is None:
        return plain
    return (extra_key, plain)
