"""The ``radixbench`` command line: :func:`main` (the console script), the subcommand table and
the lazy import of the one subcommand a command line names.

Every error a user can cause ends in one line on stderr (``radixbench: error: ...``) and exit
status 2 — never a traceback; a failed run leaves no run folder behind. Each subcommand lives in
its own module of this package (``radixbench.harness.cli.<name>``: argument parsing and printing
only; the work is done by :mod:`radixbench.harness.experiments`, :mod:`radixbench.harness.config`,
:mod:`radixbench.harness.profiling` and :mod:`radixbench.bench`) exposing
``register(subparsers)``, which sets ``func`` on its parser. Shared pieces:
:mod:`~radixbench.harness.cli.util` (one-line errors, typed values) and
:mod:`~radixbench.harness.cli.scenario_args` (the scenario arguments of compare, replay, profile
and study).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from radixbench.harness.cli.util import Parser, UsageError

#: Subcommand name -> one-line help, in the order ``--help`` lists them. Each subcommand is the
#: module ``radixbench.harness.cli.<name>``; those modules import torch, pandas, matplotlib, dask
#: or scalene, so :func:`main` imports only the one the command line names; the others get a
#: stub parser with this help (the same text their ``register`` gives, checked by
#: tests/harness/cli/test_cli.py), so ``radixbench --help`` imports none of them.
COMMANDS: dict[str, str] = {
    "compare": "run one scenario under several cache algorithm variants",
    "scenarios": "list the bundled scenarios (run one with compare NAME)",
    "sweep": "run a grid of scenario parameters x variants x seeds",
    "study": "serving effect of an algorithm family vs the quantity its cost scales with",
    "replay": "hit rate of every eviction policy on a trace vs LRU, Belady's bound and the ceiling",
    "bench": "microbenchmarks of cache algorithm variants",
    "calibrate": "fit the roofline cost model to a synthetic forward on a GPU; write a preset",
    "profile": "run a comparison under scalene and print the hottest lines",
    "plot": "re-render tables, plots and reports of a saved run",
    "diff": "two saved runs side by side: op and serving ratios with CIs, settings that differ",
}


#: What ``radixbench --help`` says first (plain text: argparse shows it verbatim).
DESCRIPTION = (
    "Simulate and profile the radix prefix cache of an LLM serving engine (SGLang 0.5.23's "
    "RadixCache): compare cache algorithm variants on a workload, sweep, study, replay, bench."
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``radixbench`` parser. ``only=None`` registers every subcommand in full (imports
    every subcommand module); ``only=NAME`` registers ``NAME`` in full and the others as stubs
    that carry only their help line (what :func:`main` does: start-up stays fast)."""
    parser = Parser(prog="radixbench", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, help_text in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"radixbench.harness.cli.{name}").register(sub)
        else:
            sub.add_parser(name, help=help_text)
    return parser


def _command(argv: Sequence[str]) -> str:
    """The subcommand ``argv`` names ("" when none: ``--help``, or a wrong name)."""
    first = next((a for a in argv if not a.startswith("-")), "")
    return first if first in COMMANDS else ""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that run folders being written are removed (as
    on Ctrl-C) before the process exits with status 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``radixbench`` console script; returns the exit status."""
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        return _main(argv)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: Sequence[str] | None) -> int:
    command = ""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        command = _command(argv)
        args = build_parser(command).parse_args(argv)
        args.command_line = ("radixbench", *argv)  # what reproduces the run (run records)
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe fails here, inside the try, not at exit
        return status
    except UsageError as e:
        print(f"radixbench: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`radixbench scenarios | head -3`): the Python docs' recipe
        # (library/signal.html, "Note on SIGPIPE") — point stdout at devnull so the final
        # flush at exit cannot fail again, and exit quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass  # stdout has no file descriptor (captured): nothing to flush
        return 1
    except Exception as e:
        return _failed(e)
    except (KeyboardInterrupt, Terminated) as e:
        what = "terminated" if isinstance(e, Terminated) else "interrupted"
        notes = getattr(e, "__notes__", None)  # what the command kept (sweep: its cells)
        if notes:
            print(f"radixbench: {what}; {notes[-1]}", file=sys.stderr)
        elif command == "sweep":
            print(f"radixbench: {what} before any cell ran", file=sys.stderr)
        else:
            print(f"radixbench: {what}; no run folder was written", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130


#: Exit statuses (README, "Exit status"): 1 is "variants diverged" and nothing else.
BAD_INPUT_STATUS = 2
INTERNAL_ERROR_STATUS = 4


def _failed(e: Exception) -> int:
    """The one line (and exit status) of an exception that ended a command: an
    implementation under test raised (:data:`~radixbench.harness.experiments.impl_failure.
    IMPL_FAILED_STATUS`; ``RADIXBENCH_TRACEBACK=1`` adds the traceback), bad input
    (``ValueError`` / ``OSError``: 2), else a bug in radixbench (the traceback, then one line:
    :data:`INTERNAL_ERROR_STATUS`)."""
    import traceback

    from radixbench.harness.experiments.impl_failure import IMPL_FAILED_STATUS, impl_failure

    failure = impl_failure(e)
    if failure is not None:
        hint = "; RADIXBENCH_TRACEBACK=1 shows the traceback"
        if os.environ.get("RADIXBENCH_TRACEBACK"):
            traceback.print_exception(e)
            hint = ""
        print(f"radixbench: error: {failure}{hint}", file=sys.stderr)
        return IMPL_FAILED_STATUS
    if isinstance(e, (ValueError, OSError)):
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"radixbench: error: {msg}", file=sys.stderr)
        return BAD_INPUT_STATUS
    traceback.print_exception(e)
    print(
        f"radixbench: internal error: {type(e).__name__} (a bug in radixbench: please report "
        "it with the traceback above)",
        file=sys.stderr,
    )
    return INTERNAL_ERROR_STATUS


if __name__ == "__main__":
    sys.exit(main())
