"""The program ``radixbench profile`` runs under scalene: one ``compare`` run, optionally
inside a torch profiler with the batch builder's calls labelled.

Invoked as ``python target.py SPEC_PICKLE STAGING RESULT_JSON [--torch-profiler]``:
``SPEC_PICKLE`` holds a pickled :class:`~radixbench.harness.experiments.compare.CompareSpec`
(written by :mod:`radixbench.harness.profiling.scalene_profile`, never untrusted input); the run
folder is written under the ``STAGING`` folder (the parent moves it to ``spec.out`` once the
profile is complete, so a failed profile leaves no run folder), while ``config.json`` records
``spec`` itself; on success ``RESULT_JSON`` receives ``{"run_dir": ..., "torch_trace": path |
null, "ok": equivalence verdict}`` (paths inside ``STAGING``).

The torch profiler (CPU activity, plus CUDA when available) records a Chrome trace
(``<run_dir>/profile/torch_trace.json``, open in chrome://tracing or Perfetto). During the run
``BatchBuilder.build_extend`` / ``build_decode`` / ``build_decode_block`` are wrapped in
``torch.profiler.record_function("batch_builder.build_extend")`` etc. so the builder's tensor
work is grouped under named ranges; the originals are restored afterwards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from radixbench.harness.experiments.compare import CompareSpec, _jsonable, run_compare
from radixbench.sim.batch import BatchBuilder

__all__ = ["labelled_batch_builder", "main", "run_target"]

_BUILDER_METHODS = ("build_extend", "build_decode", "build_decode_block")
#: How :func:`main` starts the one line it prints for bad input before exiting with 2.
ERROR_PREFIX = "radixbench: error: "


@contextlib.contextmanager
def labelled_batch_builder() -> Iterator[None]:
    """Wrap the :class:`BatchBuilder` build methods in named ``record_function`` ranges for the
    duration of the block (mutates the class; restored on exit, also on error)."""
    originals: dict[str, Callable[..., Any]] = {
        name: getattr(BatchBuilder, name) for name in _BUILDER_METHODS
    }

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def labelled(*args: Any, **kwargs: Any) -> Any:
            with record_function(f"batch_builder.{name}"):
                return fn(*args, **kwargs)

        return labelled

    try:
        for name, fn in originals.items():
            setattr(BatchBuilder, name, wrap(name, fn))
        yield
    finally:
        for name, fn in originals.items():
            setattr(BatchBuilder, name, fn)


def run_target(
    spec: CompareSpec, torch_profiler: bool, staging: Path | None = None
) -> dict[str, Any]:
    """Run ``spec`` (no progress bar) with its run folder under ``staging`` (None:
    ``spec.out``); ``config.json`` keeps ``spec`` as given. With ``torch_profiler`` record and
    export the Chrome trace into the run folder. Returns the result dict described in the
    module docstring. Raises what :func:`~radixbench.harness.experiments.compare.run_compare`
    raises."""
    staged = spec if staging is None else dataclasses.replace(spec, out=staging)
    # tables only: the figures and reports are rendered after the profile, outside scalene
    # (scalene_profile.profile_compare), so the profile is the simulation's and its tables'
    run = functools.partial(
        run_compare, staged, progress=False, extra_meta={"spec": _jsonable(spec)}, full_report=False
    )
    if not torch_profiler:
        outcome = run()
        return {"run_dir": str(outcome.run_dir), "torch_trace": None,
                "ok": bool(outcome.equivalence["ok"])}  # fmt: skip
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with (
        labelled_batch_builder(),
        profile(
            activities=activities,
        ) as prof,
    ):
        outcome = run()
    trace = outcome.run_dir / "profile" / "torch_trace.json"
    trace.parent.mkdir(exist_ok=True)
    prof.export_chrome_trace(str(trace))
    return {"run_dir": str(outcome.run_dir), "torch_trace": str(trace),
            "ok": bool(outcome.equivalence["ok"])}  # fmt: skip


def main(argv: list[str]) -> int:
    """Entry point (see module docstring); exit 0 on success, 2 on bad input (one line on
    stderr starting with :data:`ERROR_PREFIX`)."""
    spec_path, staging, result_path = Path(argv[0]), Path(argv[1]), Path(argv[2])
    spec = pickle.loads(spec_path.read_bytes())
    try:
        result = run_target(spec, "--torch-profiler" in argv[3:], staging)
    except (ValueError, OSError) as e:  # bad input: the one line compare would print
        print(f"{ERROR_PREFIX}{str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr)  # fmt: skip
        return 2
    result_path.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
