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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radixbench.harness.cli.cluster_args import (
    add_cluster_arguments,
    cluster_origins,
    cluster_overrides,
)
from radixbench.harness.cli.help_defaults import note_scenario_defaults
from radixbench.harness.cli.hicache_args import EXTRA_CONFIG_FLAG, storage_extra
from radixbench.harness.cli.sim_args import add_simulation_arguments
from radixbench.harness.cli.util import (
    LazyChoices,
    UsageError,
    csv_list,
    lazy_help,
    lazy_names,
    positive_float,
    positive_int,
    radixbench_module,
    token_count,
)

if TYPE_CHECKING:
    from radixbench.harness.config.scenario import Scenario

# The cache, simulator and configuration modules (torch, pandas) are imported inside the
# functions, and the help texts and choices that list their names are lazy (LazyText,
# LazyChoices): building a parser imports none of them, so a mistyped flag fails at once.

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


def _listing(head: str, names: Callable[[], list[str]]) -> str:
    return lazy_help(lambda: head + ", ".join(names()))


def _default() -> str:
    """The scenario a command runs when given none."""
    return str(radixbench_module("harness.config.scenario").DEFAULT_SCENARIO)


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
    c.add_argument(
        "scenario",
        nargs="?",
        help=lazy_help(lambda: f"scenario TOML file or bundled name (default {_default()})"),
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
        evictors, matchers = (
            lazy_names("cache.evictor", "EVICTORS"),
            lazy_names("cache.matcher", "MATCHERS"),
        )
        flatten = lazy_names("sim.config", "FLATTENERS_NAMES")
        c.add_argument("--evictors", type=csv_list, help=_listing("comma list of ", evictors))
        c.add_argument("--matchers", type=csv_list, help=_listing("comma list of ", matchers))
        c.add_argument(
            "--flatten", type=csv_list, help=_listing("batch-builder flattens: ", flatten)
        )
        c.add_argument(
            "--impl", dest="impls", type=csv_list, metavar="SPEC[,SPEC...]",
            help=lazy_help(lambda: radixbench_module("harness.config.impl").impl_help()),
        )  # fmt: skip
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
            "--radix-eviction-policy",
            dest="policy",
            choices=LazyChoices(lambda: sorted(lazy_names("cache.policy", "POLICIES")())),
            metavar="POLICY",
            help="radix cache eviction order: %(choices)s (SGLang's --radix-eviction-policy; "
            "default lru)",
        )
    c.add_argument(
        "--kv-capacity",
        *(["--max-total-tokens"] if simulation else []),
        dest="kv_capacity",
        type=token_count,
        metavar="TOKENS",
        help="KV pool in tokens, e.g. 96000, 96k or 64Ki"
        + (" (SGLang's --max-total-tokens)" if simulation else ""),
    )
    c.add_argument(
        "--page-size",
        type=positive_int,
        metavar="TOKENS",
        help="tokens per KV page, a power of two (SGLang --page-size; default 1)",
    )
    if simulation:
        c.add_argument(
            "--max-running",
            "--max-running-requests",
            dest="max_running",
            type=positive_int,
            metavar="N",
            help="most requests running at once (SGLang's --max-running-requests)",
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
        choices=LazyChoices(lazy_names("workloads.trace", "BAD_LINE_POLICIES")),
        metavar="MODE",
        help="malformed trace line (%(choices)s): stop with file:line (error) or skip and count it "
        "(default: the scenario's workload.on_bad_line, error unless set)",
    )
    add_set_argument(c)
    if simulation:
        add_simulation_arguments(c)
        add_cluster_arguments(c)
    note_scenario_defaults(c, OVERRIDES)


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
        out.update(storage_extra(extra))
    if any(k.startswith("sim.hicache.") for k in out) or "variants.hicache" in out:
        out.setdefault("sim.hicache.enabled", True)  # any --hicache-* flag turns HiCache on
    if args.window is not None:
        out["arrivals.max_requests"] = None  # a window replaces the scenario's request count
    if getattr(args, "all", False):
        out["arrivals.max_requests"] = out["arrivals.window_s"] = None  # the whole trace
    out.update(set_overrides(args.set))
    return out


def _resolve_impls(specs: list[str] | None) -> None:
    """Load ``--impl``'s specs (SGLang is loaded here, after every flag was parsed: a mistyped
    flag does not wait for it); :class:`UsageError` ``--impl: <spec>: <reason>`` (a missing
    file given by a relative path also names the folder it was looked for from)."""
    if specs is None:
        return
    from radixbench.harness.config.impl import ImplError, resolve_impls

    try:
        resolve_impls(specs)
    except ImplError as e:
        hint = ""
        relative = any(not Path(spec.split(":")[1]).expanduser().is_absolute()
                       for spec in specs if spec.count(":") >= 1)  # fmt: skip
        if relative and "no such file" in str(e):
            hint = (f" (a relative path is read from the current folder, {Path.cwd()}; the "
                    "README's examples/ paths are the radixbench checkout's)")  # fmt: skip
        raise UsageError(f"--impl: {e}{hint}") from None


#: SGLang's server-argument names accepted beside radixbench's (sglang 0.5.23,
#: ``srt/arg_groups/fields/schedule.py`` and ``memory.py``): dest -> SGLang's flag.
SGLANG_ALIASES = {
    "max_running": "--max-running-requests",
    "sched_policy": "--schedule-policy",
    "policy": "--radix-eviction-policy",
    "kv_capacity": "--max-total-tokens",
}


def _flag(args: argparse.Namespace, dest: str) -> str:
    """The flag that set ``dest`` as the command line wrote it (SGLang's alias if used)."""
    alias = SGLANG_ALIASES.get(dest)
    written = getattr(args, "command_line", ())
    if alias and any(a == alias or a.startswith(alias + "=") for a in written):
        return alias
    return f"--{dest.replace('_', '-')}"


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario the arguments of :func:`add_scenario_arguments` describe. The checks that
    need no scenario (``--set`` values, ``--trace``, ``--router-option``...) run before the
    scenario machinery (torch) and the ``--impl`` specs (SGLang) are loaded. Raises
    :class:`UsageError` / ``ScenarioError`` / ``TraceError`` (one line; a bad value given by a
    flag is blamed on that flag)."""
    trace = args.trace.resolve() if args.trace is not None else None
    origins = {
        k: _flag(args, d) for d, k in OVERRIDES.items() if getattr(args, d, None) is not None
    }
    origins.update({t.partition("=")[0].strip(): f"--set {t}" for t in args.set})
    origins.update(cluster_origins(args, origins))
    extra = getattr(args, "hicache_storage_backend_extra_config", None)
    if extra is not None:
        origins.update(dict.fromkeys(storage_extra(extra), EXTRA_CONFIG_FLAG))
    overrides = scenario_overrides(args)
    _resolve_impls(getattr(args, "impls", None))
    from radixbench.harness.config.scenario import load_scenario

    return load_scenario(args.scenario or _default(), overrides, trace=trace, origins=origins)
