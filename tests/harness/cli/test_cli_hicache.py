"""HiCache from the command line (issue 24): the ``hicache`` axis, bad input as one line and
exit 2, and a small ``compare long-multi-turn`` whose answer gives the tier split."""

from __future__ import annotations

import pytest

from radixbench.harness.cli import main
from radixbench.harness.config.scenario import load_scenario


def test_write_policies_are_an_axis_with_off_as_the_device_only_baseline() -> None:
    sc = load_scenario(
        "long-multi-turn", {"sim.hicache.ratio": 2.0, "variants.hicache": ["off", "write_back"]}
    )
    assert [v.name for v in sc.variants] == [
        "heapify/galloping/numpy/hicache=off",
        "heapify/galloping/numpy/hicache=write_back",
    ]


def test_under_hicache_the_reference_runs_with_the_baselines_setting() -> None:
    sc = load_scenario(
        "shared-prefix-serving",
        {"sim.hicache.ratio": 2.0, "variants.hicache": ["write_through", "write_back"]},
    )
    if not sc.reference:
        pytest.skip(f"no reference here: {sc.reference_note}")
    (ref,) = [v for v in sc.variants if v.impl_label == sc.reference]
    assert ref.name.endswith("/hicache=write_through")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--hicache-ratio", "0.5"], "--hicache-ratio"),
        (["--hicache-write-policy", "write_sometimes"], "--hicache-write-policy"),
        pytest.param(
            ["--enable-hierarchical-cache", "--impl", "sglang-legacy"],
            "--enable-hierarchical-cache",
            marks=pytest.mark.sglang,
        ),
    ],
)
def test_bad_hicache_input_is_one_line_naming_the_flag(tmp_path, capsys, args, flag) -> None:
    code = main(["compare", "long-multi-turn", "--out", str(tmp_path), "--no-progress", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and flag in err


def test_compare_long_multi_turn_gives_the_tier_split_and_hicache_ratios(tmp_path, capsys) -> None:
    code = main(
        ["compare", "long-multi-turn", "--set", "workload.sessions=6",
         "--hicache-write-policy", "off,write_through", "--out", str(tmp_path), "--no-progress"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    # hits differ across settings on purpose: equivalence is claimed within each one only
    assert "equivalence: OK — within each HiCache setting" in out
    assert "hit rate by tier, heapify/galloping/numpy/hicache=write_through:" in out
    assert "HiCache write_through vs off: TTFT p50" in out and "block output throughput" in out
