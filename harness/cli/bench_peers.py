"""``radixbench bench peers``: radixbench against NVIDIA Dynamo's mocker (its own venv, ``make
peers``) on the same Mooncake slices, alternating, for issue 28's cases a-e and the memory slope
(m). Argument parsing and printing only: the benchmark is :mod:`radixbench.bench.peers`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radixbench.harness.cli.util import UsageError, positive_int

if TYPE_CHECKING:
    from radixbench.bench.calibration import Calibration

__all__ = ["add_parser", "run"]


def add_parser(targets: Any, fmt: type[argparse.HelpFormatter], func: Callable[..., int]) -> None:
    """Add ``peers`` to ``bench``'s subparsers ``targets``, dispatching to ``func``."""
    p = targets.add_parser(
        "peers",
        formatter_class=fmt,
        help="against NVIDIA Dynamo's mocker on the same trace: CPU, RSS, hit rates, ratios",
    )
    p.set_defaults(func=func)
    p.add_argument(
        "--cases",
        default="abcdelm",
        help="which of the cases a-e to run; l: the cluster's CPU per request against one "
        "instance's at the same per-instance load; m: peak RSS vs 1/2/4/8 instances (the slope)",
    )
    p.add_argument("--reps", type=positive_int, default=1, help="alternating runs per case")
    p.add_argument(
        "--quick", action="store_true", help="200 requests per case: a smoke test (a minute)"
    )
    p.add_argument(
        "--mocker",
        type=Path,
        metavar="PYTHON",
        help="the Python of the mocker's venv (default: .peers/dynamo from `make peers`)",
    )
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write its section here")


def run(args: argparse.Namespace, calibrate: Callable[[], Calibration]) -> int:
    """``bench peers``: each case printed as it ends, the targets' status, the calibration
    figure; ``--markdown``: its section of the file. Without the mocker's venv radixbench's
    side runs alone (the ratios say so)."""
    from radixbench.bench.benchmarks_md import write_section
    from radixbench.bench.peers import CASES, machine, mocker_python, run_peers
    from radixbench.bench.peers_report import END, START, markdown

    keys = args.cases.strip().lower()
    bad = sorted(set(keys) - {c.key for c in CASES} - {"l", "m"})
    if bad or not keys:
        raise UsageError(f"--cases: expected letters of abcdelm, got {args.cases!r}")
    mocker = args.mocker or mocker_python()
    if mocker is not None and not Path(mocker).is_file():
        raise UsageError(f"--mocker: no such file {mocker}")
    print(f"machine: {machine()}", flush=True)
    cal = calibrate()
    notes = []
    if mocker is None:
        notes.append("mocker: not installed (make peers): radixbench's side only")
        print(notes[-1], flush=True)
    blocks: list[str] = []

    def echo(text: str) -> None:
        blocks.append(text + "\n")
        print(text + "\n", flush=True)

    try:
        run_peers(keys, args.reps, args.quick, mocker, echo)
    except RuntimeError as exc:
        print(f"error: bench peers: {exc}", file=sys.stderr)
        return 1
    if args.markdown:
        cmd = "make bench" if not args.quick else "radixbench bench peers --quick"
        write_section(args.markdown, markdown(blocks, cal, machine(), cmd, notes), START, END)
        print(f"wrote the Against NVIDIA Dynamo's mocker section of {args.markdown}")
    return 0
