"""Smoke test of ``radixbench bench cache --quick``: runs, writes csv/plots/markdown, and its
figures are consistent (every variant timed, ratios computed against the references, each
evictor timed interleaved and alone, the KV-allocator section included); the evict bench's trees
have the shapes it reports; the timers keep the garbage collector out of the timed calls and run
the variants in the order they report (behaviour only, never timings)."""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from radixbench.bench import timing as bench_timing
from radixbench.bench.cache import BenchSpec, _leaf_cache, bench_evict
from radixbench.bench.cache_report import targets
from radixbench.bench.timing import alone, interleaved
from radixbench.cache import EVICTORS, MATCHERS
from radixbench.harness.cli import main


def test_bench_cache_quick_writes_report(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    md = tmp_path / "B.md"
    assert main(["bench", "cache", "--quick", "--out", str(tmp_path), "--markdown", str(md)]) == 0
    df = pd.read_csv(tmp_path / "bench_cache.csv")
    match = df[df.bench == "match"]
    assert set(match.variant) == {"bytes==", "array==", *MATCHERS}
    ref = match[match.variant == "bytes=="]
    assert (ref.x_bytes_eq == 1.0).all()
    evict = df[(df.bench == "evict") & (df.leaves > 0)]
    quick = BenchSpec.quick()
    trees = {(n, n) for n in quick.evict_leaves} | set(quick.evict_locked)
    for timing in ("interleaved", "alone"):
        for nodes, leaves in trees:
            point = evict[
                (evict.nodes == nodes) & (evict.leaves == leaves) & (evict.timing == timing)
            ]
            assert set(point.variant) == set(EVICTORS)
    assert len(evict) == 2 * len(trees) * len(EVICTORS)
    assert (evict[evict.variant == "heapify"].x_faster_than_heapify == 1.0).all()
    assert (evict[evict.variant == "heapify-walk"].x_faster_than_heapify_walk == 1.0).all()
    assert (df.median_ns > 0).all()
    for png in ("match_vs_len.png", "evict_vs_leaves.png"):
        assert (tmp_path / png).stat().st_size > 0
    alloc = pd.read_csv(tmp_path / "bench_alloc.csv")
    assert set(alloc.op) == {"alloc", "free"} and set(alloc.allocator) == {"token", "paged"}
    text = md.read_text()
    assert "## Machine" in text and "| target |" in text
    assert "| nodes | evictable leaves | heapify | heapify-walk | lru-list | persistent-heap |" in (
        text
    )
    assert "| 5,000 | 200 |" in text  # the tree with locked leaves, both baselines timed
    assert "heapify-walk / persistent-heap | heapify / persistent-heap" in text
    assert "sglang 0.5.23" in text and "PR #14339" in text and "PR #6907" in text
    assert "## evict(16), each evictor timed alone" in text
    assert "## evict(16), interleaved" in text
    assert "ratio to bytes== (memcmp)" in text and bench_timing.GC_METHOD in text
    assert "## KV allocators: radixbench vs sglang" in text  # bench alloc's section
    # the run's calibration with the machine, every time table again in its unit
    assert re.search(r"^- calibration \(this run, .* = 1 cal; numpy kernel", text, re.M)
    assert text.count("the same medians in calibration units") == 4  # match, 2 x evict, insert
    assert "| radixbench cal | sglang cal |" in text
    assert capsys.readouterr().out.startswith("# Cache microbenchmarks")
    names = [t[0] for t in targets(df)]
    assert len(names) == 8
    assert names[0].startswith("best matcher (") and "/ bytes== at 10,000 tokens" in names[0]
    for timing in ("alone", "interleaved"):
        assert f"heapify-walk / persistent-heap, evict(16) at 5,000 leaves, {timing}" in names
        assert f"heapify / persistent-heap, evict(16) at 5,000 evictable leaves, {timing}" in names
        assert f"persistent-heap / lru-list at 5,000 leaves, {timing}" in names


def _recorder(log: list[tuple[str, bool]]) -> dict[str, Any]:
    """Two functions that log (name, whether the garbage collector is on) when called."""
    return {n: (lambda n=n: log.append((n, gc.isenabled()))) for n in ("a", "b")}


@pytest.mark.parametrize("timer", [interleaved, alone])
def test_timers_collect_once_then_keep_the_collector_off(
    timer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[tuple[str, bool]] = []
    collects: list[int] = []
    real_collect = gc.collect

    def collect(*_: Any) -> int:
        collects.append(len(log))
        return 0

    monkeypatch.setattr(bench_timing.gc, "collect", collect)
    assert gc.isenabled()
    med = timer(_recorder(log), 3)
    real_collect()
    assert set(med) == {"a", "b"} and all(v >= 0 for v in med.values())
    assert collects == [0]  # once, before any call (not between timed calls)
    assert not any(on for _, on in log)  # off during every call, warm-up included
    assert gc.isenabled()  # restored
    order = [n for n, _ in log]
    if timer is interleaved:  # a warm-up round, then 3 rounds over both
        assert order == ["a", "b"] * 4
    else:  # each alone: one warm-up call, then its 3 timed calls back to back
        assert order == ["a"] * 4 + ["b"] * 4


@pytest.mark.parametrize("evictor", sorted(EVICTORS))
def test_leaf_cache_locks_all_but_the_evictable_leaves(evictor: str) -> None:
    # (no check_integrity: the bench inserts slots it never allocated from its no-op pool)
    cache = _leaf_cache(evictor, 500, 40)
    assert cache.num_nodes == 500 and cache.num_evictable_leaves == 40
    assert len(cache.collect_evictable_leaves()) == 40  # heapify-walk walks all 500 for these
    assert cache.evictor.members(cache) == {n.id for n in cache.collect_evictable_leaves()}
    assert cache.protected_size() == 460 and cache.evictable_size() == 40
    assert cache.evict(1_000).num_evicted == 40  # only the unlocked leaves go
    assert cache.num_nodes == 460 and cache.num_evictable_leaves == 0


def test_leaf_cache_unlocked_by_default() -> None:
    cache = _leaf_cache("heapify", 300)
    assert cache.num_nodes == cache.num_evictable_leaves == 300
    assert _leaf_cache("heapify", 300, 300).num_evictable_leaves == 300


def test_heapify_set_is_the_evictable_leaves_only() -> None:
    from radixbench.cache.evictor import HeapifyEvictor

    cache = _leaf_cache("heapify", 500, 40)
    assert isinstance(cache.evictor, HeapifyEvictor)
    assert len(cache.evictor.leaves) == 40  # what each heapify call heapifies


def test_bench_evict_rows_cover_both_baselines() -> None:
    spec = BenchSpec((1000,), 10, (300,), 4, 10, 1, ((600, 50),))
    rows = pd.DataFrame(bench_evict(spec))
    timed = rows[rows.leaves > 0]
    assert set(zip(timed.nodes, timed.leaves)) == {(300, 300), (600, 50)}
    assert set(timed.variant) == set(EVICTORS)
    assert set(timed.timing) == {"interleaved", "alone"}
    med = {
        (r["timing"], r["nodes"], r["leaves"], r["variant"]): r["median_ns"]
        for r in timed.to_dict("records")
    }
    assert len(med) == len(timed)  # one row per timing x tree x evictor
    for r in timed.to_dict("records"):
        tree = (r["timing"], r["nodes"], r["leaves"])
        assert r["x_faster_than_heapify"] == med[(*tree, "heapify")] / r["median_ns"]
        assert r["x_faster_than_heapify_walk"] == med[(*tree, "heapify-walk")] / r["median_ns"]


def test_bench_evict_rejects_disagreeing_evictors(monkeypatch: pytest.MonkeyPatch) -> None:
    from radixbench.cache.evictor import LRUListEvictor

    monkeypatch.setattr(LRUListEvictor, "evict", lambda self, host, n: ([], 0))
    with pytest.raises(RuntimeError, match="disagree"):
        bench_evict(BenchSpec((1000,), 10, (200,), 16, 10, 1))


def test_bench_evict_rejects_disagreeing_evictors_on_locked_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from radixbench.cache.evictor import HeapifyWalkEvictor

    # the walk evicting a locked leaf would be caught by delete_leaf's assert; evicting nothing
    # on the locked tree only is caught by the victim check
    real = HeapifyWalkEvictor.evict

    def evict(self: HeapifyWalkEvictor, host: Any, n: int) -> tuple[list[Any], int]:
        return ([], 0) if host.num_nodes == 600 else real(self, host, n)

    monkeypatch.setattr(HeapifyWalkEvictor, "evict", evict)
    with pytest.raises(RuntimeError, match="disagree"):
        bench_evict(BenchSpec((1000,), 10, (200,), 16, 10, 1, ((600, 50),)))


@pytest.mark.parametrize("locked", [((100, 0),), ((100, 101),), ((100, -1),)])
def test_bench_spec_rejects_bad_locked_trees(locked: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ValueError, match="evict_locked"):
        BenchSpec(evict_locked=locked)


def test_bench_usage_error(capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", "nothing"]) == 2
    assert "invalid choice" in capsys.readouterr().err
