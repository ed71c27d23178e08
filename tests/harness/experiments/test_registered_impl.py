"""A new cache implementation is one registered factory (radixbench.cache.registry): a toy
always-miss cache, registered in the test, runs under ``compare --impl radixbench,toy`` to a
divergence report. Its label holds ``/`` in odd places: every table, verdict and plot must
carry it as given, from the axis columns, never by splitting a variant's name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from radixbench.cache.interface import (
    CacheAction,
    EvictResult,
    ImplInfo,
    MatchResult,
    OpTimer,
    PrefixCache,
    TreeStats,
)
from radixbench.cache.registry import ImplEntry, register_impl, unregister_impl
from radixbench.cache.timing import time_standard_ops
from radixbench.harness.cli import main
from radixbench.reports.tables import read_table

LABEL = "toy/always-miss"


class AlwaysMiss:
    """A prefix cache that caches nothing: every match misses, every insert keeps nothing,
    a request keeps its whole KV row until it is released."""

    tiers = None  # one tier: no HiCache entry points

    def __init__(self, pool: Any, allocator: Any, config: Any) -> None:
        self.page_size = config.page_size
        self.allocator = allocator
        self.req_to_token_pool = pool
        self.device = torch.device(allocator.device)
        self._empty = torch.empty(0, dtype=torch.int64, device=self.device)

    def reset(self) -> None:
        pass

    def match_prefix(self, key: Any) -> MatchResult:
        return MatchResult(self._empty, 0, 0)

    def insert(self, key: Any, value: Any = None, priority: int = 0, inserted_len: int = 0) -> int:
        return 0

    def evict(self, num_tokens: int) -> EvictResult:
        return EvictResult(0, [])

    def lock(self, node: Any) -> Any:
        return node

    def unlock(self, handle: Any) -> None:
        pass

    def inc_lock_ref(self, node: Any) -> int:
        return 0

    def dec_lock_ref(self, node: Any) -> int:
        return 0

    def checkpoint(self, req: Any, up_to: int) -> None:
        req.cache_protected_len = 0  # the request keeps its whole row

    def release(self, req: Any, owned_len: int, checkpoint: bool) -> None:
        row = self.req_to_token_pool.req_to_token[req.req_pool_idx, :owned_len]
        self.allocator.free(row.to(torch.int64, copy=True))
        req.lock = req.last_node = None
        self.req_to_token_pool.free(req.req_pool_idx)

    def evictable_size(self) -> int:
        return 0

    def protected_size(self) -> int:
        return 0

    def total_size(self) -> int:
        return 0

    def tree_stats(self) -> TreeStats:
        return (0, 0, 0)

    def node_id(self, node: Any) -> int:
        return 0

    def walk(self) -> Iterator[tuple[int, int]]:
        return iter(())

    def held_slots(self) -> torch.Tensor:
        return self._empty

    def take_actions(self) -> list[CacheAction]:
        return []

    def info(self) -> ImplInfo:
        return ImplInfo(LABEL, "toy", "0", __file__, f"{__name__}.AlwaysMiss")

    def instrument(self, timer: OpTimer) -> None:
        time_standard_ops(self, timer)


class _Alloc:
    device = "cpu"


class _Config:
    page_size = 1


@pytest.fixture
def toy() -> Iterator[str]:
    register_impl(
        ImplEntry(
            name="toy",
            load=lambda spec, arg: (LABEL, None, AlwaysMiss.info(None)),  # type: ignore[arg-type]
            factory=lambda handle, pool, alloc, config: AlwaysMiss(pool, alloc, config),
            reference={"evictor": "heapify", "matcher": "galloping"},
            help="a cache that caches nothing (tests)",
        )
    )
    yield "toy"
    unregister_impl("toy")


def test_a_registered_toy_runs_to_a_divergence_report(toy: str, tmp_path: Path, capsys) -> None:
    assert isinstance(AlwaysMiss(None, _Alloc(), _Config()), PrefixCache)
    out = tmp_path / "runs"
    argv = ["compare", "prefix-repetition", "--requests", "120", "--impl", "radixbench,toy",
            "--evictors", "heapify", "--matchers", "galloping", "--flatten", "chain",
            "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 1  # diverged: the toy never hits
    printed = capsys.readouterr().out
    assert "equivalence: DIVERGED" in printed
    (run,) = out.iterdir()
    name = f"{LABEL}/chain"
    for stem in ("requests", "ops", "timeseries", "metrics", "summary_ops", "summary_variants"):
        df = read_table(run, stem)
        mine = df[df["variant"] == name]
        assert len(mine), stem
        assert set(mine["impl"]) == {LABEL}, stem
        assert mine["evictor"].isna().all() and set(mine["flatten"]) == {"chain"}, stem
    req = read_table(run, "requests")
    assert (req.loc[req["variant"] == name, "prefix_hit_tokens"] == 0).all()
    assert (req.loc[req["variant"] != name, "prefix_hit_tokens"] > 0).any()
    verdicts = read_table(run, "verdicts")
    impl = verdicts[verdicts["axis"] == "impl"]
    assert set(impl["candidate"]) == {name}
    assert set(impl["baseline"]) == {"heapify/galloping/chain"}  # like for like, by columns
    md = (run / "report.md").read_text()
    assert "EQUIVALENCE FAILED" in md and name in md
    assert (run / "plots" / "op_cdf.png").stat().st_size > 0
    ops = read_table(run, "ops")
    assert set(ops.loc[ops["variant"] == name, "op"]) >= {"match_prefix", "release"}
    summary = read_table(run, "summary_variants").set_index("variant")
    assert summary.loc[name, "prefix_hit_rate"] == 0
    assert isinstance(summary, pd.DataFrame)
