"""Run folders appear whole or not at all: SIGTERM, stale temporary folders, a bad --out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from radixbench.harness.cli import main
from radixbench.harness.experiments.rundir import AtomicRunDir, RunDirError, remove_stale


def test_stale_temporary_folders_of_dead_runs_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f".tmp-20260101-000000-{int(dead.stdout)}"
    live = tmp_path / f".tmp-20260101-000000-{os.getpid()}"
    stale.mkdir()
    live.mkdir()
    assert remove_stale(tmp_path) == [stale]
    assert not stale.exists() and live.exists()
    with AtomicRunDir(tmp_path, "x") as run:
        assert run.tmp.is_dir()
    assert run.final == tmp_path / "x"


@pytest.mark.parametrize("case", ["file", "read-only"])
def test_a_bad_out_is_one_line_naming_it(case: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    if case == "file":
        out.write_text("not a folder")
    else:
        out.mkdir()
        out.chmod(0o500)
        if os.access(out, os.W_OK):  # root ignores permissions: nothing to test
            pytest.skip("running as a user that can write a read-only folder")
    with pytest.raises(RunDirError, match=str(out)):
        AtomicRunDir(out).__enter__()
    code = main(["compare", "--requests", "10", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(out) in err[0] and ".tmp" not in err[0]


def test_sigterm_leaves_no_temporary_folder(tmp_path: Path) -> None:
    """SIGTERM during a run: exit 143, the hidden temporary folder removed."""
    out = tmp_path / "runs"
    # no sglang reference and fewer requests: the signal lands while the report is written
    # (plots included, seconds), which needs no long simulation before it
    cmd = [sys.executable, "-m", "radixbench.harness", "compare", "mooncake-conversation",
           "--requests", "150", "--reference", "none", "--out", str(out),
           "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600  # the run folder appears once the simulation is done
    while time.monotonic() < deadline and not list(out.glob(".tmp-*")):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)
    assert list(out.glob(".tmp-*")), "the temporary run folder never appeared"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated; no run folder was written" in err
    assert not list(out.glob(".tmp-*")) and not list(out.iterdir())


def test_a_full_disk_names_the_path_and_leaves_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    """Issue 31, item 11: an OSError while the run is written (ENOSPC from a table writer,
    which names no file) said '[Errno 28] No space left on device' and nothing else."""
    import errno

    import pyarrow.parquet as pq

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    # the table writer (reports.tables.write_table) writes through pyarrow, not pandas
    monkeypatch.setattr(pq, "write_table", full)
    out = tmp_path / "runs"
    argv = ["compare", "prefix-repetition", "--requests", "20", "--evictors", "heapify",
            "--matchers", "linear", "--reference", "none", "--out", str(out), "--no-progress",
            "--no-aa"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"radixbench: error: {out}/"), err
    assert err[0].endswith(": cannot write the run (No space left on device); nothing was written")
    assert ".tmp" not in err[0]
    assert list(out.iterdir()) == []  # neither the run nor its temporary folder


def test_a_write_error_naming_its_file_names_it_in_the_run_folder(tmp_path: Path) -> None:
    with pytest.raises(RunDirError) as info, AtomicRunDir(tmp_path, "r") as run:
        raise PermissionError(13, "Permission denied", str(run.tmp / "plots" / "a.png"))
    assert str(info.value) == (
        f"{tmp_path / 'r' / 'plots' / 'a.png'}: cannot write the run (Permission denied); "
        "nothing was written"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_forked_child_leaving_the_with_leaves_the_run_alone(tmp_path: Path) -> None:
    """Under scalene (``radixbench profile``) ``os._exit`` raises ``SystemExit``, so every
    process the report forks (its drawing workers) unwound the writer's stack through
    ``AtomicRunDir.__exit__`` and removed the writer's folder: the run then failed with
    "cannot write the run". Only the process that entered may finish or remove the run."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        f"""
        import multiprocessing, os, sys
        from pathlib import Path
        from radixbench.harness.experiments.rundir import AtomicRunDir
        os._exit = sys.exit  # what scalene's replacement_exit installs
        with AtomicRunDir(Path({str(tmp_path)!r}), "run") as run:
            (run.tmp / "a.txt").write_text("x")
            child = multiprocessing.get_context("fork").Process(target=print, args=("child",))
            child.start()
            child.join()
            assert run.tmp.is_dir(), "the child removed the run"
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run" / "a.txt").read_text() == "x"
