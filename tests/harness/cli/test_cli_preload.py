"""The CLI imports what a compare run needs with the garbage collector paused, then freezes it
(harness/cli/util.py ``preload``, called by ``scenario_from_args``): those objects are never
walked by a collection again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from radixbench.harness.cli.util import preload

_RUN = """
import gc, sys
walked = []
gc.callbacks.append(lambda phase, info: phase == "start" and info["generation"] == 2
                    and walked.append(len(sys.modules)))
from radixbench.harness.cli import main
status = main(["compare", "prefix-repetition", "--requests", "5", "--evictors", "heapify",
               "--matchers", "linear", "--reference", "none", "--no-aa", "--no-progress",
               "--out", sys.argv[1]])
print(status, gc.isenabled(), gc.get_freeze_count(), "torch" in sys.modules, walked)
"""


def test_a_compare_run_loads_its_modules_without_full_collections(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    status, enabled, frozen, torch, walked = proc.stdout.splitlines()[-1].split(" ", 4)
    assert (status, enabled, torch) == ("0", "True", "True")
    assert int(frozen) > 100_000  # torch's, pandas', the simulator's objects
    # before the fix, five full collections ran while torch & co. were imported (the module
    # count growing from ~400 to ~1,700); none runs now until the modules are in
    assert walked == "[]" or min(int(n) for n in walked.strip("[]").split(", ")) > 1_500


def test_preload_pauses_the_collector_and_skips_what_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    seen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: seen.append(gc.isenabled()))
    monkeypatch.setattr(
        "importlib.import_module", lambda name: seen.append(gc.isenabled()) or sys.modules["json"]
    )
    preload(["json"])  # already imported: nothing to do
    assert seen == []
    preload(["radixbench_no_such_module_a", "radixbench_no_such_module_b"])
    assert seen == [False, False, False] and gc.isenabled()
