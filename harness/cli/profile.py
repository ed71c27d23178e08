"""``radixbench profile``: one compare run under scalene (CPU only), hottest lines printed:
the simulation's own first (report writing and imports left out, and said so), then those of
``cache/`` and ``sim/``; ``--torch-profiler`` adds a torch profiler Chrome trace of the batch
builder (CUDA when present). Takes every option of ``compare``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from radixbench.harness.cli.compare import add_compare_arguments, spec_from_args
from radixbench.harness.cli.util import DefaultsFormatter, positive_int

if TYPE_CHECKING:  # scalene, torch: imported once the arguments are parsed and checked
    from radixbench.harness.profiling.scalene_profile import HotLine


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``profile`` to the subcommands."""
    p = sub.add_parser(
        "profile",
        help="run a comparison under scalene and print the hottest lines",
        formatter_class=DefaultsFormatter,
    )
    p.set_defaults(func=run)
    add_compare_arguments(p)
    p.add_argument(
        "--torch-profiler",
        action="store_true",
        help="also record a torch profiler Chrome trace of the batch builder",
    )
    p.add_argument("--top", type=positive_int, default=15, help="hottest lines to print")
    p.add_argument("--no-html", action="store_true", help="skip scalene's HTML page")


def run(args: argparse.Namespace) -> int:
    """Profile the comparison; exit 0 if the variants were equivalent, 1 otherwise."""
    spec = spec_from_args(args)
    from radixbench.harness.profiling.scalene_profile import (
        SOURCE_ROOT,
        hottest_lines,
        profile_compare,
        simulation_lines,
    )

    try:
        outcome = profile_compare(spec, args.torch_profiler, html=not args.no_html)
    except RuntimeError as e:
        raise ValueError(str(e)) from None
    profile = json.loads(outcome.scalene_json.read_text())
    every = hottest_lines(profile, 10**9)
    own, left = simulation_lines(every)
    elapsed = profile.get("elapsed_time_sec", 0)
    print(f"hottest lines of the simulation (scalene, CPU only; {elapsed:.1f} s in all):")
    _print_lines(own[: args.top])
    if left:
        print("  left out of this table (once per run, whatever the algorithm): " + "; ".join(
            f"{why}: {n} lines, {cpu:.1f} % cpu" for why, (n, cpu) in left.items()))  # fmt: skip
    core = [SOURCE_ROOT / "cache", SOURCE_ROOT / "sim"]
    in_core = [h for h in own if any(Path(h.file).is_relative_to(c) for c in core)]
    _print_core(own[: args.top], in_core[: args.top])
    print(f"\nrun folder: {outcome.run_dir}")
    print(f"scalene:    {outcome.scalene_json}" + (
        f", {outcome.scalene_html}" if outcome.scalene_html else ""))  # fmt: skip
    if outcome.torch_trace:
        print(f"torch trace (chrome://tracing, Perfetto): {outcome.torch_trace}")
    return 0 if outcome.equivalent else 1


def _print_core(top: list[HotLine], in_core: list[HotLine]) -> None:
    """The hottest lines in ``cache/`` and ``sim/``, unless they are the table just printed
    (``top``: when every one of the hottest lines is there, the same table twice said
    nothing new)."""
    if in_core == top:
        print("\nthe hottest lines above are all in the cache and simulator (cache/, sim/)")
        return
    print("\nhottest lines in the cache and simulator (cache/, sim/):")
    _print_lines(in_core)


def _print_lines(lines: list[HotLine]) -> None:
    """Print hot lines as a table: CPU %, Python %, native %, file:line relative to the
    source root, code (80 characters at most)."""
    from radixbench.harness.profiling.scalene_profile import SOURCE_ROOT

    if not lines:
        print("  (no samples)")
        return
    print(f"{'cpu %':>7} {'py %':>6} {'native %':>8}  location")
    for h in lines:
        path = Path(h.file)
        where = path.relative_to(SOURCE_ROOT) if path.is_relative_to(SOURCE_ROOT) else path
        print(f"{h.cpu_percent:7.1f} {h.python_percent:6.1f} {h.native_percent:8.1f}  "
              f"{where}:{h.lineno}  {h.code[:80]}")  # fmt: skip
