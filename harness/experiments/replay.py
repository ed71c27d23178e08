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

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from radixbench.cache import registry
from radixbench.harness.config.impl import resolve_impls
from radixbench.harness.config.scenario import Scenario
from radixbench.harness.experiments.progress import progress as progress_display
from radixbench.harness.experiments.rundir import AtomicRunDir, environment
from radixbench.harness.experiments.workload import load_requests
from radixbench.reports.record import RunMeta, write_meta
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
    meta: RunMeta
    skipped: int


def run_replay(
    scenario: Scenario,
    policies: Sequence[str],
    *,
    on_bad_line: str | None = None,
    include_outputs: bool = True,
    out: Path = Path("runs"),
    progress: bool | None = None,
    impls: Sequence[str] = (),
    command_line: Sequence[str] = (),
) -> ReplayOutcome:
    """Replay ``scenario``'s requests through one cache per policy in ``policies`` and write the
    run folder ``out/replay-<time>`` (atomically).

    ``on_bad_line``: "error" / "skip" for a malformed trace line (None = the scenario's);
    ``include_outputs``: insert the output tokens too, as the simulator does; ``progress``: a
    progress bar (None = only on a terminal); ``impls``: implementation specs to replay every
    policy on (``--impl``: a policy patch beside upstream; default radixbench's cache);
    ``command_line``: recorded. Raises ``ValueError`` / ``TraceError`` (bad input, an unknown
    policy or one an implementation lacks, an empty selection) before anything is written.
    """
    resolved = resolve_impls(list(impls)) if impls else ()
    for impl in resolved:
        for policy in policies:
            registry.check_policy(impl.spec, policy)
    started = time.perf_counter()
    workload = load_requests(scenario, on_bad_line)
    reqs = workload.requests
    cap, page = scenario.sim.kv_capacity_tokens, scenario.sim.page_size
    with progress_display(len(reqs), "replay", "req", progress) as bar:

        def tick() -> None:
            bar.update(1)

        result = replay(
            reqs,
            cap,
            page,
            policies,
            include_outputs=include_outputs,
            on_request=tick,
            impls=[(i.spec, i.label) for i in resolved],
        )
    meta = RunMeta(
        command="replay",
        scenario=workload.label,
        requests=len(reqs),
        seed=scenario.seed,
        kv_capacity_tokens=cap,
        page_size=page,
        skipped_lines=len(workload.skipped),
        environment=environment(),
        command_line=list(command_line),
        extra={
            "input_tokens": int(result.requests["input_len"].sum()),
            "include_outputs": include_outputs,
            "policies": list(policies),
            "impls": [i.spec for i in resolved] or ["radixbench"],
            "evictor": EVICTOR,
            "matcher": MATCHER,
            "block_ceiling": result.block_ceiling,
            "tokens_s": round(result.tokens_s, 2),
        },
    )
    with AtomicRunDir(out, time.strftime("replay-%Y%m%d-%H%M%S")) as run_dir:
        meta = meta.replace(wall_s=round(time.perf_counter() - started, 2))
        summary = result.summary
        write_meta(run_dir.tmp, meta)
        write_replay_report(run_dir.tmp, summary, result.requests, meta)
    assert run_dir.final is not None
    return ReplayOutcome(run_dir.final, summary, meta, len(workload.skipped))
