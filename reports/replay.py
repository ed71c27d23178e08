"""The report of ``radixbench replay``: per-policy prefix hit rates beside LRU, Belady's bound
and the infinite-cache ceiling.

:func:`write_replay_report` writes into a run folder::

    run_dir/
      replay.md                    the table and how it counts
      summary.{parquet,csv}        one row per policy, then belady and ceiling
      requests.{parquet,csv}       hit tokens per request and policy (+ belady, ceiling)
      config.json                  (written by the harness)

every file atomically (:mod:`radixbench.reports._atomic`). :func:`text_table` is the same table
for a terminal. Both read only DataFrames and the run record (``RunMeta``: the replay's own
fields in ``extra``), never the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.reports._atomic import atomic_paths
from radixbench.reports.markdown import pipe_table
from radixbench.reports.record import RunMeta
from radixbench.reports.tables import write_table

__all__ = ["COUNTING_NOTE", "display_frame", "replay_markdown", "text_table", "write_replay_report"]

#: How the replay counts, compared with block-level simulators (stated in every report).
COUNTING_NOTE = (
    "Counting: token (page) granularity over the whole selection, in arrival order. A request "
    "hits the cached part of its first input_length - 1 prompt tokens, rounded down to whole "
    "pages; the rate is hit tokens / prompt tokens over every request (no warm-up excluded; "
    "'last half' = requests n/2 onward, a warm cache). A prompt's partial last hash block is "
    "cached and hit token by token. Block-level simulators (e.g. hash-block replays of the "
    "Mooncake trace) count whole blocks only: a partial last block is never cached nor hit, a "
    "hit is leading cached blocks x block size, the capacity is a number of blocks, and often "
    "only a time window of the trace is replayed; their rates are lower by up to one block per "
    "request (see the block-level ceiling below) and differ again for a window, whose cache "
    "starts cold."
)

_BELADY_NOTE = (
    "Belady = optimal offline eviction (furthest next use) in this same sequential model at the "
    "same KV capacity, at page granularity: it may keep part of a node, so no policy of a cache "
    "that evicts whole leaves can beat it. It bounds this replay, not the simulator (which "
    "also holds running requests' KV in the pool and admits requests in batches, so its hit "
    "rate is normally lower). Ceiling = an infinite cache (workloads.ceiling)."
)


def _count(value: Any) -> str:
    return "–" if value is None or pd.isna(value) else f"{int(value):,}"


def display_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` for people: rates in percent (two decimals), counts with thousands
    separators ("–" where a row has none: Belady, the ceiling), readable column names."""
    impls = summary["impl"] if "impl" in summary else pd.Series("", index=summary.index)
    several = len(set(impls) - {""}) > 1
    return pd.DataFrame(
        {
            **({"impl": impls} if several else {}),
            "policy": summary["policy"],
            "hit rate %": (100.0 * summary["hit_rate"]).round(2),
            "last half %": (100.0 * summary["hit_rate_last_half"]).round(2),
            "vs LRU (pts)": summary["vs_lru_pts"].round(2),
            "of Belady %": (100.0 * summary["of_belady"]).round(1),
            "evict calls": summary["evict_calls"].map(_count),
            "evicted tokens": summary["evicted_tokens"].map(_count),
            "not cached": summary["not_cached"].map(_count),
            "time s": summary["wall_s"].round(2),
        }
    )


def _settings(meta: RunMeta) -> list[str]:
    x = meta.extra
    outputs = "included (as the simulator)" if x.get("include_outputs") else "left out"
    return [
        f"scenario: {meta.scenario}",
        f"requests: {meta.requests} (prompt tokens: {x.get('input_tokens', 'n/a')})",
        f"KV capacity: {meta.kv_capacity_tokens} tokens, page size {meta.page_size}; output "
        f"tokens {outputs}",
        f"wall time: {meta.wall_s} s (token ids {x.get('tokens_s', 'n/a')} s, shared by the "
        "policies)",
    ]


def _block_line(meta: RunMeta) -> str | None:
    blk = meta.extra.get("block_ceiling")
    if not isinstance(blk, Mapping):
        return None
    return (
        f"Infinite-cache ceiling counted in whole blocks (block-level simulators): "
        f"{100.0 * float(blk['all']):.2f} % (last half {100.0 * float(blk['last_half']):.2f} %)."
    )


def text_table(summary: pd.DataFrame, meta: RunMeta) -> str:
    """The report's table and settings as plain text for a terminal."""
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        table = display_frame(summary).to_string(index=False)
    lines = [*_settings(meta), "", table, ""]
    block = _block_line(meta)
    if block:
        lines.append(block)
    return "\n".join(lines)


def replay_markdown(summary: pd.DataFrame, meta: RunMeta) -> str:
    """``replay.md``: settings, the table (percent of prompt tokens), Belady and counting notes."""
    parts = [
        "# Cache replay: prefix hit rate per eviction policy",
        "",
        *(f"- {line}" for line in _settings(meta)),
        "",
        pipe_table(display_frame(summary)),
        "",
        _BELADY_NOTE,
        "",
        COUNTING_NOTE,
    ]
    block = _block_line(meta)
    if block:
        parts += ["", block]
    parts += [
        "",
        "Tables: `summary.parquet` / `summary.csv` (this table, rates as fractions), "
        "`requests.parquet` / `requests.csv` (hit tokens per request and policy).",
        "",
    ]
    return "\n".join(parts)


def write_replay_report(
    run_dir: Path, summary: pd.DataFrame, requests: pd.DataFrame, meta: RunMeta
) -> dict[str, Path]:
    """Write ``summary`` and ``requests`` (Parquet + CSV) and ``replay.md`` into ``run_dir``,
    each atomically; returns name -> path (``replay_md``, ``summary``, ``requests``: the
    Parquet files)."""
    run_dir = Path(run_dir)
    paths = {
        "summary": write_table(summary, run_dir, "summary")[0],
        "requests": write_table(requests, run_dir, "requests")[0],
    }
    md = run_dir / "replay.md"
    with atomic_paths(md) as (tmp,):
        tmp.write_text(replay_markdown(summary, meta), encoding="utf-8")
    paths["replay_md"] = md
    return paths
