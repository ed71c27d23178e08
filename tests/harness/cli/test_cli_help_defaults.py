"""``--help`` names every option's default: the scenario flags the default scenario's value,
the others theirs (``compare``, ``profile``, ``bench``)."""

from __future__ import annotations

import re

import pytest

from radixbench.harness.cli import main
from radixbench.harness.cli.help_defaults import default_scenario_values


def _help(argv: list[str], capsys, monkeypatch) -> dict[str, str]:
    """``radixbench ARGV --help`` -> {option: its help text on one line}."""
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    out = capsys.readouterr().out.split("\noptions:\n", 1)[1]
    helps: dict[str, str] = {}
    option = ""
    for line in out.splitlines():
        m = re.match(r"  (-[\w-]+)(?: \S+?)?(?:, --[\w-]+(?: \S+)?)?(?:  +(.*))?$", line)
        if m:
            option = m[1]
            helps[option] = m[2] or ""
        else:
            helps[option] = f"{helps[option]} {line.strip()}".strip()
    return helps


def test_compare_help_names_every_default(capsys, monkeypatch) -> None:
    helps = _help(["compare"], capsys, monkeypatch)
    expect = {
        "--clock": "shared-prefix-serving: isolated)",
        "--out": "(default: runs)",
        "--evictors": "shared-prefix-serving: heapify,persistent-heap,lru-list)",
        "--matchers": "shared-prefix-serving: linear,galloping)",
        "--flatten": "shared-prefix-serving: numpy)",
        "--kv-capacity": "shared-prefix-serving: 96000)",
        "--cost-model": "shared-prefix-serving: llama-3.1-8b-h100)",
        "--sched-policy": "shared-prefix-serving: fcfs)",
        "--time-scale": "shared-prefix-serving: 1.0)",
        "--device": "(default: auto)",
    }
    for option, text in expect.items():
        assert helps[option].endswith(text), (option, helps[option])
    assert "(default: [])" not in helps["--set"] and "None" not in "".join(helps.values())


def test_profile_help_names_the_top_default(capsys, monkeypatch) -> None:
    helps = _help(["profile"], capsys, monkeypatch)
    assert helps["--top"].endswith("(default: 15)"), helps["--top"]
    assert helps["--clock"].endswith("shared-prefix-serving: isolated)")


def test_default_scenario_values_fill_gaps_from_the_simulator_defaults() -> None:
    got = default_scenario_values(["sim.clock", "arrivals.max_requests", "seed", "sim.policy"])
    assert got == {"sim.clock": "isolated", "arrivals.max_requests": "all", "seed": "0",
                   "sim.policy": "lru"}  # fmt: skip
