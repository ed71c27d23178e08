"""HiCache settings: the host (L2) tier, the storage (L3) tier and how the tree uses them.

Mirrors the server arguments of sglang 0.5.23 (``arg_groups/fields/memory.py:98-200``):
``--enable-hierarchical-cache``, ``--hicache-ratio`` (host tokens as a multiple of device
tokens, default 2.0 in cache mode), ``--hicache-size`` (GB of host memory per rank; overrides
the ratio), ``--hicache-write-policy`` (``write_through`` default, ``write_through_selective``,
``write_back``), ``--hicache-storage-backend`` and ``--hicache-storage-prefetch-policy``
(``best_effort``, ``wait_complete``, ``timeout`` default), and the tree constants set by
``UnifiedRadixCache.init_hicache`` (``mem_cache/unified_radix_cache.py:455-590``):
``write_through_threshold`` (1 for ``write_through``, else 2, ``:558-560``),
``load_back_threshold = 10`` tokens (``:576``), ``storage_prefetch_threshold = 256`` tokens,
``prefetch_timeout_base = 1.0`` s and ``prefetch_timeout_per_ki_token = 0.25`` s (``:484-487``).
The only storage backend modelled is sglang 0.5.23's deterministic no-IO simulator
(``mem_cache/storage/sim_storage.py``: ``sim_write_gbps`` default 5, ``sim_read_gbps``
default = write, ``sim_op_latency_us`` default 100), under its name ``sim``; ``file`` is
accepted as the same model with the file backend's name.

Every check raises ``ValueError`` with a one-line message naming the command-line flag.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``--hicache-write-policy`` choices (``arg_groups/fields/memory.py:121-127``).
WRITE_POLICIES = ("write_through", "write_through_selective", "write_back")
#: ``--hicache-storage-prefetch-policy`` choices (``memory.py:170-176``).
PREFETCH_POLICIES = ("best_effort", "wait_complete", "timeout")
#: Storage backends modelled: sglang's ``sim`` (``storage/sim_storage.py``) and ``file`` timed as
#: it (a bandwidth and a per-operation latency).
STORAGE_BACKENDS = ("sim", "file")
#: Default ``--hicache-ratio`` in cache mode (``memory.py:109-112``).
DEFAULT_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """The L3 tier. ``backend``: :data:`STORAGE_BACKENDS`; ``write_gbps`` / ``read_gbps``: GB/s
    (1e9 B/s) of the backend per rank, ``<= 0`` = infinite, as ``sim_storage.py:37-39``;
    ``read_gbps`` None = ``write_gbps``; ``op_latency_us``: per batch call (query, read,
    write), µs; ``prefetch_policy``: :data:`PREFETCH_POLICIES`; ``prefetch_threshold``: tokens
    (``max(threshold, page_size)``, ``cache_controller.py:622``); ``timeout_base_s`` /
    ``timeout_per_ki_token_s``: the ``timeout`` policy's budget, ``base + per_ki * tokens /
    1024`` s."""

    backend: str = "sim"
    write_gbps: float = 5.0
    read_gbps: float | None = None
    op_latency_us: float = 100.0
    prefetch_policy: str = "timeout"
    prefetch_threshold: int = 256
    timeout_base_s: float = 1.0
    timeout_per_ki_token_s: float = 0.25

    def __post_init__(self) -> None:
        if self.backend not in STORAGE_BACKENDS:
            raise ValueError(
                f"--hicache-storage-backend: unknown backend {self.backend!r}; "
                f"modelled: {', '.join(STORAGE_BACKENDS)}"
            )
        if self.prefetch_policy not in PREFETCH_POLICIES:
            raise ValueError(
                f"--hicache-storage-prefetch-policy: unknown policy {self.prefetch_policy!r}; "
                f"known: {', '.join(PREFETCH_POLICIES)}"
            )
        if self.op_latency_us < 0:
            raise ValueError(
                f"--hicache-storage-latency-us: must be >= 0, got {self.op_latency_us}"
            )
        if self.prefetch_threshold < 1:
            raise ValueError("storage prefetch threshold must be >= 1 token")
        if self.timeout_base_s < 0 or self.timeout_per_ki_token_s < 0:
            raise ValueError("prefetch timeouts must be >= 0 s")

    @property
    def read_bytes_s(self) -> float:
        """Read bandwidth in B/s (``inf`` for ``<= 0`` GB/s)."""
        gbps = self.write_gbps if self.read_gbps is None else self.read_gbps
        return gbps * 1e9 if gbps > 0 else float("inf")

    @property
    def write_bytes_s(self) -> float:
        """Write bandwidth in B/s (``inf`` for ``<= 0`` GB/s)."""
        return self.write_gbps * 1e9 if self.write_gbps > 0 else float("inf")

    @property
    def op_latency_s(self) -> float:
        return self.op_latency_us * 1e-6

    def timeout_s(self, tokens: int) -> float:
        """The ``timeout`` policy's budget for a prefetch of ``tokens`` (s):
        ``prefetch_timeout_base + pages * prefetch_timeout_per_page`` with ``per_page =
        per_ki_token * page_size / 1024`` (``unified_radix_cache.py:2259-2271``), i.e.
        ``base + per_ki * tokens / 1024``."""
        return self.timeout_base_s + self.timeout_per_ki_token_s * tokens / 1024


@dataclass(frozen=True, slots=True)
class HiCacheConfig:
    """HiCache of one cache. ``write_policy``: :data:`WRITE_POLICIES`; ``host_tokens``: host
    pool slots (whole pages; :func:`host_pool_tokens`); ``load_back_threshold``: tokens below
    which a host hit is recomputed; ``storage``: the L3 tier or None; ``bytes_per_token``:
    KV bytes of one token over all layers (the size of a host or storage copy, from the cost
    model's model preset)."""

    write_policy: str = "write_through"
    host_tokens: int = 0
    load_back_threshold: int = 10
    storage: StorageConfig | None = None
    bytes_per_token: int = 131072

    def __post_init__(self) -> None:
        if self.write_policy not in WRITE_POLICIES:
            raise ValueError(
                f"--hicache-write-policy: unknown policy {self.write_policy!r}; "
                f"known: {', '.join(WRITE_POLICIES)}"
            )
        if self.host_tokens < 1:
            raise ValueError(f"host pool must hold at least one page, got {self.host_tokens}")
        if self.bytes_per_token < 1:
            raise ValueError(f"KV bytes per token must be >= 1, got {self.bytes_per_token}")

    @property
    def write_through_threshold(self) -> int:
        """Hits (counted on insert walks) that trigger a backup: 1 for ``write_through``, 2
        otherwise (``unified_radix_cache.py:558-560``; unused by ``write_back``)."""
        return 1 if self.write_policy == "write_through" else 2

    @property
    def write_back(self) -> bool:
        return self.write_policy == "write_back"


def host_pool_tokens(
    device_tokens: int,
    page_size: int,
    ratio: float | None = None,
    size_gb: float | None = None,
    bytes_per_token: int | None = None,
) -> int:
    """Host pool slots as sglang 0.5.23's ``HostKVCache.__init__`` sizes it
    (``mem_cache/pool_host/base.py:219-228``): ``size_gb * 1e9 // bytes_per_token`` when
    ``size_gb`` (``--hicache-size``) is given, else ``int(device_tokens * ratio)``
    (``--hicache-ratio``, default 2.0); then whole pages plus one (``page_num = size //
    page_size + 1``). Raises ``ValueError`` naming the flag for a ratio below 1, a size that
    gives a pool smaller than the device pool, or a size without bytes per token."""
    if size_gb is not None:
        if size_gb <= 0:
            raise ValueError(f"--hicache-size: must be > 0 GB, got {size_gb}")
        if not bytes_per_token:
            raise ValueError(
                "--hicache-size: needs the KV bytes per token of a roofline cost model "
                "(--cost-model PRESET), the linear model has none"
            )
        size = int(size_gb * 1e9 // bytes_per_token)
        if size < device_tokens:
            raise ValueError(
                f"--hicache-size: {size_gb:g} GB holds {size:,} tokens of "
                f"{bytes_per_token:,} B, fewer than the device pool's {device_tokens:,}"
            )
    else:
        r = DEFAULT_RATIO if ratio is None else ratio
        if not r >= 1:
            raise ValueError(
                f"--hicache-ratio: must be >= 1 (host pool at least the device pool), got {r:g}"
            )
        size = int(device_tokens * r)
    return (size // page_size + 1) * page_size
