"""The scenario arguments of ``compare``, ``profile``, ``replay`` and ``study``: one set, one
meaning each, whichever command takes them.

A scenario (a bundled name or a TOML file, :mod:`radixbench.harness.config.scenario`) is read
with the overrides the command line gives: the positional ``scenario``; ``--trace FILE``, a trace
replacing the scenario's workload, its format detected (Mooncake JSONL, Azure 2023 CSV, generic
JSONL/CSV: ``load_scenario(trace=...)``); the selection ``--requests`` / ``--window`` (mutually
exclusive; ``replay`` adds ``--all``) with ``--start``, ``--time-scale``, ``--rate-scale``;
``--kv-capacity``, ``--page-size``, ``--seed``, ``--on-bad-line``, ``--set KEY=VALUE`` (any
scenario key, TOML value, applied last) and, for the commands that simulate
(``simulation=True``), the variant lists, the scheduler and the cost model. :data:`OVERRIDES`
maps each flag to the scenario key it sets; :func:`scenario_from_args` loads the scenario so
that an error in a value given on the command line names the option, not the scenario file.

``study`` takes only ``--set`` (:func:`add_set_argument`, :func:`set_overrides`): its points
set the rest.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radixbench.harness.cli.cluster_args import (
    add_cluster_arguments,
    cluster_origins,
    cluster_overrides,
)
from radixbench.harness.cli.help_defaults import note_scenario_defaults
from radixbench.harness.cli.util import UsageError, csv_list, positive_float, positive_int

if TYPE_CHECKING:
    from radixbench.harness.config.scenario import Scenario

# The cache, simulator and configuration modules (torch, pandas) are imported inside the
# functions: `study`, which takes only --set, registers its parser without loading them.

__all__ = [
    "OVERRIDES",
    "add_scenario_arguments",
    "add_set_argument",
    "scenario_from_args",
    "scenario_overrides",
    "set_overrides",
]

#: Flag dest -> the scenario key it overrides ("sim." = whichever of [cache]/[scheduler] has it).
#: A command that lacks a flag (replay has no ``--evictors``) leaves its key alone.
OVERRIDES = {
    "requests": "arrivals.max_requests",
    "window": "arrivals.window_s",
    "start": "arrivals.start_s",
    "time_scale": "arrivals.time_scale",
    "rate_scale": "arrivals.rate_scale",
    "evictors": "variants.evictors",
    "matchers": "variants.matchers",
    "flatten": "variants.flatten",
    "impls": "variants.impls",
    "reference": "variants.reference",
    "policy": "sim.policy",
    "kv_capacity": "sim.kv_capacity_tokens",
    "page_size": "sim.page_size",
    "max_running": "sim.max_running",
    "max_prefill_tokens": "sim.max_prefill_tokens",
    "chunked_prefill_size": "sim.chunked_prefill_size",
    "sched_policy": "sim.sched_policy",
    "clock": "sim.clock",
    "gpu_mem_gb": "sim.gpu_mem_gb",
    "cost_model": "cost.model",
    "seed": "seed",
    "instances": "cluster.instances",
    "routers": "cluster.routers",
    "event_delay": "cluster.event_delay_s",
    "event_loss": "cluster.event_loss",
    "enable_hierarchical_cache": "sim.hicache.enabled",
    "hicache_ratio": "sim.hicache.ratio",
    "hicache_size": "sim.hicache.size_gb",
    "hicache_write_policy": "variants.hicache",
    "hicache_storage_backend": "sim.hicache.storage.backend",
    "hicache_storage_prefetch_policy": "sim.hicache.storage.prefetch_policy",
    "hicache_host_link_gbps": "sim.hicache.host_link_gbps",
}

_SET_HELP = "override a scenario key, e.g. --set workload.groups=4 (TOML value)"


def add_set_argument(p: argparse.ArgumentParser, help: str = _SET_HELP) -> None:
    """Add ``--set KEY=VALUE`` (repeatable; read back with :func:`set_overrides`)."""
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=help)


def add_scenario_arguments(
    c: argparse.ArgumentParser,
    *,
    simulation: bool = True,
    baseline: bool = False,
    every: bool = False,
) -> None:
    """Add the scenario arguments (module docstring) to ``c``; read them back with
    :func:`scenario_from_args`. ``simulation``: also the variant lists (``--evictors``,
    ``--matchers``, ``--flatten``, ``--impl``), ``--policy``, the scheduler (``--max-running``,
    ``--max-prefill-tokens``, ``--chunked-prefill-size``, ``--sched-policy``), ``--clock``, the
    cost model and ``--gpu-mem-gb``; ``baseline``: also ``--baseline`` (compare's verdicts);
    ``every``: also ``--all``, a third choice beside ``--requests`` / ``--window`` (every
    request of the trace: ``replay``). Mutates ``c``."""
    from radixbench.cache.evictor import EVICTORS
    from radixbench.cache.matcher import MATCHERS
    from radixbench.cache.policy import POLICIES
    from radixbench.harness.config.impl import impl_arg, impl_help
    from radixbench.harness.config.scenario import DEFAULT_SCENARIO
    from radixbench.sim.config import FLATTENERS_NAMES
    from radixbench.workloads.trace import BAD_LINE_POLICIES

    c.add_argument(
        "scenario",
        nargs="?",
        default=DEFAULT_SCENARIO,
        help=f"scenario TOML file or bundled name (default {DEFAULT_SCENARIO})",
    )
    c.add_argument(
        "--trace",
        type=Path,
        help="trace file replacing the scenario's workload, replayed at its own timestamps: "
        "Mooncake JSONL, Azure 2023 CSV or the generic JSONL/CSV (format detected)",
    )
    sel = c.add_mutually_exclusive_group()
    sel.add_argument("--requests", type=positive_int, help="first N requests")
    sel.add_argument(
        "--window",
        type=positive_float,
        metavar="SECONDS",
        help="requests arriving in [--start, --start + SECONDS)",
    )
    if every:
        sel.add_argument(
            "--all",
            action="store_true",
            help="every request of the trace (drops the scenario's request count and window)",
        )
    c.add_argument(
        "--start",
        type=float,
        metavar="SECONDS",
        help="skip requests arriving before SECONDS after the first one (default 0)",
    )
    c.add_argument(
        "--time-scale", type=positive_float, help="multiply arrival times (2 = half the rate)"
    )
    c.add_argument("--rate-scale", type=positive_float, help="multiply the request rate")
    if simulation:
        c.add_argument("--evictors", type=csv_list, help=f"comma list of {', '.join(EVICTORS)}")
        c.add_argument("--matchers", type=csv_list, help=f"comma list of {', '.join(MATCHERS)}")
        c.add_argument(
            "--flatten",
            type=csv_list,
            help=f"batch-builder flattens: {', '.join(FLATTENERS_NAMES)}",
        )
        c.add_argument(
            "--impl", dest="impls", type=impl_arg, metavar="SPEC[,SPEC...]", help=impl_help()
        )
        c.add_argument(
            "--reference",
            metavar="SPEC|none",
            help="an implementation run beside the variants as a reference, e.g. sglang (what "
            "sglang 0.5.23 serves with), or none (default: the scenario's; the default "
            "scenario's is sglang); one that cannot load here is left out, and the report says "
            "why",
        )
    if baseline:
        c.add_argument(
            "--baseline",
            metavar="[AXIS=]VALUE[,...]",
            help="what each axis's verdicts compare against, e.g. heapify or evictor=heapify,"
            "matcher=linear (default: the first evictor / matcher / flatten listed)",
        )
    if simulation:
        c.add_argument(
            "--policy",
            choices=sorted(POLICIES),
            help="radix cache eviction order (SGLang --radix-eviction-policy; default lru)",
        )
    c.add_argument("--kv-capacity", type=positive_int, metavar="TOKENS", help="KV pool (tokens)")
    c.add_argument(
        "--page-size",
        type=positive_int,
        metavar="TOKENS",
        help="tokens per KV page, a power of two (SGLang --page-size; default 1)",
    )
    if simulation:
        c.add_argument(
            "--max-running",
            type=positive_int,
            metavar="N",
            help="most requests running at once (SGLang --max-running-requests)",
        )
        c.add_argument(
            "--max-prefill-tokens",
            type=positive_int,
            metavar="TOKENS",
            help="token budget of one prefill batch (SGLang --max-prefill-tokens)",
        )
    c.add_argument(
        "--seed", type=int, help="seed of every random draw (workload, arrivals); default 0"
    )
    c.add_argument(
        "--on-bad-line",
        choices=BAD_LINE_POLICIES,
        help="malformed trace line: stop with file:line (error) or skip and count it "
        "(default: the scenario's workload.on_bad_line, error unless set)",
    )
    add_set_argument(c)
    if simulation:
        _add_simulation_arguments(c)
        add_cluster_arguments(c)
    note_scenario_defaults(c, OVERRIDES)


def _add_simulation_arguments(c: argparse.ArgumentParser) -> None:
    """The scheduler, clock and cost-model flags of the commands that simulate."""
    from radixbench.sim.config import CLOCKS
    from radixbench.sim.cost import preset_names
    from radixbench.sim.sched_policy import SCHED_POLICIES

    c.add_argument(
        "--chunked-prefill-size",
        type=int,
        metavar="TOKENS",
        help="tokens per prefill chunk; -1 disables chunking",
    )
    c.add_argument(
        "--sched-policy",
        choices=list(SCHED_POLICIES),
        help="waiting-queue order (SGLang --schedule-policy)",
    )
    c.add_argument(
        "--clock",
        choices=list(CLOCKS),
        help="isolated: measured CPU time recorded only (identical schedules); coupled: added "
        "to each step's simulated time",
    )
    c.add_argument(
        "--cost-model",
        metavar="NAME|PATH.toml|aic[:...]",
        help=f"step-time model: a preset ({', '.join(preset_names())}: AIConfigurator's "
        "measured kernels where it has data, H100/H200; the roofline otherwise), "
        "roofline:PRESET, aic[:PRESET|MODEL@[TPx]SYSTEM/FRAMEWORK-VERSION], linear or a TOML file",
    )
    c.add_argument(
        "--gpu-mem-gb",
        type=positive_float,
        metavar="GB",
        help="derive the KV pool from this memory per GPU minus weights (overrides --kv-capacity)",
    )
    _add_hicache_arguments(c)


def _add_hicache_arguments(c: argparse.ArgumentParser) -> None:
    """sglang 0.5.23's HiCache server arguments (``arg_groups/fields/memory.py:98-200``); any
    of them turns HiCache on. Scenario keys: ``[cache.hicache]`` (``HiCacheSim``) and
    ``[variants] hicache`` (the write policies, an axis)."""
    from radixbench.cache.hicache import PREFETCH_POLICIES, STORAGE_BACKENDS, WRITE_POLICIES

    g = c.add_argument_group("HiCache (host and storage tiers; any flag turns HiCache on)")
    g.add_argument(
        "--enable-hierarchical-cache",
        action="store_const",
        const=True,
        help="host (L2) tier behind the device KV pool, as sglang --enable-hierarchical-cache",
    )
    g.add_argument(
        "--hicache-ratio", type=float, metavar="R",
        help="host pool = R x the device pool (>= 1; default 2)",
    )  # fmt: skip
    g.add_argument(
        "--hicache-size", type=float, metavar="GB",
        help="host pool in GB per rank (overrides --hicache-ratio)",
    )  # fmt: skip
    g.add_argument(
        "--hicache-write-policy",
        type=csv_list,
        metavar="POLICY[,POLICY]",
        help=f"{', '.join(WRITE_POLICIES)} (a comma list is an axis: one variant per policy)",
    )
    g.add_argument(
        "--hicache-storage-backend",
        metavar="NAME",
        help=f"storage (L3) tier behind the host: {', '.join(STORAGE_BACKENDS)} (sglang's no-IO "
        "simulator: bandwidth and latency, see --hicache-storage-backend-extra-config)",
    )
    g.add_argument(
        "--hicache-storage-prefetch-policy",
        metavar="POLICY",
        help=f"when a prefetch from storage stops: {', '.join(PREFETCH_POLICIES)} "
        "(default timeout)",
    )
    g.add_argument(
        "--hicache-storage-backend-extra-config",
        metavar="JSON",
        help='storage settings, as sglang: {"sim_write_gbps": 5, "sim_read_gbps": 5, '
        '"sim_op_latency_us": 100, "prefetch_threshold": 256, "prefetch_timeout_base": 1.0, '
        '"prefetch_timeout_per_ki_token": 0.25}',
    )
    g.add_argument(
        "--hicache-host-link-gbps", type=float, metavar="GB/S",
        help="device<->host link per direction (default: the cost model's, e.g. 55 on H100)",
    )  # fmt: skip


#: ``--hicache-storage-backend-extra-config`` key -> ``StorageConfig`` field (sglang's names).
_STORAGE_EXTRA = {
    "sim_write_gbps": "write_gbps",
    "sim_read_gbps": "read_gbps",
    "sim_op_latency_us": "op_latency_us",
    "prefetch_threshold": "prefetch_threshold",
    "prefetch_timeout_base": "timeout_base_s",
    "prefetch_timeout_per_ki_token": "timeout_per_ki_token_s",
}


def _storage_extra(text: str) -> dict[str, Any]:
    """``--hicache-storage-backend-extra-config`` -> scenario overrides. Raises
    :class:`UsageError` naming the flag for bad JSON or an unknown key."""
    import json

    flag = "--hicache-storage-backend-extra-config"
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{flag}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{flag}: expected a JSON object")
    out = {}
    for k, v in doc.items():
        if k not in _STORAGE_EXTRA:
            raise UsageError(f"{flag}: unknown key {k!r}; known: {', '.join(_STORAGE_EXTRA)}")
        out[f"sim.hicache.storage.{_STORAGE_EXTRA[k]}"] = v
    return out


def set_overrides(texts: list[str]) -> dict[str, Any]:
    """``--set`` values -> ``{dotted key: value}`` (TOML values, later ones win). Raises
    :class:`UsageError` (one line) for a text without ``KEY=``."""
    from radixbench.harness.config.overrides import parse_override

    out: dict[str, Any] = {}
    for text in texts:
        try:
            key, value = parse_override(text)
        except ValueError as e:
            raise UsageError(str(e)) from None
        out[key] = value
    return out


def scenario_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario overrides the arguments of :func:`add_scenario_arguments` give: every flag
    given (:data:`OVERRIDES`), then ``--set``. ``--window`` drops the scenario's request count,
    ``--all`` its request count and window; ``--chunked-prefill-size -1`` disables chunking.
    Raises :class:`UsageError` for an impossible chunk size, a ``--trace`` that is a folder or
    no file, or a malformed ``--set``. Reads only."""
    out: dict[str, Any] = {}
    chunk = getattr(args, "chunked_prefill_size", None)
    if chunk is not None and (chunk == 0 or chunk < -1):
        raise UsageError(f"--chunked-prefill-size: positive or -1, got {chunk}")
    if args.trace is not None and args.trace.is_dir():
        raise UsageError(f"--trace: {args.trace} is a folder; give a trace file")
    if args.trace is not None and not args.trace.is_file():
        raise UsageError(f"--trace: no such file: {args.trace}")
    for dest, key in OVERRIDES.items():
        value = getattr(args, dest, None)
        if value is not None:
            out[key] = value
    out.update(cluster_overrides(args))
    if chunk == -1:
        out["sim.chunked_prefill_size"] = None  # no chunking
    extra = getattr(args, "hicache_storage_backend_extra_config", None)
    if extra is not None:
        out.update(_storage_extra(extra))
    if any(k.startswith("sim.hicache.") for k in out) or "variants.hicache" in out:
        out.setdefault("sim.hicache.enabled", True)  # any --hicache-* flag turns HiCache on
    if args.window is not None:
        out["arrivals.max_requests"] = None  # a window replaces the scenario's request count
    if getattr(args, "all", False):
        out["arrivals.max_requests"] = out["arrivals.window_s"] = None  # the whole trace
    out.update(set_overrides(args.set))
    return out


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario the arguments of :func:`add_scenario_arguments` describe. Raises
    :class:`UsageError` / ``ScenarioError`` / ``TraceError`` (one line; a bad value given by a
    flag is blamed on that flag)."""
    from radixbench.harness.config.scenario import load_scenario

    trace = args.trace.resolve() if args.trace is not None else None
    origins = {
        k: f"--{d.replace('_', '-')}"
        for d, k in OVERRIDES.items()
        if getattr(args, d, None) is not None
    }
    origins.update({t.partition("=")[0].strip(): f"--set {t}" for t in args.set})
    origins.update(cluster_origins(args, origins))
    extra = getattr(args, "hicache_storage_backend_extra_config", None)
    if extra is not None:
        flag = "--hicache-storage-backend-extra-config"
        origins.update(dict.fromkeys(_storage_extra(extra), flag))
    overrides = scenario_overrides(args)
    return load_scenario(args.scenario, overrides, trace=trace, origins=origins)
