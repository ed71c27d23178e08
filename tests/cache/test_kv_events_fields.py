"""What a KV event says besides its blocks, and how events group, against sglang 0.5.23.

* ``session_id``: a request's checkpoint inserts carry its session
  (``InsertParams.session_id = req.session_id``, ``unified_radix_cache.py:1187``), and the
  ``BlockStored`` of each node they add names it (``unified_tree_core.py:1561``);
* ``lora_name``: in the Dynamo format ``KvEventLoraNames.resolve`` (``mem_cache/events.py:
  111-116``) falls back to the adapter table, keyed by the last 32 characters of ``extra_key``
  (where a request appends its adapter's ``lora_id``); the default format reads the
  per-request table only;
* grouping: the recorder's queue merges a store that continues the tail store's chain and
  consecutive removals (``KVCacheEventRecorder.enqueue``, ``events.py:139-170``).
"""

from __future__ import annotations

import importlib.util
from array import array
from dataclasses import dataclass
from typing import Any

import pytest

from radixbench.cache import CacheConfig, RadixCache, RadixKey, ReqToTokenPool, make_allocator
from radixbench.cache.kv_events import (
    BlockRemoved,
    BlockStored,
    KVEventConfig,
    event_to_wire,
)

ADAPTER_ID = "0123456789abcdef0123456789abcdef"  # a lora_id: 32 hex characters
LORA = KVEventConfig(
    lora_names=(("named-key", "adapter-a"),), lora_adapters=((ADAPTER_ID, "adapter-b"),)
)
KEYS = (None, "", "named-key", ADAPTER_ID, "user-key" + ADAPTER_ID, "x" + ADAPTER_ID[1:], "k")
needs_sglang = pytest.mark.skipif(
    importlib.util.find_spec("sglang") is None, reason="sglang is not installed (make install)"
)


def _cache(impl: str, config: KVEventConfig, page: int = 1) -> Any:
    alloc, pool = make_allocator(64 * page, page), ReqToTokenPool(4, 64 * page)
    conf = CacheConfig(page_size=page, kv_events=config)
    if impl == "radixbench":
        return RadixCache(pool, alloc, conf)
    from radixbench.cache.sglang.events import enable_native_hash
    from radixbench.cache.sglang.served import ServedSGLangCache
    from radixbench.cache.sglang.unified_load import load_unified

    loaded = load_unified("sglang-python" if impl == "python" else "sglang", impl)
    if impl == "python":
        enable_native_hash(loaded)
    return ServedSGLangCache(pool, alloc, conf, loaded)


def _insert(cache: Any, tokens: list[int], extra_key: str | None = None) -> None:
    slots = cache.allocator.alloc(len(tokens))
    n = cache.insert(RadixKey(tokens, extra_key), slots)
    cache.allocator.free(slots[:n])


@dataclass
class Req:
    """A ``CacheReq`` with a ``session_id``: prompt then output tokens."""

    tokens: array
    origin_input_len: int
    req_pool_idx: int
    session_id: str | None = None
    extra_key: str | None = None
    priority: int = 0
    cache_protected_len: int = 0
    cache_inserted_len: int = 0
    lock: Any = None
    last_node: Any = None

    def token_ids(self, up_to: int | None = None) -> array:
        return self.tokens if up_to is None else self.tokens[:up_to]


def _run_request(cache: Any, prompt: list[int], session: str | None) -> None:
    """Admit ``prompt`` (match, lock, row), prefill it, checkpoint, decode one token, finish."""
    pool, alloc = cache.req_to_token_pool, cache.allocator
    row = pool.alloc()
    req = Req(array("q", [*prompt, 99]), len(prompt), row, session)
    m = cache.match_prefix(RadixKey(prompt))
    req.cache_protected_len, req.last_node = m.prefix_len, m.last_node
    req.lock = cache.lock(m.last_node)
    pool.write(row, 0, m.device_indices)
    pool.write(row, m.prefix_len, alloc.alloc(len(prompt) + 1 - m.prefix_len))
    cache.checkpoint(req, len(prompt))
    cache.release(req, len(prompt) + 1, checkpoint=True)


def _session_flow(cache: Any) -> list[list[dict[str, Any]]]:
    """Requests of two sessions and one of none; the events of each drain (wire form)."""
    drains = [[event_to_wire(e) for e in cache.take_actions()]]
    for prompt, session in (([1, 2, 3, 4], "session-7"), ([1, 2, 5], "session-9"), ([8], None)):
        _run_request(cache, prompt, session)
        drains.append([event_to_wire(e) for e in cache.take_actions()])
    return drains


def test_a_checkpoint_stores_its_session() -> None:
    drains = _session_flow(_cache("radixbench", KVEventConfig()))
    sessions = [[e.get("session_id") for e in d if e["type"] == "BlockStored"] for d in drains]
    assert sessions[1:] == [["session-7"], ["session-9"], [None]]


@needs_sglang
@pytest.mark.parametrize("core", ["python", "auto"])
def test_sessions_as_sglang(core: str) -> None:
    ours = _session_flow(_cache("radixbench", KVEventConfig()))
    assert ours == _session_flow(_cache(core, KVEventConfig()))


def test_dynamo_lora_name_falls_back_to_the_adapter_table() -> None:
    dynamo = LORA.with_format(True)
    assert dynamo.lora_adapters == LORA.lora_adapters
    got = {k: (LORA.event_lora_name(k), dynamo.event_lora_name(k)) for k in KEYS}
    assert got["user-key" + ADAPTER_ID] == (None, "adapter-b")
    assert got[ADAPTER_ID] == (None, "adapter-b")
    assert got["named-key"] == ("adapter-a", "adapter-a")
    assert got["x" + ADAPTER_ID[1:]] == got["k"] == got[""] == got[None] == (None, None)


@needs_sglang
def test_lora_names_as_sglang_resolves_them() -> None:
    """``KvEventLoraNames`` filled as ``event_params`` fills it: ``get`` (default format) and
    ``resolve`` (Dynamo) give what ``KVEventConfig`` gives, key by key."""
    from radixbench.cache.sglang.events import event_params
    from radixbench.cache.sglang.unified_load import load_unified

    names = event_params(load_unified("sglang-python", "python"), LORA)["kv_event_lora_names"]
    for k in KEYS:
        assert (LORA.event_lora_name(k), LORA.with_format(True).event_lora_name(k)) == (
            names.get(k),
            names.resolve(k),
        ), k


@pytest.mark.parametrize("fmt", ["default", "dynamo"])
def test_stores_carry_the_resolved_lora_name(fmt: str) -> None:
    cache = _cache("radixbench", LORA.with_format(fmt == "dynamo"))
    cache.take_actions()
    _insert(cache, [1, 2], "user-key" + ADAPTER_ID)
    (stored,) = cache.take_actions()
    assert stored.lora_name == (None if fmt == "default" else "adapter-b")


def test_a_chain_stored_in_one_drain_is_one_event() -> None:
    """Two inserts, the second continuing the first's chain, then one of another chain: two
    stores; evicting everything: one removal."""
    cache = _cache("radixbench", KVEventConfig(), page=2)
    cache.take_actions()
    _insert(cache, [1, 2, 3, 4])
    _insert(cache, [1, 2, 3, 4, 5, 6])
    _insert(cache, [7, 8])
    first, other = cache.take_actions()
    assert isinstance(first, BlockStored) and isinstance(other, BlockStored)
    assert len(first.block_hashes) == 3 and first.token_ids == [1, 2, 3, 4, 5, 6]
    assert other.parent_block_hash is None and other.token_ids == [7, 8]
    cache.evict(100)
    (removed,) = cache.take_actions()
    assert isinstance(removed, BlockRemoved) and len(removed.block_hashes) == 4


@needs_sglang
@pytest.mark.parametrize("page", [1, 2])
def test_grouping_as_sglang_python_core(page: int) -> None:
    """The same calls on sglang's Python tree core give the same events, boundaries included
    (its Rust core groups removals another way: tests/cache/sglang/test_kv_events_fidelity.py)."""
    got = []
    for impl in ("radixbench", "python"):
        cache = _cache(impl, KVEventConfig(), page)
        for tokens in ([1, 2, 3, 4], [1, 2, 3, 4, 5, 6], [7, 8], [1, 2, 9, 9]):
            _insert(cache, tokens)
        cache.evict(6)
        got.append([event_to_wire(e) for e in cache.take_actions()])
    assert got[0] == got[1]
