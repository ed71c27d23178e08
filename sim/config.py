"""Simulation configuration: frozen dataclasses validated on construction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeAlias

from radixbench.cache.config import SPLIT_RULES
from radixbench.cache.evictor import EVICTORS
from radixbench.cache.hicache.config import HiCacheConfig, StorageConfig, host_pool_tokens
from radixbench.cache.impls import RADIXBENCH
from radixbench.cache.matcher import MATCHERS
from radixbench.cache.policy import POLICIES
from radixbench.cache.registry import check_spec, default_label
from radixbench.sim.cost import LinearCostModel, RooflineCostModel, cost_info, load_cost_model
from radixbench.sim.cost_aic import AicCostModel
from radixbench.sim.sched_policy import SCHED_POLICIES

CostModelT: TypeAlias = LinearCostModel | RooflineCostModel | AicCostModel
#: The cost models that know the deployment's memory (KV bytes per token, weights, TP).
_MEMORY_MODELS = (RooflineCostModel, AicCostModel)
DEFAULT_COST_MODEL = "llama-3.1-8b-h100"

FLATTENERS_NAMES = ("sum", "chain", "numpy")


#: The named axes of a variant, in display order: the columns every run table carries after
#: ``variant`` (docs/CONTRACTS.md). ``tree_core``, tier settings, ``router`` and ``instances``
#: are further axes that a variant carries in ``extra`` when a feature sets them.
BASE_AXES = ("impl", "evictor", "matcher", "flatten")
#: The columns naming a variant in every run table: its display name, then its base axes.
VARIANT_COLUMNS = ("variant", *BASE_AXES)


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant of a run: a record of named axes.

    ``impl``: the cache implementation's spec (``radixbench.cache.registry``): ``radixbench``
    (default) runs radixbench's cache with ``evictor`` and ``matcher``; another
    implementation (``sglang``, ``sglang:PATH``, ``sglang:FILE.py:CLASS``, a plug-in) evicts
    and matches with its own code unless its registry entry takes those axes, so they are
    not axes of its variants (:meth:`axes` gives ``None``, whatever the fields hold).
    ``impl_label``: the implementation's name in tables (default: the registry's label from
    the spec's text, ``radixbench.cache.registry.default_label``; the harness sets it to the
    loaded label, which tells apart two specs with the same default). ``flatten``: the batch
    builder's flatten. ``extra``: further axes as ``(name, value)`` pairs, in order (e.g.
    ``("router", "cache-aware")``); names must not repeat a base axis.

    The display name (:attr:`name`) is derived from the axes, never parsed back:
    ``"<evictor>/<matcher>/<flatten>"`` for an implementation that takes evictor and matcher,
    ``"<impl_label>/<flatten>"`` otherwise, then ``"/<axis>=<value>"`` per extra axis. Only
    the spec's syntax is checked here (nothing is loaded). Raises ``ValueError`` for an
    unknown evictor, matcher or flatten, a bad spec or a bad extra axis.
    """

    evictor: str = "heapify"
    matcher: str = "linear"
    flatten: str = "chain"
    impl: str = RADIXBENCH
    impl_label: str = ""
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for key, value, known in (
            ("evictor", self.evictor, tuple(EVICTORS)),
            ("matcher", self.matcher, tuple(MATCHERS)),
            ("flatten", self.flatten, FLATTENERS_NAMES),
        ):
            if value not in known:
                raise ValueError(f"unknown {key} {value!r}; known: {', '.join(known)}")
        check_spec(self.impl)
        own = default_label(self.impl)
        if {"evictor", "matcher"} <= self.own_algorithms:
            # its variants are named by their algorithms, not by a label: none to set
            if self.impl_label not in ("", own):
                raise ValueError(f"the {own} impl cannot be relabelled {self.impl_label!r}")
            object.__setattr__(self, "impl_label", own)
        elif not self.impl_label:
            object.__setattr__(self, "impl_label", own)
        if not self.impl_label.strip():
            raise ValueError(f"impl label {self.impl_label!r}: must be non-empty")
        names = [k for k, _ in self.extra]
        if len(set(names)) != len(names) or set(names) & set(BASE_AXES):
            raise ValueError(f"extra axes {names}: must not repeat each other or a base axis")

    @property
    def own_algorithms(self) -> frozenset[str]:
        """The axes among ``evictor`` / ``matcher`` that the implementation takes from the
        variant (radixbench's cache: both; SGLang's: neither)."""
        from radixbench.cache.registry import ImplSpec, entries

        entry = entries().get(ImplSpec.parse(self.impl).name)
        return entry.axes if entry is not None else frozenset()

    def axes(self) -> dict[str, str | None]:
        """Axis -> value, in :data:`BASE_AXES` order then ``extra``'s: ``impl`` is the label;
        ``evictor`` / ``matcher`` are ``None`` where the implementation runs its own."""
        takes = self.own_algorithms
        out: dict[str, str | None] = {
            "impl": self.impl_label,
            "evictor": self.evictor if "evictor" in takes else None,
            "matcher": self.matcher if "matcher" in takes else None,
            "flatten": self.flatten,
        }
        out.update(self.extra)
        return out

    @property
    def name(self) -> str:
        """The display name, derived from :meth:`axes` (see the class docstring)."""
        takes = self.own_algorithms
        if {"evictor", "matcher"} <= takes:
            base = f"{self.evictor}/{self.matcher}/{self.flatten}"
        else:
            base = f"{self.impl_label}/{self.flatten}"
        return base + "".join(f"/{k}={v}" for k, v in self.extra)


CLOCKS = ("isolated", "coupled")

#: The variant axis of HiCache settings: its value is the write policy (``--hicache-write-policy
#: write_through,write_back`` gives one variant per policy).
HICACHE_AXIS = "hicache"
#: The ``hicache`` axis value of a variant without HiCache in a run with it (its baseline in
#: ``radixbench study hicache``: the device-only cache).
HICACHE_OFF = "off"


@dataclass(frozen=True, slots=True)
class HiCacheSim:
    """``--enable-hierarchical-cache`` and its settings for a run (scenario key ``hicache`` of
    ``[cache]``; ``radixbench.cache.hicache.config`` holds what each cache gets).

    ``ratio`` / ``size_gb``: the host pool (``--hicache-ratio``, default 2.0; ``--hicache-size``
    GB per rank, overrides the ratio); ``write_policy``: the default of variants without a
    ``hicache`` axis value; ``storage``: the L3 tier (``--hicache-storage-backend``) or None;
    ``host_link_gbps``: overrides the cost model's device<->host link (GB/s per direction);
    ``duplex``: the link's two directions do not share it (``radixbench.sim.transfers``);
    ``load_back_threshold``: tokens; ``enabled``: false turns HiCache off (a scenario file's
    table kept for later). Raises ``ValueError`` (one line naming the flag)."""

    enabled: bool = True
    ratio: float | None = None
    size_gb: float | None = None
    write_policy: str = "write_through"
    storage: StorageConfig | None = None
    host_link_gbps: float | None = None
    duplex: bool = False
    load_back_threshold: int = 10

    def __post_init__(self) -> None:
        HiCacheConfig(self.write_policy, host_tokens=1)  # checks the policy
        if self.ratio is not None and not self.ratio >= 1:
            raise ValueError(
                f"--hicache-ratio: must be >= 1 (host pool at least the device pool), got "
                f"{self.ratio:g}"
            )
        if self.size_gb is not None and not self.size_gb > 0:
            raise ValueError(f"--hicache-size: must be > 0 GB, got {self.size_gb:g}")
        if self.host_link_gbps is not None and not self.host_link_gbps > 0:
            raise ValueError(f"--hicache-host-link-gbps: must be > 0, got {self.host_link_gbps:g}")
        if self.load_back_threshold < 1:
            raise ValueError("hicache.load_back_threshold must be >= 1 token")


def _default_cost() -> CostModelT:
    return load_cost_model(DEFAULT_COST_MODEL)


def _cost_name(cost: object) -> str:
    return str(getattr(cost, "name", type(cost).__name__))


def _record(name: str, **derived: Callable[[Any], Any]) -> dict[str, Any]:
    """Field metadata: the field is recorded in the run record (``RunMeta``, config.json) as
    ``name`` (None: not as it is), and ``derived``: further record names -> a function of the
    field's value (the cost model's name...)."""
    return {"record": {**({name: None} if name else {}), **derived}}


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Scheduler, memory and clock settings of one simulated server (units in field names).

    kv_capacity_tokens: KV slots in the pool (one token each); replaced, when ``gpu_mem_gb`` is
    given, by what fits in that memory per GPU after the weights (``cost.kv_capacity_tokens``,
    needs a preset cost model: roofline or AIC). max_running: cap on running requests (also the
    ``req_to_token`` rows). max_prefill_tokens: token budget of one prefill step.
    chunked_prefill_size: tokens per prefill chunk (None = no chunking; a longer request is then
    admitted alone; a multiple of page_size, as SGLang asserts). max_context_len_tokens: longest
    request (input + output) accepted. page_size: tokens per KV page, a power of two (SGLang
    ``--page-size``); > 1 selects the paged allocator (whole pages, page-aligned prefix matches)
    and the pool keeps ``kv_capacity_tokens // page_size`` whole pages.
    split_rule: the node times radixbench's cache sets on a split (``cache.config.SPLIT_RULES``:
    ``served`` as sglang 0.5.23's ``UnifiedRadixCache``, ``legacy`` as its ``RadixCache``; FIFO
    and FILO victims differ between them). sched_policy: waiting-queue order
    (``sim.sched_policy.SCHED_POLICIES``).
    clock: "isolated" — measured CPU time of cache operations is recorded, not added to simulated
    time, so every variant sees an identical schedule; "coupled" — the measured CPU time of each
    step's cache operations and batch builds is added to that step's simulated duration.
    init_new_token_ratio / min_new_token_ratio_factor / new_token_ratio_decay_steps /
    clip_max_new_tokens / retract_decode_steps: SGLang's decode-reservation estimate
    (``SGLANG_INIT_NEW_TOKEN_RATIO`` 0.7, ``..._MIN_NEW_TOKEN_RATIO_FACTOR`` 0.14,
    ``..._NEW_TOKEN_RATIO_DECAY_STEPS`` 600, ``CLIP_MAX_NEW_TOKENS`` 4096,
    ``retract_decode_steps`` 20).
    batch_builder: build each step's ``ScheduleBatch`` (``sim.batch.BatchBuilder``, timed: ops
    ``build_extend`` / ``build_decode``, charged to the coupled clock); ``False``
    (``--no-batch-builder``) writes the ``req_to_token`` rows only, untimed (no build ops).
    """

    kv_capacity_tokens: int = field(default=400_000, metadata=_record("kv_capacity_tokens"))
    max_running: int = field(default=64, metadata=_record("max_running"))
    max_prefill_tokens: int = field(default=16_384, metadata=_record("max_prefill_tokens"))
    chunked_prefill_size: int | None = field(
        default=8_192, metadata=_record("chunked_prefill_size")
    )
    max_context_len_tokens: int = 131_072
    page_size: int = field(default=1, metadata=_record("page_size"))
    policy: str = "lru"
    split_rule: str = "served"
    sched_policy: str = field(default="fcfs", metadata=_record("sched_policy"))
    clock: str = field(default="isolated", metadata=_record("clock"))
    seed: int = field(default=0, metadata=_record("seed"))
    gpu_mem_gb: float | None = None
    init_new_token_ratio: float = 0.7
    min_new_token_ratio_factor: float = 0.14
    new_token_ratio_decay_steps: int = 600
    clip_max_new_tokens: int = 4096
    retract_decode_steps: int = 20
    batch_builder: bool = field(default=True, metadata=_record("batch_builder"))
    cost: CostModelT = field(
        default_factory=_default_cost,
        metadata=_record("", cost_model=_cost_name, cost_source=cost_info),
    )
    hicache: HiCacheSim | None = None

    def __post_init__(self) -> None:
        for name in (
            "kv_capacity_tokens",
            "max_running",
            "max_prefill_tokens",
            "max_context_len_tokens",
            "new_token_ratio_decay_steps",
            "clip_max_new_tokens",
            "retract_decode_steps",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.chunked_prefill_size is not None and self.chunked_prefill_size <= 0:
            raise ValueError(
                f"chunked_prefill_size must be positive or None, got {self.chunked_prefill_size}"
            )
        if not 0 < self.init_new_token_ratio <= 1 or not 0 < self.min_new_token_ratio_factor <= 1:
            raise ValueError("new-token ratios must be in (0, 1]")
        ps = self.page_size
        if isinstance(ps, bool) or not isinstance(ps, int) or ps < 1 or ps & (ps - 1):
            raise ValueError(f"page_size must be a positive power of two, got {ps!r}")
        if self.chunked_prefill_size is not None and self.chunked_prefill_size % ps:
            raise ValueError(
                f"chunked_prefill_size {self.chunked_prefill_size} must be a multiple of "
                f"page_size {ps}"
            )
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; known: {', '.join(POLICIES)}")
        if self.split_rule not in SPLIT_RULES:
            raise ValueError(
                f"unknown split_rule {self.split_rule!r}; known: {', '.join(SPLIT_RULES)}"
            )
        if self.sched_policy not in SCHED_POLICIES:
            raise ValueError(
                f"unknown sched policy {self.sched_policy!r}; known: {', '.join(SCHED_POLICIES)}"
            )
        if not isinstance(self.batch_builder, bool):
            raise ValueError(f"batch_builder must be true or false, got {self.batch_builder!r}")
        if self.clock not in CLOCKS:
            raise ValueError(f"unknown clock mode {self.clock!r}; known: {', '.join(CLOCKS)}")
        if self.gpu_mem_gb is not None:
            if not isinstance(self.cost, _MEMORY_MODELS):
                raise ValueError(
                    "gpu_mem_gb needs a preset cost model, roofline or AIC (KV bytes per token)"
                )
            object.__setattr__(
                self, "kv_capacity_tokens", self.cost.kv_capacity_tokens(self.gpu_mem_gb)
            )
        if self.kv_capacity_tokens < ps:
            raise ValueError(
                f"kv_capacity_tokens {self.kv_capacity_tokens} holds no page of page_size {ps}"
            )
        if self.hicache is not None and not self.hicache.enabled:
            object.__setattr__(self, "hicache", None)
        if self.hicache is not None:
            if not isinstance(self.cost, _MEMORY_MODELS):
                raise ValueError(
                    "--enable-hierarchical-cache: needs a preset cost model (--cost-model "
                    "PRESET: KV bytes per token and the host link); the linear model has none"
                )
            self.hicache_for(None)  # sizes the host pool: raises on a bad size

    @property
    def hicache_bytes_per_token(self) -> int:
        """KV bytes of one token on one rank (all layers over ``tp``): a host / storage copy."""
        cost = self.cost
        assert isinstance(cost, _MEMORY_MODELS)
        return max(1, cost.kv_bytes_per_token // cost.tp)

    @property
    def host_link_bytes_s(self) -> float:
        """The device<->host link of one GPU (B/s): the override, else the cost model's."""
        hc = self.hicache
        if hc is not None and hc.host_link_gbps is not None:
            return hc.host_link_gbps * 1e9
        return float(getattr(self.cost, "host_link_bytes_s", 25e9))

    @property
    def model_layers(self) -> int:
        return int(getattr(self.cost, "layers", 1))

    def hicache_for(self, write_policy: str | None) -> HiCacheConfig | None:
        """The cache's HiCache settings for a variant whose ``hicache`` axis is
        ``write_policy`` (None: the run's default; :data:`HICACHE_OFF`: none), or None when
        HiCache is off. The host pool
        is sized from the device pool (``kv_capacity_tokens`` in whole pages) as sglang
        0.5.23 sizes it (``host_pool_tokens``)."""
        hc = self.hicache
        if hc is None or write_policy == HICACHE_OFF:
            return None
        ps = self.page_size
        bpt = self.hicache_bytes_per_token
        host = host_pool_tokens(self.kv_capacity_tokens // ps * ps, ps, hc.ratio, hc.size_gb, bpt)
        return HiCacheConfig(
            write_policy or hc.write_policy, host, hc.load_back_threshold, hc.storage, bpt
        )

    def run_record(self, *names: str) -> dict[str, Any]:
        """What a run record (``radixbench.reports.record.RunMeta``) keeps of this config:
        ``{record name: value}`` for every field declared recorded (its ``record`` metadata),
        or only those of ``names``. Reads only."""
        out = {}
        for f in fields(self):
            for name, derive in f.metadata.get("record", {}).items():
                if not names or name in names:
                    value = getattr(self, f.name)
                    out[name] = derive(value) if derive else value
        return out

    @property
    def min_new_token_ratio(self) -> float:
        return self.init_new_token_ratio * self.min_new_token_ratio_factor

    @property
    def new_token_ratio_decay(self) -> float:
        return (self.init_new_token_ratio - self.min_new_token_ratio) / (
            self.new_token_ratio_decay_steps
        )
