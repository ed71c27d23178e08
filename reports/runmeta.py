"""Run metadata shown by the reports: run fields, environment block, config hash and hit-rate
ceiling, as ``(label, text)`` rows shared by ``report.md`` and ``report.html``, from the typed
run record (:class:`radixbench.reports.record.RunMeta`). A field the run did not record shows
as ``n/a``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from radixbench.reports.record import RunMeta

__all__ = [
    "config_hash",
    "cost_source_text",
    "environment_rows",
    "hit_rate_text",
    "run_rows",
    "run_title",
    "scenario_parts",
]

_ENV_FIELDS: tuple[tuple[str, str], ...] = (
    ("cpu", "CPU model"),
    ("cores", "cores"),
    ("python", "Python"),
    ("torch", "torch"),
    ("cuda_device", "CUDA device"),
    ("git_commit", "git commit"),
    ("platform", "platform"),
)

_BUILDER_NOTES = {
    True: "on (every step builds its batch, timed: build_extend / build_decode)",
    False: "skipped (--no-batch-builder: req_to_token rows written only, no build ops)",
}
_CLOCK_NOTES = {
    "isolated": "measured CPU time is not added to simulated time",
    "coupled": "measured CPU time advances simulated time",
}


def config_hash(spec: Any) -> str | None:
    """First 16 hex digits of sha256 over the canonical JSON of ``spec`` (keys sorted, no
    whitespace, non-JSON values via ``str``); None when ``spec`` is None."""
    if spec is None:
        return None
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _count(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,}"


def _show(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return "; ".join(map(_show, value)) or "none"
    return str(value)


def scenario_parts(meta: RunMeta) -> tuple[str, str]:
    """``(name, description)`` of ``meta.scenario`` (``"<name>: <description>"``; the
    description is "" when the record has none)."""
    name, _, description = str(meta.scenario).partition(": ")
    return name, description


def run_title(meta: RunMeta) -> str:
    """What ran, for a report's title: ``shared-prefix-serving — 200 requests, KV pool 50,000
    tokens`` (``..., 8 instances, KV pool 76,832 tokens each`` in a cluster run), from the run
    record, so ``--requests`` / ``--kv-capacity`` / ``--instances`` overrides show, never the
    scenario description's own numbers. Fields the record lacks are left out."""
    name, _ = scenario_parts(meta)
    parts = [f"{meta.requests:,} requests"] if isinstance(meta.requests, int) else []
    cluster = meta.extra.get("cluster") if isinstance(meta.extra, Mapping) else None
    n = cluster.get("instances") if isinstance(cluster, Mapping) else None
    if isinstance(n, int):
        parts.append(f"{n:,} instance{'s' if n != 1 else ''}")
    if isinstance(meta.kv_capacity_tokens, int):
        each = " each" if isinstance(n, int) and n > 1 else ""
        parts.append(f"KV pool {meta.kv_capacity_tokens:,} tokens{each}")
    return f"{name} — {', '.join(parts)}" if parts else name


def run_rows(meta: RunMeta) -> list[tuple[str, str]]:
    """Run fields (scenario, requests, seed, device, clock mode, wall time, config hash, the
    scheduler and cache settings, events as ``variant: count``), then the record's ``extra``
    keys; empty lists and mappings (no skipped lines) are left out."""
    clock = meta.clock
    note = _CLOCK_NOTES.get(clock)
    wall = meta.wall_s
    rows = [
        ("scenario", _show(meta.scenario)),
        ("requests", _count(meta.requests)),
        ("seed", _show(meta.seed)),
        ("device", _show(meta.device)),
        ("clock mode", f"{clock} ({note})" if note else clock),
        ("wall time", f"{float(wall):.1f} s" if isinstance(wall, (int, float)) else "n/a"),
        ("config hash", _show(config_hash(meta.spec))),
    ]
    settings = (
        ("KV pool", meta.kv_capacity_tokens, " tokens"),
        ("page size", meta.page_size, " tokens"),
        ("max running requests", meta.max_running, ""),
    )
    rows += [(label, f"{_count(v)}{unit}") for label, v, unit in settings if v is not None]
    named = (("scheduling policy", meta.sched_policy), ("cost model", meta.cost_model))
    rows += [(label, str(v)) for label, v in named if v is not None]
    if meta.batch_builder is not None:
        rows.append(("ScheduleBatch builder", _BUILDER_NOTES[meta.batch_builder]))
    if meta.cost_source:
        rows.append(("cost model data", cost_source_text(meta.cost_source)))
    if meta.baseline:
        rows.append(("baseline", _show(meta.baseline)))
    rows.append(("skipped malformed trace lines", _count(meta.skipped_lines)))
    if meta.skipped_line_errors:
        rows.append(("first skipped lines", _show(meta.skipped_line_errors)))
    if meta.events:
        events = ", ".join(f"{k}: {_count(v)}" for k, v in meta.events.items())
        rows.append(("simulated events", events))
    if meta.torch_threads is not None:
        rows.append(("torch threads", _show(meta.torch_threads)))
    rows.extend((str(k), _show(v)) for k, v in meta.extra.items() if not _empty(v))
    return rows


def cost_source_text(info: Mapping[str, Any]) -> str:
    """The cost model's data source, version and system in one line (``cost_info``'s keys:
    ``kind``, ``source``, ``framework``, ``version``, ``data_versions``, ``system``, ``tp``)."""
    parts = [f"{info.get('kind', '?')}: {info.get('source', 'n/a')}"]
    if info.get("version"):
        data = f" (by op: {info['data_versions']})" if info.get("data_versions") else ""
        parts.append(f"{info.get('framework', '')} {info['version']} data{data}".strip())
    if info.get("system"):
        tp = f", TP {info['tp']}" if info.get("tp") else ""
        parts.append(f"system {info['system']}{tp}")
    return "; ".join(parts)


def _empty(value: Any) -> bool:
    """An empty list or mapping (``skipped_line_errors: []``): a row saying nothing."""
    return isinstance(value, (list, tuple, Mapping)) and not value


def environment_rows(meta: RunMeta) -> list[tuple[str, str]]:
    """CPU model, cores, Python, torch, CUDA device, git commit, platform from
    ``meta.environment`` (``n/a`` each when absent; CUDA device ``none`` when recorded as
    None), plus the seed and config hash."""
    env = meta.environment
    rows = []
    for key, label in _ENV_FIELDS:
        value = env.get(key)
        if key == "cuda_device" and key in env and value is None:
            value = "none"
        rows.append((label, _show(value)))
    rows.append(("seed", _show(meta.seed)))
    rows.append(("config hash", _show(config_hash(meta.spec))))
    return rows


def hit_rate_text(achieved: float | None, meta: RunMeta) -> str | None:
    """The text ``achieved X % vs ceiling Y % (...)`` when ``meta.hit_rate_ceiling`` is set
    (fractions in [0, 1]); None otherwise. ``achieved`` is a fraction or None (over finished
    requests); when the ceiling records ``requests`` / ``rejected`` (counts of the requests it
    covers / left out), the text states that both cover the same finished requests and how
    many were rejected. With ``meta.hit_rate_belady`` (``sim.belady.belady_bound``) it adds
    Belady's bound at the run's KV capacity."""
    ceiling = meta.hit_rate_ceiling
    if not isinstance(ceiling, Mapping):
        return None

    def pct(x: Any) -> str:
        return f"{100.0 * float(x):.1f} %" if isinstance(x, (int, float)) else "n/a"

    text = f"achieved {pct(achieved)} vs ceiling {pct(ceiling.get('all'))}"
    if "last_half" in ceiling:
        text += f" (ceiling over the last half of the trace: {pct(ceiling.get('last_half'))})"
    text += "; ceiling = hit rate with an infinite cache"
    n, rejected = ceiling.get("requests"), ceiling.get("rejected")
    if isinstance(n, int):
        text += f"; both over the {n:,} finished requests"
        if isinstance(rejected, int) and rejected:
            text += f" ({rejected:,} rejected, left out of both: never served)"
    belady = meta.hit_rate_belady
    if isinstance(belady, Mapping):
        cap = belady.get("kv_capacity_tokens")
        at = f" at {cap:,} KV tokens" if isinstance(cap, int) else ""
        text += (
            f"; Belady bound{at} {pct(belady.get('all'))} over the same requests (optimal "
            "offline eviction, requests one at a time with the whole pool as cache: no eviction "
            "policy does better there; see `radixbench replay`)"
        )
    return text
