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

from radixbench.harness.cli.cluster_args import cluster_origins, cluster_overrides
from radixbench.harness.cli.help_defaults import note_scenario_defaults
from radixbench.harness.cli.hicache_args import EXTRA_CONFIG_FLAG, storage_extra
from radixbench.harness.cli.knobs import KNOBS, OVERRIDES, SGLANG_ALIASES, add_knobs
from radixbench.harness.cli.util import UsageError, lazy_help, preload, radixbench_module

if TYPE_CHECKING:
    from radixbench.harness.config.scenario import Scenario

# The cache, simulator and configuration modules (torch, pandas) are imported inside the
# functions, and the help texts and choices that list their names are lazy (LazyText,
# LazyChoices): building a parser imports none of them, so a mistyped flag fails at once.

__all__ = [
    "OVERRIDES",
    "SGLANG_ALIASES",
    "add_scenario_arguments",
    "add_set_argument",
    "scenario_from_args",
    "scenario_overrides",
    "set_overrides",
]


def _default() -> str:
    """The scenario a command runs when given none."""
    return str(radixbench_module("harness.config.scenario").DEFAULT_SCENARIO)


_SET_HELP = next(str(k.help) for k in KNOBS if k.flag == "--set")


def add_set_argument(p: argparse.ArgumentParser, help: str = _SET_HELP) -> None:
    """Add ``--set KEY=VALUE`` alone (repeatable; read back with :func:`set_overrides`): the
    scenario key overrides of ``study``, whose points set the rest."""
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=help)


def add_scenario_arguments(
    c: argparse.ArgumentParser,
    *,
    simulation: bool = True,
    baseline: bool = False,
    every: bool = False,
) -> None:
    """Add the scenario arguments (module docstring; each flag declared once in
    :data:`~radixbench.harness.cli.knobs.KNOBS`) to ``c``; read them back with
    :func:`scenario_from_args`. ``simulation``: also the variant lists (``--evictors``,
    ``--matchers``, ``--flatten``, ``--impl``), ``--policy``, the scheduler (``--max-running``,
    ``--max-prefill-tokens``, ``--chunked-prefill-size``, ``--sched-policy``), ``--clock``, the
    cost model, ``--gpu-mem-gb``, the HiCache and cluster flags; ``baseline``: also
    ``--baseline`` (compare's verdicts); ``every``: also ``--all``, a third choice beside
    ``--requests`` / ``--window`` (every request of the trace: ``replay``). Mutates ``c``."""
    c.add_argument(
        "scenario",
        nargs="?",
        help=lazy_help(lambda: f"scenario TOML file or bundled name (default {_default()})"),
    )
    add_knobs(c, simulation=simulation, baseline=baseline, every=every)
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
    from radixbench.cache.registry import ImplSpec
    from radixbench.harness.config.impl import ImplError, resolve_impls

    try:
        resolve_impls(specs)
    except ImplError as e:
        hint = ""
        args = [ImplSpec.parse(spec).arg for spec in specs]
        relative = any(arg and not Path(arg).expanduser().is_absolute() for arg in args)
        if relative and "no such file" in str(e):
            hint = (f" (a relative path is read from the current folder, {Path.cwd()}; the "
                    "README's examples/ paths are the radixbench checkout's)")  # fmt: skip
        raise UsageError(f"--impl: {e}{hint}") from None


def _flag(args: argparse.Namespace, dest: str) -> str:
    """The flag that set ``dest`` as the command line wrote it (SGLang's alias if used)."""
    alias = SGLANG_ALIASES.get(dest)
    written = getattr(args, "command_line", ())
    if alias and any(a == alias or a.startswith(alias + "=") for a in written):
        return alias
    return _FLAGS[dest]


#: Parsed name -> the knob's flag (``impls`` -> ``--impl``).
_FLAGS = {k.dest: k.flag for k in KNOBS}


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
    preload(["radixbench.harness.config.scenario"])  # torch, pandas, the simulator
    _resolve_impls(getattr(args, "impls", None))
    from radixbench.harness.config.scenario import load_scenario

    return load_scenario(args.scenario or _default(), overrides, trace=trace, origins=origins)
