"""Extra ``study.md`` sections: a study file names them (``sections``), the modules live beside
the bundled study that uses them (``harness/config/studies/``), and reports only renders the
functions it is given. The PR #6907 check is the eviction study's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from radixbench.harness.config.studies.pr6907 import (
    fit_per_leaf_ns,
    leaves_for_cost,
    pr6907_section,
)
from radixbench.harness.config.study import SECTIONS, StudyError, load_study
from radixbench.reports.study_render import write_study

STUDY = """
family = "eviction"
description = "a user's eviction study"
scenario = "eviction-pressure"
{sections}
[variants]
candidates = ["persistent-heap"]
baseline = "heapify"
[base]
"variants.flatten" = ["numpy"]
"variants.matchers" = ["galloping"]
[points.quick]
"workload.sessions" = [60]
"sim.kv_capacity_tokens" = [1500]
"""


def test_pr6907_leaves_needed_by_log_log_interpolation(study_rows) -> None:
    assert fit_per_leaf_ns(np.array([1000, 2000]), np.array([2e6, 4e6])) == pytest.approx(2000)
    # cost ~ leaves^2 between the points: 1e7 ns lies at 10^3.5 leaves
    got, ex = leaves_for_cost(np.array([1000.0, 10000.0]), np.array([1e6, 1e8]), 1e7)
    assert got == pytest.approx(10**3.5) and not ex
    got, ex = leaves_for_cost(np.array([1000.0, 10000.0]), np.array([1e6, 1e8]), 1e10)
    assert got == pytest.approx(1e5) and ex
    assert np.isnan(leaves_for_cost(np.array([1.0]), np.array([1.0]), 1.0)[0])
    text = "\n".join(pr6907_section(study_rows))
    # the fixture saves 1,000 x (leaves - 1) ns per call: 82 ms at 1 call per request lies
    # beyond its largest tree (10,000 leaves), so the figure is extrapolated
    need, _ = leaves_for_cost(np.array([100.0, 1000.0, 10000.0]),
                              1000 * (np.array([100.0, 1000.0, 10000.0]) - 1), 0.082e9)  # fmt: skip
    assert f"| 1.0 | 82.0 ms | {need:,.0f} (extrapolated) |" in text
    assert (
        "first reaches 82 ms at 10,000 leaves" in text and "at 1,000 leaves it was 0.6 ms" in text
    )


def test_the_eviction_study_renders_the_pr6907_check(tmp_path: Path, study_rows) -> None:
    spec = load_study("eviction", quick=True)
    assert spec.sections == ("pr6907", "served")
    assert load_study("matching", quick=True).sections == ()
    meta = {"name": "eviction", "mode": "quick", "family": "eviction", "description": "d",
            "scenario": "eviction-pressure", "baseline": "heapify",
            "candidates": ("persistent-heap",)}  # fmt: skip
    write_study(tmp_path, study_rows, meta, spec.section_functions())
    text = (tmp_path / "study.md").read_text()
    assert "## Check of SGLang PR #6907's claim" in text and "−82 ms" in text


@pytest.mark.parametrize(
    ("line", "sections"),
    [("", ("pr6907",)), ("sections = []", ()), ('sections = ["pr6907"]', ("pr6907",))],
)
def test_a_study_file_names_its_sections(tmp_path: Path, line: str, sections) -> None:
    """An eviction study that names none gets the PR #6907 check, as every eviction study did."""
    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(sections=line))
    spec = load_study(path, quick=True)
    assert spec.sections == sections
    assert spec.section_functions() == tuple(SECTIONS[s] for s in sections)


def test_an_unknown_section_is_one_line_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(sections='sections = ["nope"]'))
    with pytest.raises(StudyError, match=r"sections: unknown section 'nope'; known: pr6907"):
        load_study(path, quick=True)


def test_served_section_sets_every_curve_against_the_best(tmp_path: Path, study_tables) -> None:
    """The eviction study's ``served`` section: one row per point and curve (the baseline
    once), the best marked, the others' change with its interval, the largest point's lines."""
    import pandas as pd

    from radixbench.harness.config.studies.served import served_section
    from radixbench.reports.study import point_rows
    from radixbench.reports.study_best import curves as curve_rows

    rows = []
    for i, leaves in enumerate((1000, 60_000)):
        req, ops, ts = study_tables(leaves=leaves)
        for r in point_rows(req, ops, ts, family="eviction", baseline="base",
                            candidates=["cand"], best="cand"):  # fmt: skip
            r.update(
                point=i,
                overloaded="base" if i else "",
                requests=200,
                point_wall_s=1.0,
                kv_capacity_tokens=10 * leaves,
            )
            rows.append(r)
    pts = pd.DataFrame(rows)
    curves = curve_rows(pts)
    assert list(curves["curve"]) == ["base", "cand", "base", "cand"]
    assert (curves["best"] == "cand").all()
    text = "\n".join(served_section(pts))
    assert "Against the best evictor" in text and "| best | best |" in text
    assert "At the largest point (60,000 evictable leaves, best cand)" in text
    base_last = curves.iloc[2]
    assert f"{100 * (base_last['throughput_vs_best_ratio'] - 1):+.1f} %" in text
    assert "| overloaded |" in text
    assert served_section(pts.drop(columns=["best"])) == []
    meta = {"name": "eviction", "mode": "quick", "family": "eviction", "description": "d",
            "scenario": "thin-leaves", "baseline": "base", "candidates": ("cand",)}  # fmt: skip
    from radixbench.sim.cost import cost_info, load_cost_model

    meta["cost_model"] = cost_info(load_cost_model("roofline:llama-3.1-8b-h100"))
    out = write_study(tmp_path, pts, meta, (served_section,))
    md = out["study_md"].read_text()
    assert out["plot"].is_file() and "## Against the best evictor" in md
    assert "Step times: Llama-3.1-8B@H100-SXM-80GBx1 — roofline: datasheet peaks" in md
