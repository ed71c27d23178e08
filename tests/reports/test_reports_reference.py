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


def test_reference_lines_follow_the_headlines_triviality_rule(ops_df) -> None:
    """Issue 31 item 7: 0 matched tokens made the headline say the matchers were NOT COMPARED
    while the reference line said "galloping 23.3x faster"; both now follow one rule."""
    from radixbench.reports.axes import VariantSet
    from radixbench.reports.reference import reference_rows

    base = ops_df[ops_df["variant"] == "heapify/linear/chain"]
    sgl = base.assign(variant="sglang/chain", impl="sglang", evictor=None, matcher=None)
    ops = pd.concat([ops_df, sgl], ignore_index=True)
    ops.loc[ops["op"] == "match_prefix", "result"] = 0  # nothing ever matched
    vs = VariantSet.from_frames(ops)
    rows = reference_rows(ops, vs, vs.resolve_baseline(), "sglang", n_resamples=50)
    match = rows[rows["metric"] == "match_prefix ns"]
    assert len(match) and (match["verdict"] == "not compared").all()
    lines = reference_lines(rows, "sglang")
    (line,) = [ln for ln in lines if ln.startswith("match_prefix")]
    assert "NOT COMPARED" in line and "trivial inputs" in line and "faster" not in line
    (evict,) = [ln for ln in lines if ln.startswith("evict")]
    assert "NOT COMPARED" not in evict  # the evictors ran on real trees
