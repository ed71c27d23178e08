"""The ``radixbench`` command line.

Every error a user can cause ends in one line on stderr (``radixbench: error: ...``) and exit
status 2 — never a traceback; a failed run leaves no run folder behind. Each subcommand lives in
its own ``cmd_*`` module exposing ``register(subparsers)``, which sets ``func`` on its parser.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from radixbench.harness import (
    cmd_bench,
    cmd_compare,
    cmd_plot,
    cmd_profile,
    cmd_scenarios,
    cmd_sweep,
)
from radixbench.harness.cliutil import Parser, UsageError

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS = (cmd_compare, cmd_scenarios, cmd_sweep, cmd_bench, cmd_profile, cmd_plot)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="radixbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``radixbench`` console script; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args))
    except UsageError as e:
        print(f"radixbench: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"radixbench: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("radixbench: interrupted; no run folder was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
