"""README.md's TOML examples are valid input: every ```toml block loads as what it shows (a
scenario, or a sweep grid when it names a ``scenario``), so the README cannot drift from the
keys the loaders accept."""

from __future__ import annotations

import importlib.util
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from radixbench.harness.config.grid import load_grid
from radixbench.harness.config.scenario import load_scenario

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```toml\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)


def test_readme_has_scenario_and_grid_examples() -> None:
    kinds = {"grid" if "scenario" in tomllib.loads(b) else "scenario" for b in BLOCKS}
    assert kinds == {"scenario", "grid"}


@pytest.mark.parametrize("block", BLOCKS, ids=[f"toml-{i}" for i in range(len(BLOCKS))])
def test_readme_toml_example_loads(block: str, tmp_path: Path) -> None:
    path = tmp_path / "example.toml"
    path.write_text(block, encoding="utf-8")
    if "scenario" in tomllib.loads(block):
        grid = load_grid(path)
        assert grid.cells
    else:
        scenario = load_scenario(path)
        assert scenario.variants and scenario.description


# --- the `compare` examples of "Using it" compare what they vary (issue 22) ----------------


def _using_it_compare_lines() -> list[list[str]]:
    """The arguments of every ``radixbench compare ...`` run in README.md's "Using it" block
    (``--help`` left out), continued lines joined, comments stripped."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Using it", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README.md: no bash block under 'Using it'"
    out = []
    for line in block.group(1).replace("\\\n", " ").splitlines():  # join continued lines
        words = shlex.split(line.split("#", 1)[0])
        is_compare = len(words) > 1 and words[0].endswith("radixbench") and words[1] == "compare"
        if is_compare and "--help" not in words:
            out.append(words[1:])
    return out


def _example_params() -> list:
    """One pytest param per example; a line that runs a scenario at its full size (no
    ``--requests`` / ``--window``: the default scenario's 3,000 requests, ~1 min on 2 cores)
    is marked slow — the pool of its default scenario fills only after ~1,200 requests, so a
    smaller run would not exercise the evictors it varies."""
    params = []
    for argv in _using_it_compare_lines():
        sized = "--requests" in argv or "--window" in argv
        marks = () if sized else (pytest.mark.slow,)
        params.append(pytest.param(argv, marks=marks, id=" ".join(argv)))
    return params


def test_readme_using_it_has_compare_examples() -> None:
    lines = _using_it_compare_lines()
    assert len(lines) >= 5
    assert any("--requests" in a or "--window" in a for a in lines)  # some run fast


@pytest.mark.parametrize("argv", _example_params())
def test_readme_compare_example_compares_every_axis_it_varies(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each example runs as written (``--device cuda`` becomes ``cpu`` without a CUDA device:
    the device does not change which ops run) and its printed answer has no ``NOT COMPARED``
    line: every axis its variants vary was exercised on non-trivial inputs."""
    import torch

    from radixbench.harness.cli import main

    # find_spec, not importorskip: `import sglang` itself needs orjson, which radixbench's
    # loader of sglang's cache modules does not (make install leaves it out), so it skipped always
    if any("sglang" in a for a in argv) and importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang 0.5.23 is not installed")
    argv = list(argv)
    if "--device" in argv and not torch.cuda.is_available():
        argv[argv.index("--device") + 1] = "cpu"
    code = main([*argv, "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    # --summary-only prints the PR block alone: it is the answer there
    answer = out if "--summary-only" in argv else out.split("\nanswer:\n", 1)[1]
    assert answer.strip() and "NOT COMPARED" not in answer, answer


def test_readme_plots_row_states_the_formats_compare_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run-folder table's ``plots/`` row names the image formats a compare run writes: a
    format it does not write (SVG: only ``radixbench plot --svg`` adds it) is named with the
    command that writes it."""
    from radixbench.harness.cli import main

    row = next(
        ln for ln in README.read_text(encoding="utf-8").splitlines() if ln.startswith("| `plots/`")
    )
    argv = ["compare", "prefix-repetition", "--requests", "20", "--no-aa", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    (run,) = tmp_path.iterdir()
    written = {p.suffix for p in (run / "plots").iterdir()}
    assert written == {".png"}
    formats = row.split("|")[2].split(":")[0]
    assert "PNG" in formats
    assert "SVG" not in formats or "`radixbench plot --svg`" in formats, row
