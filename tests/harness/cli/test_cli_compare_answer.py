"""``compare``'s baseline option and hit-rate ceiling over the served requests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.harness.cli.compare import parse_baseline
from radixbench.harness.cli.util import UsageError
from radixbench.harness.experiments.workload import served_ceiling
from radixbench.sim.config import Variant
from radixbench.workloads.ceiling import hit_ceiling
from radixbench.workloads.trace import TraceRequest

VARIANTS = [
    Variant("persistent-heap", "galloping", "numpy"),
    Variant("heapify", "linear", "numpy"),
]


def test_parse_baseline_accepts_axis_value_pairs_and_bare_values() -> None:
    assert parse_baseline(None, VARIANTS) is None
    assert parse_baseline("heapify", VARIANTS) == {"evictor": "heapify"}
    assert parse_baseline("matcher=linear, heapify", VARIANTS) == {
        "matcher": "linear",
        "evictor": "heapify",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "--baseline: 'nope' is no impl, evictor, matcher, flatten, router value"),
        ("colour=red", "--baseline: unknown axis 'colour'"),
        ("evictor=lru-list", "--baseline: evictor 'lru-list' is not run"),
    ],
)
def test_parse_baseline_rejects_what_the_run_lacks(text, message) -> None:
    with pytest.raises(UsageError, match=message):
        parse_baseline(text, VARIANTS)


def test_ceiling_covers_the_finished_requests_only() -> None:
    """A rejected request (here a long one sharing nothing) is left out of the ceiling, as
    it is of the achieved hit rate."""
    trace = [
        TraceRequest(0, 0.0, 1024, 1, [1, 2]),
        TraceRequest(1, 1.0, 1024, 1, [1, 2]),
        TraceRequest(2, 2.0, 100 * 512, 1, list(range(100, 200))),
    ]
    requests = pd.DataFrame(
        {"variant": ["v"] * 3, "rid": [0, 1, 2], "status": ["finished", "finished", "rejected"]}
    )
    ceiling = served_ceiling(trace, requests)
    assert ceiling["all"] == hit_ceiling(trace[:2])["all"] > 0.49  # request 1 hits its prompt
    assert hit_ceiling(trace)["all"] < 0.05  # what the achieved rate was compared with before
    assert (ceiling["requests"], ceiling["rejected"]) == (2, 1)


MRU_PATCH = '''
from sglang.srt.mem_cache.evict_policy import MRUStrategy
from sglang.srt.mem_cache.radix_cache import RadixCache


class MRURadixCache(RadixCache):
    """Evicts the most recently used leaf first, whatever the configured policy."""

    def __init__(self, params):
        super().__init__(params)
        self.eviction_strategy = MRUStrategy()
'''


def _answer(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([*argv, "--out", str(tmp_path / "runs"), "--no-progress"])
    out = capsys.readouterr().out
    return code, out[out.index("answer:") :]


@pytest.mark.sglang
def test_after_a_divergence_the_answer_says_so_and_claims_nothing_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 22, defect 2: a patch that evicts MRU-first diverges; the printed answer must
    not say the serving metrics are identical by construction, and every op line carries the
    caveat. With --expect-divergence the same run is a behaviour change (exit 0) with the
    hit-rate and TTFT deltas and their intervals."""
    patch = tmp_path / "mru.py"
    patch.write_text(MRU_PATCH)
    argv = ["compare", "eviction-pressure", "--requests", "3000", "--impl",
            f"sglang-legacy,sglang-legacy:{patch}:MRURadixCache"]  # fmt: skip
    code, ans = _answer(argv, tmp_path, capsys)
    assert code == 1
    assert "identical across variants by construction" not in ans
    assert "their cache behaviour diverged" in ans
    assert "DIVERGED: sglang-legacy:MRURadixCache/numpy vs sglang-legacy/numpy (impl)" in ans
    assert "prefix hit rate" in ans and "pp [" in ans
    ops = [ln for ln in ans.splitlines() if ln.strip().startswith(("evict:", "insert:"))]
    assert ops and all("caveat: the variants diverged" in ln for ln in ops)
    code, ans = _answer([*argv, "--expect-divergence"], tmp_path, capsys)
    assert code == 0
    assert "Behaviour change (expected): sglang-legacy:MRURadixCache/numpy" in ans


@pytest.mark.sglang
def test_identical_code_gets_no_significant_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 22: ``--impl sglang,sglang`` runs the same code twice; with the A/A noise floor
    no op may be called faster or slower."""
    code, ans = _answer(
        ["compare", "eviction-pressure", "--requests", "2500", "--impl", "sglang,sglang"],
        tmp_path,
        capsys,
    )
    assert code == 0
    heads = ("match_prefix:", "insert:", "evict:")
    ops = [ln for ln in ans.splitlines() if ln.strip().startswith(heads)]
    assert len(ops) == 3
    assert all("no significant difference" in ln for ln in ops), ops
    assert "Noise floor (A/A): sglang/numpy timed against a replica of itself" in ans


def test_the_default_run_shows_where_the_served_cache_stands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21, item 4: the default scenario runs sglang 0.5.23 as served beside the
    variants, and the answer gives its per-evict and per-match cost with each algorithm's
    ratio against it."""
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang is not installed (make install)")
    code, ans = _answer(["compare", "--requests", "1600"], tmp_path, capsys)
    assert code == 0
    lines = [ln.strip() for ln in ans.splitlines()]
    evict = next(ln for ln in lines if ln.startswith("evict — sglang 0.5.23 as served"))
    assert "tree core): p50" in evict and "evictable leaves" in evict
    assert "persistent-heap" in evict and "lru-list" in evict and "heapify" in evict
    assert any(ln.startswith("match_prefix — sglang 0.5.23 as served") for ln in lines)
    # the reference is said once, by its own lines: no impl-axis pairing with a variant that
    # runs other algorithms (heapify/linear) under it
    assert not any(ln.startswith("impl:") for ln in lines)
    run = next((tmp_path / "runs").iterdir())
    verdicts = pd.read_parquet(run / "verdicts.parquet")
    assert "impl" not in set(verdicts["axis"])  # nor in the verdict table and its bars


def test_a_reference_that_cannot_run_is_left_out_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, ans = _answer(
        ["compare", "--requests", "300", "--reference", "sglang:/no/such/checkout"],
        tmp_path,
        capsys,
    )
    assert code == 0
    assert "Reference: the reference sglang:/no/such/checkout does not run here:" in ans
