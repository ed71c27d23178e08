"""Every scenario knob of the command line, declared once: its flag (and SGLang's name for it),
the scenario key it sets, its help, value type, metavar and choices.

A :class:`Knob`'s ``key`` is the scenario key it overrides — the config field it sets
(``sim.max_running``: ``SimConfig.max_running``; ``arrivals.*``: ``Arrivals``; ``cluster.*``:
``ClusterSpec``; ``sim.hicache.*``: ``HiCacheSim`` / ``StorageConfig``; ``variants.*``: the
scenario's variant lists; tests/harness/cli/test_knobs.py checks each names a field). A knob
without a key is read by its own code (``--router-option`` by ``cluster_args``,
``--hicache-storage-backend-extra-config`` by ``hicache_args``, ``--trace``, ``--set``...).
From this table come the parser's flags (:func:`add_knobs`), the flag -> key map
(:data:`OVERRIDES`), SGLang's aliases (:data:`SGLANG_ALIASES`) and the defaults ``--help``
names (``help_defaults``); what a run records of its config is declared on the config's fields
(``SimConfig``'s ``record`` metadata, ``radixbench.sim.config.run_record``).

The config dataclasses are not read here: importing them imports torch (seconds), and the
parser is built before anything heavy is imported, so that a mistyped flag fails at once.
Help texts and choices that list registered names (evictors, policies, routers...) are lazy.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radixbench.harness.cli.util import (
    LazyChoices,
    csv_list,
    lazy_help,
    lazy_names,
    positive_float,
    positive_int,
    radixbench_module,
    token_count,
)

__all__ = ["KNOBS", "OVERRIDES", "SGLANG_ALIASES", "Knob", "add_knobs"]


@dataclass(frozen=True)
class Knob:
    """One flag. ``flag``: radixbench's name; ``sglang``: SGLang 0.5.23's server argument of
    the same meaning, accepted as an alias where the command simulates (``help_sglang``: the
    help then ends with ``(SGLang's <alias>)``); ``key``: the scenario key it overrides (None:
    read by its own code); ``when``: which commands take it — ``all`` (every command with
    scenario arguments), ``simulation`` (compare, profile), ``baseline`` (compare), ``every``
    (replay); ``group``: ``select`` (mutually exclusive request selection) or an argument
    group's title; ``help`` / ``choices``: text or a function making it (called when
    ``--help`` is formatted or a value is checked); the rest as ``add_argument`` takes it."""

    flag: str
    key: str | None
    help: str | Callable[[], str]
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: Callable[[], Sequence[str]] | None = None
    action: str | None = None
    const: Any = None
    sglang: str | None = None
    help_sglang: bool = False
    when: str = "all"
    group: str | None = None
    name: str = ""

    @property
    def dest(self) -> str:
        """The attribute of the parsed arguments (``name``, else the flag's)."""
        return self.name or self.flag.removeprefix("--").replace("-", "_")

    def flags(self, simulation: bool) -> list[str]:
        """The option strings: the flag, then SGLang's alias where the command simulates."""
        return [self.flag, *([self.sglang] if self.sglang and simulation else [])]

    def kwargs(self, simulation: bool) -> dict[str, Any]:
        """``add_argument``'s keyword arguments (lazy help and choices stay lazy)."""
        text = self.help if isinstance(self.help, str) else lazy_help(self.help)
        if self.help_sglang and self.sglang and simulation:
            text = f"{text} (SGLang's {self.sglang})"
        out: dict[str, Any] = {"dest": self.dest, "help": text}
        if self.action == "append":
            out.update(action="append", default=[])
        elif self.action == "store_const":
            out.update(action="store_const", const=self.const)
        elif self.action:
            out["action"] = self.action
        for name in ("type", "metavar"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.choices is not None:
            out["choices"] = LazyChoices(self.choices)
        return out


def _listing(head: str, module: str, attr: str) -> Callable[[], str]:
    return lambda: head + ", ".join(lazy_names(module, attr)())


def _hicache(attr: str) -> str:
    return ", ".join(getattr(radixbench_module("cache.hicache"), attr))


def _routers() -> str:
    from radixbench.cluster.routers import ROUTERS

    return f"routing policies, one variant each: {', '.join(ROUTERS)}"


def _cost_models() -> str:
    presets = ", ".join(radixbench_module("sim.cost").preset_names())
    return (
        f"step-time model: a preset ({presets}: AIConfigurator's measured kernels where it has "
        "data, H100/H200; the roofline otherwise), roofline:PRESET, "
        "aic[:PRESET|MODEL@[TPx]SYSTEM/FRAMEWORK-VERSION], linear or a TOML file"
    )


_HICACHE = "HiCache (host and storage tiers; any flag turns HiCache on)"
_CLUSTER = "cluster (N instances behind a router; the router is a variant axis)"

#: Every knob, in the order ``--help`` lists them.
KNOBS: tuple[Knob, ...] = (
    Knob("--trace", None, "trace file replacing the scenario's workload, replayed at its own "
         "timestamps: Mooncake JSONL, Azure 2023 CSV or the generic JSONL/CSV (format detected)",
         type=Path),
    Knob("--requests", "arrivals.max_requests", "first N requests", type=positive_int,
         group="select"),
    Knob("--window", "arrivals.window_s", "requests arriving in [--start, --start + SECONDS)",
         type=positive_float, metavar="SECONDS", group="select"),
    Knob("--all", None, "every request of the trace (drops the scenario's request count and "
         "window)", action="store_true", when="every", group="select"),
    Knob("--start", "arrivals.start_s", "skip requests arriving before SECONDS after the first "
         "one (default 0)", type=float, metavar="SECONDS"),
    Knob("--time-scale", "arrivals.time_scale", "multiply arrival times (2 = half the rate)",
         type=positive_float),
    Knob("--rate-scale", "arrivals.rate_scale", "multiply the request rate", type=positive_float),
    Knob("--evictors", "variants.evictors", _listing("comma list of ", "cache.evictor",
         "EVICTORS"), type=csv_list, when="simulation"),
    Knob("--matchers", "variants.matchers", _listing("comma list of ", "cache.matcher",
         "MATCHERS"), type=csv_list, when="simulation"),
    Knob("--flatten", "variants.flatten", _listing("batch-builder flattens: ", "sim.config",
         "FLATTENERS_NAMES"), type=csv_list, when="simulation"),
    Knob("--impl", "variants.impls", lambda: radixbench_module("harness.config.impl")
         .impl_help(), type=csv_list, metavar="SPEC[,SPEC...]", when="simulation", name="impls"),
    Knob("--reference", "variants.reference", "an implementation run beside the variants as a "
         "reference, e.g. sglang (what sglang 0.5.23 serves with), or none (default: the "
         "scenario's; the default scenario's is sglang); one that cannot load here is left "
         "out, and the report says why", metavar="SPEC|none", when="simulation"),
    Knob("--baseline", None, "what each axis's verdicts compare against, e.g. heapify or "
         "evictor=heapify,matcher=linear (default: the first evictor / matcher / flatten "
         "listed)", metavar="[AXIS=]VALUE[,...]", when="baseline"),
    Knob("--policy", "sim.policy", "radix cache eviction order: %(choices)s (SGLang's "
         "--radix-eviction-policy; default lru)", metavar="POLICY", when="simulation",
         choices=lambda: sorted(lazy_names("cache.policy", "POLICIES")()),
         sglang="--radix-eviction-policy"),
    Knob("--kv-capacity", "sim.kv_capacity_tokens", "KV pool in tokens, e.g. 96000, 96k or "
         "64Ki", type=token_count, metavar="TOKENS", sglang="--max-total-tokens",
         help_sglang=True),
    Knob("--page-size", "sim.page_size", "tokens per KV page, a power of two (SGLang "
         "--page-size; default 1)", type=positive_int, metavar="TOKENS"),
    Knob("--max-running", "sim.max_running", "most requests running at once (SGLang's "
         "--max-running-requests)", type=positive_int, metavar="N", when="simulation",
         sglang="--max-running-requests"),
    Knob("--max-prefill-tokens", "sim.max_prefill_tokens", "token budget of one prefill batch "
         "(SGLang --max-prefill-tokens)", type=positive_int, metavar="TOKENS",
         when="simulation"),
    Knob("--seed", "seed", "seed of every random draw (workload, arrivals); default 0",
         type=int),
    Knob("--on-bad-line", None, "malformed trace line (%(choices)s): stop with file:line "
         "(error) or skip and count it (default: the scenario's workload.on_bad_line, error "
         "unless set)", metavar="MODE",
         choices=lazy_names("workloads.trace", "BAD_LINE_POLICIES")),
    Knob("--set", None, "override a scenario key, e.g. --set workload.groups=4 (TOML value)",
         metavar="KEY=VALUE", action="append"),
    Knob("--chunked-prefill-size", "sim.chunked_prefill_size", "tokens per prefill chunk; -1 "
         "disables chunking", type=int, metavar="TOKENS", when="simulation"),
    Knob("--sched-policy", "sim.sched_policy", "waiting-queue order: %(choices)s (SGLang's "
         "--schedule-policy)", metavar="POLICY", when="simulation",
         choices=lazy_names("sim.sched_policy", "SCHED_POLICIES"), sglang="--schedule-policy"),
    Knob("--clock", "sim.clock", "%(choices)s; isolated: measured CPU time recorded only "
         "(identical schedules); coupled: added to each step's simulated time",
         metavar="CLOCK", choices=lazy_names("sim.config", "CLOCKS"), when="simulation"),
    Knob("--no-batch-builder", "sim.batch_builder", "skip the ScheduleBatch builder (its "
         "tensors and timed build_extend / build_decode ops; the req_to_token rows are still "
         "written); named in the report's run settings. Default: every step builds its batch, "
         "timed", action="store_const", const=False, when="simulation", name="batch_builder"),
    Knob("--cost-model", "cost.model", _cost_models, metavar="NAME|PATH.toml|aic[:...]",
         when="simulation"),
    Knob("--gpu-mem-gb", "sim.gpu_mem_gb", "derive the KV pool from this memory per GPU minus "
         "weights (overrides --kv-capacity)", type=positive_float, metavar="GB",
         when="simulation"),
    # sglang 0.5.23's HiCache server arguments (arg_groups/fields/memory.py:98-200)
    Knob("--enable-hierarchical-cache", "sim.hicache.enabled", "host (L2) tier behind the "
         "device KV pool, as sglang --enable-hierarchical-cache", action="store_const",
         const=True, when="simulation", group=_HICACHE),
    Knob("--hicache-ratio", "sim.hicache.ratio", "host pool = R x the device pool (>= 1; "
         "default 2)", type=float, metavar="R", when="simulation", group=_HICACHE),
    Knob("--hicache-size", "sim.hicache.size_gb", "host pool in GB per rank (overrides "
         "--hicache-ratio)", type=float, metavar="GB", when="simulation", group=_HICACHE),
    Knob("--hicache-write-policy", "variants.hicache", lambda: f"{_hicache('WRITE_POLICIES')} "
         "(a comma list is an axis: one variant per policy)", type=csv_list,
         metavar="POLICY[,POLICY]", when="simulation", group=_HICACHE),
    Knob("--hicache-storage-backend", "sim.hicache.storage.backend", lambda: "storage (L3) "
         f"tier behind the host: {_hicache('STORAGE_BACKENDS')} (sglang's no-IO simulator: "
         "bandwidth and latency, see --hicache-storage-backend-extra-config)", metavar="NAME",
         when="simulation", group=_HICACHE),
    Knob("--hicache-storage-prefetch-policy", "sim.hicache.storage.prefetch_policy", lambda:
         f"when a prefetch from storage stops: {_hicache('PREFETCH_POLICIES')} (default "
         "timeout)", metavar="POLICY", when="simulation", group=_HICACHE),
    Knob("--hicache-storage-backend-extra-config", None, 'storage settings, as sglang: '
         '{"sim_write_gbps": 5, "sim_read_gbps": 5, "sim_op_latency_us": 100, '
         '"prefetch_threshold": 256, "prefetch_timeout_base": 1.0, '
         '"prefetch_timeout_per_ki_token": 0.25}', metavar="JSON", when="simulation",
         group=_HICACHE),
    Knob("--hicache-host-link-gbps", "sim.hicache.host_link_gbps", "device<->host link per "
         "direction (default: the cost model's, e.g. 55 on H100)", type=float,
         metavar="GB/S", when="simulation", group=_HICACHE),
    # the [cluster] table (radixbench.cluster.spec.ClusterSpec)
    Knob("--instances", "cluster.instances", "instances behind the router", type=positive_int,
         metavar="N", when="simulation", group=_CLUSTER),
    Knob("--routers", "cluster.routers", _routers, type=csv_list, metavar="NAME[,NAME...]",
         when="simulation", group=_CLUSTER),
    Knob("--router-option", None, "a router's option, e.g. cache-aware.cache_threshold=0.5 "
         "(repeatable)", metavar="ROUTER.KEY=VALUE", action="append", when="simulation",
         group=_CLUSTER),
    Knob("--event-delay", "cluster.event_delay_s", "simulated delay of KV events from an "
         "instance to the router (default 0)", type=float, metavar="SECONDS",
         when="simulation", group=_CLUSTER),
    Knob("--event-loss", "cluster.event_loss", "probability that a KV-event batch is lost on "
         "its way to the router (default 0)", type=float, metavar="P", when="simulation",
         group=_CLUSTER),
    Knob("--no-kv-events", None, "instances emit no KV events (routers fed by them cannot "
         "run)", action="store_true", when="simulation", group=_CLUSTER),
    Knob("--couple-router-time", None, "the router's measured decision time delays each "
         "request (enters TTFT)", action="store_true", when="simulation", group=_CLUSTER),
    Knob("--gateways", None, "router replicas the requests spread over (seeded), one variant "
         "per count (default 1)", metavar="G[,G...]", when="simulation", group=_CLUSTER),
    Knob("--gateway-index", "cluster.gateway_index", "each gateway keeps its own router state "
         "(own, default) or all share one index", choices=lambda: ("own", "shared"),
         when="simulation", group=_CLUSTER),
    Knob("--unhealthy", None, "fault injection: instance I is unhealthy from START to END s of "
         "simulated time (no gateway routes to it; repeatable)", metavar="I:START-END",
         action="append", when="simulation", group=_CLUSTER),
)  # fmt: skip

#: Flag dest -> the scenario key it overrides ("sim." = whichever of [cache]/[scheduler] has
#: it). A command that lacks a flag (replay has no ``--evictors``) leaves its key alone.
OVERRIDES: dict[str, str] = {k.dest: k.key for k in KNOBS if k.key is not None}

#: SGLang's server-argument names accepted beside radixbench's (sglang 0.5.23,
#: ``srt/arg_groups/fields/schedule.py`` and ``memory.py``): dest -> SGLang's flag.
SGLANG_ALIASES: dict[str, str] = {k.dest: k.sglang for k in KNOBS if k.sglang}


def add_knobs(c: argparse.ArgumentParser, *, simulation: bool, baseline: bool, every: bool) -> None:
    """Add the knobs the command takes (``simulation``: compare and profile; ``baseline``:
    compare; ``every``: replay's ``--all``) to ``c``, in :data:`KNOBS`' order, the request
    selection mutually exclusive and the HiCache and cluster flags in their groups. Mutates
    ``c``; imports nothing heavy."""
    takes = {"all": True, "simulation": simulation, "baseline": baseline, "every": every}
    groups: dict[str, Any] = {}
    for knob in KNOBS:
        if not takes[knob.when]:
            continue
        target: Any = c
        if knob.group is not None and knob.group not in groups:
            groups[knob.group] = (
                c.add_mutually_exclusive_group()
                if knob.group == "select"
                else c.add_argument_group(knob.group)
            )
        if knob.group is not None:
            target = groups[knob.group]
        target.add_argument(*knob.flags(simulation), **knob.kwargs(simulation))
