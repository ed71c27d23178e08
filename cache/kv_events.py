"""KV cache events: ``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared``, as sglang 0.5.23.

The event classes are plain dataclasses whose fields are those of sglang 0.5.23's msgspec
structs (``disaggregation/kv_events.py:279-304``: ``BlockStored(block_hashes, parent_block_hash,
token_ids, block_size, lora_id, medium, cache_salt, session_id, lora_name)``,
``BlockRemoved(block_hashes, medium)``, ``AllBlocksCleared()``), so a batch converts to the wire
format field for field (:func:`event_to_wire`). They are :class:`~radixbench.cache.interface.
CacheAction` s: a cache emits them through ``PrefixCache.take_actions()``.

Block hashes (pure ``hashlib``, no SGLang code): the tokens of one page are hashed with SHA-256
over the previous page's digest followed by the tokens as little-endian uint32
(``mem_cache/cpp_utils/hash_binding.cpp: hash_page``); a page holding a token >= 2**32 is hashed
as ``0xff`` followed by the tokens as little-endian uint64 (``hash_wide_page``). A node's chain
starts from its parent's last digest (``mem_cache/utils.py:166 compute_node_hash_values``), from
nothing under the root, or — for a key with a namespace (``extra_key`` or ``cache_salt``) under
the root — from ``SHA-256(b"sglang-cache-salt-v1\\0" + salt)`` when it has a salt
(``compute_node_event_hash_values``, ``utils.py:178-214``; the ``extra_key`` never enters the
digests). The published id of a page is the first 8 bytes of its digest, big-endian signed
(``hash_str_to_int64``, ``utils.py:155``), then namespaced (``namespaced_block_hash``,
``kv_events.py:329``): ``SHA-256(seed + id as 8 big-endian signed bytes)[:8]`` with a seed from
``kv_event_namespace_seed`` (``kv_events.py:312``) of the LoRA ``extra_key`` alone when that key
names a LoRA adapter (the default format) or of ``extra_key`` and ``cache_salt`` (the Dynamo
format); no seed leaves the id as it is (``mem_cache/events.py:176-187``).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from radixbench.cache.interface import CacheAction

__all__ = [
    "LORA_ID_LEN",
    "MEDIUM_GPU",
    "AllBlocksCleared",
    "BlockRemoved",
    "BlockStored",
    "KVEvent",
    "KVEventConfig",
    "block_id",
    "block_ids",
    "event_to_wire",
    "namespace_seed",
    "namespaced",
    "page_digests",
    "salt_digest",
]

#: ``StorageMedium.GPU`` (``kv_events.py:264``): the only tier radixbench's cache has.
MEDIUM_GPU = "GPU"

_NAMESPACE_TAG = b"sglang-kv-event-namespace-v1"  # kv_events.py:309
_SALT_TAG = b"sglang-cache-salt-v1\0"  # utils.py:201
_U32 = 1 << 32


@dataclass(slots=True)
class BlockStored(CacheAction):
    """Pages newly held by the tree: ``block_hashes`` (one int64 id per page, root to leaf),
    ``parent_block_hash`` (id of the page just above the first one; ``None`` under the root),
    ``token_ids`` (the pages' tokens, concatenated), ``block_size`` (tokens per page),
    ``medium`` (``"GPU"``), ``cache_salt`` / ``lora_name`` of the key's namespace."""

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None = None
    medium: str | None = MEDIUM_GPU
    cache_salt: str | None = None
    session_id: str | None = None
    lora_name: str | None = None


@dataclass(slots=True)
class BlockRemoved(CacheAction):
    """Pages no longer held: ``block_hashes`` (ids, in the node's order), ``medium``."""

    block_hashes: list[int]
    medium: str | None = MEDIUM_GPU


@dataclass(slots=True)
class AllBlocksCleared(CacheAction):
    """The whole tree was dropped (``reset``)."""

    def __init__(self) -> None:  # no fields (what a dataclass without fields makes, typed)
        pass


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared


#: ``_LORA_ID_LEN`` (``mem_cache/events.py:44``): a request appends its adapter's ``lora_id``
#: (a uuid hex string) to its ``extra_key``, so the key's last 32 characters are the id.
LORA_ID_LEN = 32


@dataclass(frozen=True, slots=True)
class KVEventConfig:
    """What a cache's events look like, sglang 0.5.23's ``KvEventLoraNames`` included
    (``mem_cache/events.py:77-116``). ``dynamo_format``: namespace every id by ``extra_key``
    and ``cache_salt`` (sglang's ``--kv-events-config`` Dynamo format) instead of by the LoRA
    ``extra_key`` alone; ``lora_names``: ``(extra_key, public adapter name)`` pairs, the keys
    that name a LoRA adapter (registered per request, ``KvEventLoraNames.register(req)``; an
    ``extra_key`` not listed is no namespace in the default format); ``lora_adapters``:
    ``(lora_id, public adapter name)`` pairs of the loaded adapters (``register(lora_id=...)``,
    at load time), which only the Dynamo format's ``lora_name`` falls back to."""

    dynamo_format: bool = False
    lora_names: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    lora_adapters: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def with_format(self, dynamo_format: bool) -> KVEventConfig:
        """This configuration in the default or the Dynamo format (LoRA tables kept)."""
        return replace(self, dynamo_format=dynamo_format)

    def lora_name(self, extra_key: str | None) -> str | None:
        """The adapter name of ``extra_key`` in the per-request table (``KvEventLoraNames.get``:
        ``None``, not a LoRA key)."""
        if extra_key is None:
            return None
        return dict(self.lora_names).get(extra_key)

    def resolve_lora_name(self, extra_key: str | None) -> str | None:
        """``KvEventLoraNames.resolve`` (``events.py:111-116``): the per-request table, else
        the adapter whose ``lora_id`` is the last :data:`LORA_ID_LEN` characters of
        ``extra_key``; ``None`` for no or an empty key."""
        if not extra_key:
            return None
        return dict(self.lora_names).get(extra_key) or dict(self.lora_adapters).get(
            extra_key[-LORA_ID_LEN:]
        )

    def event_lora_name(self, extra_key: str | None) -> str | None:
        """A ``BlockStored``'s ``lora_name`` (``KVCacheEventRecorder.record_store``,
        ``events.py:227-231``): resolved in the Dynamo format, the per-request table's else."""
        if self.dynamo_format:
            return self.resolve_lora_name(extra_key)
        return self.lora_name(extra_key)


def salt_digest(cache_salt: str) -> bytes:
    """The digest a salted chain starts from (``utils.py:199-202``)."""
    return hashlib.sha256(_SALT_TAG + cache_salt.encode("utf-8")).digest()


def page_digests(
    tokens: array | Iterable[int], page_size: int, prior: bytes | None, unit: int = 1
) -> list[bytes]:
    """SHA-256 digest of each page of ``tokens`` (a last partial page included), each chained
    over the previous one, the first over ``prior`` (``None``: nothing). ``unit``: ints per
    logical token (2 for bigram pairs). Tokens must be >= 0 (``OverflowError`` otherwise).
    Mutates nothing. A page of tokens all below 2**32 is hashed as their uint32 little-endian
    bytes, one with a larger token as ``0xff`` then uint64 words (``hash_wide_page``)."""
    t = tokens if isinstance(tokens, array) and tokens.typecode == "q" else array("q", tokens)
    n, step = len(t), page_size * unit
    out: list[bytes] = []
    if not n:
        return out
    sha = hashlib.sha256
    a = np.frombuffer(t, dtype=np.int64)
    if int(a.min()) < 0:
        raise OverflowError(f"page_digests: negative token {int(a.min())}")
    if int(a.max()) < _U32:  # every page narrow: one conversion, then one sha per page
        data = a.astype("<u4").tobytes()
        width, first = 4 * step, 0
        append = out.append
        if prior is None:
            prior = sha(data[:width]).digest()
            append(prior)
            first = width
        for start in range(first, len(data), width):
            prior = sha(prior + data[start : start + width]).digest()
            append(prior)
        return out
    for start in range(0, n, step):
        chunk = a[start : start + step]
        if int(chunk.max()) >= _U32:  # hash_wide_page: 0xff, then uint64 words
            page = b"\xff" + chunk.astype("<u8").tobytes()
        else:
            page = chunk.astype("<u4").tobytes()
        prior = sha(prior + page if prior is not None else page).digest()
        out.append(prior)
    return out


def block_id(digest: bytes) -> int:
    """The published id of a page digest: its first 8 bytes, big-endian signed."""
    return int.from_bytes(digest[:8], "big", signed=True)


def block_ids(digests: Sequence[bytes], seed: bytes | None = None) -> list[int]:
    """``[namespaced(block_id(d), seed) for d in digests]`` for 32-byte SHA-256 digests: the
    ids read in one numpy pass (each digest's first 8 bytes, big-endian signed). Mutates
    nothing."""
    if not digests:
        return []
    ids: list[int] = np.frombuffer(b"".join(digests), dtype=">i8")[::4].tolist()
    if seed is None:
        return ids
    return [namespaced(b, seed) for b in ids]


def namespace_seed(extra_key: str | None, cache_salt: str | None) -> bytes | None:
    """``kv_event_namespace_seed`` (``kv_events.py:312-326``): ``None`` for no namespace."""
    if extra_key is None and cache_salt is None:
        return None
    h = hashlib.sha256(_NAMESPACE_TAG)
    for part in (extra_key, cache_salt):
        if part is None:
            h.update(b"\x00")
            continue
        encoded = part.encode("utf-8")
        h.update(b"\x01" + len(encoded).to_bytes(8, "little") + encoded)
    return h.digest()


def namespaced(block: int, seed: bytes | None) -> int:
    """``namespaced_block_hash`` (``kv_events.py:329-340``)."""
    if seed is None:
        return block
    digest = hashlib.sha256(seed + block.to_bytes(8, "big", signed=True)).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def event_to_wire(event: Any) -> dict[str, Any]:
    """The msgpack/JSON map sglang 0.5.23's msgspec classes encode ``event`` as: tag ``type``
    (the class name), the required fields, the optional ones (defaults ``None``) only when set
    (``KVCacheEvent``: ``tag=True, omit_defaults=True``, ``kv_events.py:243-258``). Accepts
    radixbench's events and sglang's own (their fields are the same). Raises ``TypeError``
    for anything else."""
    kind = type(event).__name__
    if kind == "BlockStored":
        out = {
            "type": kind,
            "block_hashes": list(event.block_hashes),
            "parent_block_hash": event.parent_block_hash,
            "token_ids": list(event.token_ids),
            "block_size": event.block_size,
            "lora_id": event.lora_id,
        }
        for name in ("medium", "cache_salt", "session_id", "lora_name"):
            value = getattr(event, name)
            if value is not None:
                out[name] = getattr(value, "value", value)
        return out
    if kind == "BlockRemoved":
        out = {"type": kind, "block_hashes": list(event.block_hashes)}
        if event.medium is not None:
            out["medium"] = getattr(event.medium, "value", event.medium)
        return out
    if kind == "AllBlocksCleared":
        return {"type": kind}
    raise TypeError(f"not a KV cache event: {type(event).__name__}")


def lora_table(names: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``KVEventConfig.lora_names`` from a mapping or pairs (sorted, for a stable config)."""
    items = names.items() if isinstance(names, Mapping) else names
    return tuple(sorted((str(k), str(v)) for k, v in items))
