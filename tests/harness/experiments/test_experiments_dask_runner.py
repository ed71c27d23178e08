"""The Dask runner of ``sweep`` and ``study``: interrupted, it shuts down cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: A run of two tasks that each show a (disabled) tqdm bar, as a study point's compare does,
#: then wait to be interrupted; prints "interrupted" and exits 130 on Ctrl-C.
_PROGRAM = """
import sys, time
from pathlib import Path
from radixbench.harness.experiments.dask_runner import run_on_dask

def task(i, marker):
    from tqdm import tqdm
    tqdm(disable=True)
    Path(f"{marker}.{i}").touch()
    time.sleep(120)

if __name__ == "__main__":
    try:
        run_on_dask(lambda c: {c.submit(task, i, sys.argv[1], pure=False): i for i in range(2)},
                    lambda i, f: None, workers=2, progress=False, desc="t", unit="x")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
"""


@pytest.mark.e2e  # a Dask cluster
def test_ctrl_c_leaves_no_leaked_semaphore_warning(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(_PROGRAM)
    marker = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, str(prog), str(marker)],
        start_new_session=True,  # its own process group: Ctrl-C reaches it and its workers
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("started.*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(list(tmp_path.glob("started.*"))) == 2, "the tasks never started"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "interrupted" in err, err
    assert "leaked semaphore" not in err, err
