"""``radixbench replay``: each eviction policy's prefix hit rate on a trace, beside LRU,
Belady's bound and the infinite-cache ceiling — a sequential cache replay, no scheduler.

:func:`run_replay` takes a scenario (as ``compare`` does); its workload, selection, KV capacity
and page size are used. Request by request in arrival order, one real
``RadixCache`` per policy: match the prompt (all but its last token), evict the shortfall of free
KV slots, insert the prompt and the output tokens as the simulator does (``--prompts-only``
leaves the outputs out). Belady's bound is optimal offline eviction in this same model at the
same capacity, at page granularity (``radixbench.sim.belady``).

Counting vs block-level simulators: here tokens (pages) over the whole selection; a prompt's
partial last hash block is cached and hit token by token, a hit is capped at ``input - 1``
tokens; block-level simulators count whole blocks only (a partial last block is never cached nor
hit) and often replay a time window from a cold cache. The report states both ceilings.

Writes ``replay.md``, ``summary.{parquet,csv}``, ``requests.{parquet,csv}`` and
``config.json`` into a new run folder under ``out`` (atomically).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from radixbench.harness.config.scenario import Scenario
from radixbench.harness.experiments.rundir import AtomicRunDir, environment
from radixbench.harness.experiments.workload import load_requests
from radixbench.reports.replay import write_replay_report
from radixbench.sim.replay import EVICTOR, MATCHER, replay

__all__ = ["ReplayOutcome", "run_replay"]


@dataclass(frozen=True)
class ReplayOutcome:
    """``run_dir``: the new run folder; ``summary``: one row per policy plus Belady's bound and
    the ceiling (:attr:`radixbench.sim.replay.ReplayResult.summary`); ``meta``: what
    ``config.json`` holds; ``skipped``: malformed trace lines skipped."""

    run_dir: Path
    summary: pd.DataFrame
    meta: dict[str, Any]
    skipped: int


def run_replay(
    scenario: Scenario,
    policies: Sequence[str],
    *,
    on_bad_line: str | None = None,
    include_outputs: bool = True,
    out: Path = Path("runs"),
    progress: bool | None = None,
) -> ReplayOutcome:
    """Replay ``scenario``'s requests through one cache per policy in ``policies`` and write the
    run folder ``out/replay-<time>`` (atomically).

    ``on_bad_line``: "error" / "skip" for a malformed trace line (None = the scenario's);
    ``include_outputs``: insert the output tokens too, as the simulator does; ``progress``: a
    progress bar (None = only on a terminal). Raises ``ValueError`` / ``TraceError`` (bad
    input, an unknown policy, an empty selection) before anything is written.
    """
    started = time.perf_counter()
    workload = load_requests(scenario, on_bad_line)
    reqs = workload.requests
    cap, page = scenario.sim.kv_capacity_tokens, scenario.sim.page_size
    with tqdm(
        total=len(reqs),
        unit="req",
        desc="replay",
        disable=None if progress is None else not progress,
    ) as bar:
        result = replay(
            reqs,
            cap,
            page,
            policies,
            include_outputs=include_outputs,
            on_request=lambda: bar.update(1),
        )
    meta: dict[str, Any] = {
        "command": "replay",
        "scenario": workload.label,
        "requests": len(reqs),
        "input_tokens": int(result.requests["input_len"].sum()),
        "skipped_lines": len(workload.skipped),
        "kv_capacity_tokens": cap,
        "page_size": page,
        "include_outputs": include_outputs,
        "policies": list(policies),
        "evictor": EVICTOR,
        "matcher": MATCHER,
        "block_ceiling": result.block_ceiling,
        "tokens_s": round(result.tokens_s, 2),
        "seed": scenario.seed,
        "environment": environment(),
    }
    with AtomicRunDir(out, time.strftime("replay-%Y%m%d-%H%M%S")) as run_dir:
        meta["wall_s"] = round(time.perf_counter() - started, 2)
        summary = result.summary
        (run_dir.tmp / "config.json").write_text(json.dumps(meta, indent=2, default=str))
        write_replay_report(run_dir.tmp, summary, result.requests, meta)
    assert run_dir.final is not None
    return ReplayOutcome(run_dir.final, summary, meta, len(workload.skipped))
