"""Issue 31, item 11: a run whose stderr is not a terminal (a log, CI) prints a plain progress
line every 10 s (a HiCache compare's log stayed empty for 10 minutes: tqdm draws nothing
there)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import radixbench.harness.experiments.progress as progress_mod
from radixbench.harness.cli import main
from radixbench.harness.experiments.progress import PlainProgress, progress


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_line_every_ten_seconds_and_a_last_one() -> None:
    clock, out = _Clock(), io.StringIO()
    with PlainProgress(400, "compare", "req", stream=out, clock=clock) as bar:
        for _ in range(4):
            clock.t += 6.0
            bar.update(100)
    lines = out.getvalue().splitlines()
    assert lines == [
        "compare: 200/400 req (50%), 12 s elapsed, ~12 s left",
        "compare: 400/400 req (100%), 24 s elapsed",
        "compare: 400/400 req (100%), done in 24 s",
    ]


def test_a_short_run_writes_nothing_and_an_error_no_last_line() -> None:
    clock, out = _Clock(), io.StringIO()
    with PlainProgress(10, "replay", "req", stream=out, clock=clock) as bar:
        bar.update(10)
    assert out.getvalue() == ""
    with pytest.raises(RuntimeError), PlainProgress(10, "x", "req", stream=out, clock=clock) as bar:
        clock.t += 11
        bar.update(1)
        raise RuntimeError
    assert out.getvalue().splitlines() == ["x: 1/10 req (10%), 11 s elapsed, ~99 s left"]


def test_a_terminal_gets_the_bar_a_log_the_lines(monkeypatch) -> None:
    monkeypatch.setattr(progress_mod, "_stderr_is_terminal", lambda: False)
    assert isinstance(progress(5, "d", "req"), PlainProgress)
    assert not isinstance(progress(5, "d", "req", enabled=True), PlainProgress)
    monkeypatch.setattr(progress_mod, "_stderr_is_terminal", lambda: True)
    assert not isinstance(progress(5, "d", "req"), PlainProgress)


@pytest.mark.parametrize("hide", [False, True])
def test_compare_in_a_log_prints_progress_lines(
    hide: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.setattr(progress_mod, "EVERY_S", 0.0)  # a line per request
    argv = ["compare", "prefix-repetition", "--requests", "20", "--evictors", "heapify",
            "--matchers", "linear", "--reference", "none", "--no-aa",
            "--out", str(tmp_path)]  # fmt: skip
    assert main([*argv, "--no-progress"] if hide else argv) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("compare: ")]
    if hide:
        assert lines == []
    else:
        assert lines[0].startswith("compare: 1/20 req (5%), ") and "s left" in lines[0]
        assert lines[-1].startswith("compare: 20/20 req (100%), done in ")
