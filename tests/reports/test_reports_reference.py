"""radixbench.reports.reference: the answer's lines on the reference implementation follow the
verdicts' own bar (the A/A-free smallest effect) and carry a caveat when they are given one."""

from __future__ import annotations

import pandas as pd

from radixbench.reports.headline import DIVERGED_CAVEAT
from radixbench.reports.reference import reference_lines
from radixbench.reports.verdicts import verdict


def _rows(*cases: tuple[str, float, float, float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "metric": "evict ns",
                "algorithm": algorithm,
                "ratio": ratio,
                "ci_low": lo,
                "ci_high": hi,
                "verdict": verdict(lo, hi),
                "baseline_median": 58_300.0,
                "condition": 1_106.0,
            }
            for algorithm, ratio, lo, hi in cases
        ]
    )


def test_a_ratio_inside_the_smallest_effect_is_no_difference() -> None:
    (line,) = reference_lines(
        _rows(("persistent-heap", 6.0, 5.8, 6.2), ("lru-list", 1.02, 1.015, 1.025),
              ("heapify", 0.34, 0.33, 0.35)),
        "sglang 0.5.23 as served (rust tree core)",
    )  # fmt: skip
    assert line.startswith("evict — sglang 0.5.23 as served (rust tree core): p50 58.3 µs")
    assert "persistent-heap 6× faster [5.8–6.2]" in line
    # clears 1 but not the 3 % bar the verdicts use: not called faster here either
    assert "lru-list no significant difference (1.02 [1.01–1.02])" in line
    assert "heapify 2.94× slower" in line


def test_after_a_divergence_every_reference_line_says_so() -> None:
    lines = reference_lines(_rows(("persistent-heap", 6.0, 5.8, 6.2)), "sglang", DIVERGED_CAVEAT)
    assert lines and all(line.endswith(DIVERGED_CAVEAT + ".") for line in lines)
