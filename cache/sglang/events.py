"""KV events from sglang 0.5.23's served cache: turning its recorder on, and reading its events.

``UnifiedRadixCache`` records events when built with ``CacheInitParams(enable_kv_cache_events=
True, dynamo_kv_event_format=..., kv_event_lora_names=...)`` (``mem_cache/cache_init_params.py:
38-40``) and its scheduler drains them with ``take_events()`` (``unified_radix_cache.py:3941``,
called by ``SchedulerKvEventsPublisher.publish_kv_events``, ``managers/scheduler_components/
kv_events_publisher.py:98-105``, after every batch's results and when idle). With the Rust tree
core the Rust extension hashes the pages and ``rust_tree_core/adapter.py:103-153`` builds the
events; with the Python core ``KVCacheEventRecorder`` (``mem_cache/events.py``) hashes them
through ``compute_node_hash_values`` -> ``get_native_hash`` (``mem_cache/cpp_utils/
native_hash.py``), which JIT-compiles sglang's own ``hash_binding.cpp`` with torch's C++
extension builder on first use. Under ``unified_load``'s isolated load that import cannot
reach ``sglang.srt.utils.cpp_extension_loader``; :func:`enable_native_hash` compiles the same
source with the same flags (``native_hash.py:31-41``) through ``torch.utils.cpp_extension.load``
and hands the module to the load's ``native_hash``. Nothing of SGLang is copied: its file is
compiled as it is installed.

:func:`event_params` gives the ``CacheInitParams`` keywords, :func:`from_sglang` converts one of
its events to radixbench's dataclasses (:mod:`radixbench.cache.kv_events`: the same fields).
"""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from radixbench.cache.kv_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
    KVEventConfig,
)
from radixbench.cache.sglang.legacy_load import SGLangLoadError
from radixbench.cache.sglang.loader import one_line

__all__ = ["enable_native_hash", "event_params", "from_sglang"]

NATIVE_HASH = "sglang.srt.mem_cache.cpp_utils.native_hash"
EVENTS = "sglang.srt.mem_cache.events"
_BUILT: dict[str, Any] = {}


def _avx2() -> bool:
    """``native_hash._cpu_supports_avx2``: x86-64 with ``avx2`` in /proc/cpuinfo."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="ignore") as f:
            return "avx2" in f.read().lower()
    except OSError:
        return False


def enable_native_hash(loaded: Any) -> None:
    """Make the Python tree core of ``loaded`` (a ``Loaded``) able to hash pages: compile
    ``srt/mem_cache/cpp_utils/hash_binding.cpp`` of its package once per process (cached on
    disk under ``$RADIXBENCH_EXTENSIONS`` or ``~/.cache/radixbench/torch_extensions``, keyed by
    the file's sha256) and make the load's ``native_hash._load_native_hash_module`` return it.
    Raises ``SGLangLoadError`` (one line) when it cannot be built (no compiler or OpenSSL)."""
    module = loaded.modules.get(NATIVE_HASH)
    if module is None:
        raise SGLangLoadError(f"{loaded.spec}: {NATIVE_HASH} is not part of this load")
    source = Path(loaded.origin) / "srt" / "mem_cache" / "cpp_utils" / "hash_binding.cpp"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if digest not in _BUILT:
        from torch.utils.cpp_extension import load

        root = os.environ.get("RADIXBENCH_EXTENSIONS") or str(
            Path.home() / ".cache" / "radixbench" / "torch_extensions"
        )
        build = Path(root) / f"hicache_hash_cpp_{digest}"
        build.mkdir(parents=True, exist_ok=True)
        flags = ["-O3", "-std=c++17", "-DNDEBUG", *(["-mavx2"] if _avx2() else [])]
        try:
            _BUILT[digest] = load(
                name="hicache_hash_cpp",
                sources=[str(source)],
                extra_cflags=flags,
                extra_ldflags=["-lcrypto"],
                with_cuda=False,
                build_directory=str(build),
            )
        except Exception as e:
            raise SGLangLoadError(
                f"{loaded.spec}: KV events on the Python tree core need sglang's native page "
                f"hash ({source.name}), which could not be built: {one_line(e)}"
            ) from None
    ext = _BUILT[digest]
    module._load_native_hash_module = lambda: ext


def event_params(loaded: Any, config: KVEventConfig) -> dict[str, Any]:
    """``CacheInitParams`` keywords that turn ``loaded``'s recorder on in ``config``'s format:
    ``enable_kv_cache_events``, ``dynamo_kv_event_format`` and a ``KvEventLoraNames`` holding
    ``config.lora_names`` (registered as ``KvEventLoraNames.register`` does for a request of
    that ``extra_key``, ``events.py:89-104``) and ``config.lora_adapters`` (as the loaded
    adapters are, ``register(lora_id=..., lora_name=...)``)."""
    names = loaded.modules[EVENTS].KvEventLoraNames()
    for lora_id, lora_name in config.lora_adapters:
        names.register(lora_id=lora_id, lora_name=lora_name)
    for extra_key, lora_name in config.lora_names:
        names.register(SimpleNamespace(extra_key=extra_key, lora_id=extra_key), lora_name)
    return {
        "enable_kv_cache_events": True,
        "dynamo_kv_event_format": config.dynamo_format,
        "kv_event_lora_names": names,
    }


def _medium(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def from_sglang(event: Any) -> KVEvent:
    """One of sglang's ``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared`` as radixbench's
    dataclass (the medium enum as its string). Raises ``TypeError`` for anything else."""
    kind = type(event).__name__
    if kind == "BlockStored":
        # ints, or [token, token] pairs of a bigram key
        tokens: list[Any] = [list(t) if isinstance(t, tuple) else t for t in event.token_ids]
        return BlockStored(
            list(event.block_hashes),
            event.parent_block_hash,
            tokens,
            int(event.block_size),
            event.lora_id,
            _medium(event.medium),
            event.cache_salt,
            event.session_id,
            event.lora_name,
        )
    if kind == "BlockRemoved":
        return BlockRemoved(list(event.block_hashes), _medium(event.medium))
    if kind == "AllBlocksCleared":
        return AllBlocksCleared()
    raise TypeError(f"not a KV cache event: {kind}")
