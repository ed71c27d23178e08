"""Run metadata shown by the reports: run fields, environment block, config hash, hit-rate
ceiling and clock mode, as ``(label, text)`` rows shared by ``report.md`` and ``report.html``.

``meta`` is the dict the harness writes to ``config.json``; every key is optional (old runs
lack the newer ones) and a missing value shows as ``n/a``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "HIDDEN_META_KEYS",
    "clock_mode",
    "config_hash",
    "environment_rows",
    "hit_rate_text",
    "run_rows",
]

#: Meta keys rendered by dedicated blocks (or too large to list) rather than as extra rows.
HIDDEN_META_KEYS = frozenset(
    {
        "spec",
        "environment",
        "sim_end_s",
        "hit_rate_ceiling",
        "hit_rate_belady",
        "clock",
        "clock_mode",
        "implementations",
    }
)

_RUN_FIELDS: tuple[tuple[str, str], ...] = (
    ("scenario", "scenario"),
    ("requests", "requests"),
    ("seed", "seed"),
    ("device", "device"),
)

_ENV_FIELDS: tuple[tuple[str, str], ...] = (
    ("cpu", "CPU model"),
    ("cores", "cores"),
    ("python", "Python"),
    ("torch", "torch"),
    ("cuda_device", "CUDA device"),
    ("git_commit", "git commit"),
    ("platform", "platform"),
)


def config_hash(spec: Any) -> str | None:
    """First 16 hex digits of sha256 over the canonical JSON of ``spec`` (keys sorted, no
    whitespace, non-JSON values via ``str``); None when ``spec`` is None."""
    if spec is None:
        return None
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def clock_mode(meta: Mapping[str, Any]) -> str:
    """``meta["clock"]`` (or the older ``clock_mode``); ``isolated`` when neither is set."""
    value = meta.get("clock", meta.get("clock_mode"))
    return "isolated" if value is None else str(value)


def _show(value: Any) -> str:
    return "n/a" if value is None else str(value)


def run_rows(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Run fields (scenario, requests, seed, device, clock mode, wall time, config hash), then
    any extra meta keys not in :data:`HIDDEN_META_KEYS`."""
    rows = [(label, _show(meta.get(key))) for key, label in _RUN_FIELDS]
    clock = clock_mode(meta)
    note = {
        "isolated": "measured CPU time is not added to simulated time",
        "coupled": "measured CPU time advances simulated time",
    }.get(clock)
    rows.append(("clock mode", f"{clock} ({note})" if note else clock))
    wall = meta.get("wall_s")
    rows.append(("wall time", f"{float(wall):.1f} s" if isinstance(wall, (int, float)) else "n/a"))
    rows.append(("config hash", _show(config_hash(meta.get("spec")))))
    known = {k for k, _ in _RUN_FIELDS} | HIDDEN_META_KEYS | {"wall_s"}
    rows.extend((str(k), _show(v)) for k, v in meta.items() if k not in known)
    return rows


def environment_rows(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """CPU model, cores, Python, torch, CUDA device, git commit, platform from
    ``meta["environment"]`` (``n/a`` each when absent; CUDA device ``none`` when recorded as
    None), plus the seed and config hash."""
    env = meta.get("environment")
    env = env if isinstance(env, Mapping) else {}
    rows = []
    for key, label in _ENV_FIELDS:
        value = env.get(key)
        if key == "cuda_device" and key in env and value is None:
            value = "none"
        rows.append((label, _show(value)))
    rows.append(("seed", _show(meta.get("seed"))))
    rows.append(("config hash", _show(config_hash(meta.get("spec")))))
    return rows


def hit_rate_text(achieved: float | None, meta: Mapping[str, Any]) -> str | None:
    """The text ``achieved X % vs ceiling Y % (...)`` when ``meta["hit_rate_ceiling"]`` is set
    (fractions in [0, 1]); None otherwise. ``achieved`` is a fraction or None (over finished
    requests); when the ceiling records ``requests`` / ``rejected`` (counts of the requests it
    covers / left out), the text states that both cover the same finished requests and how
    many were rejected. With ``meta["hit_rate_belady"]`` (``sim.belady.belady_bound``) it adds
    Belady's bound at the run's KV capacity."""
    ceiling = meta.get("hit_rate_ceiling")
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
    belady = meta.get("hit_rate_belady")
    if isinstance(belady, Mapping):
        cap = belady.get("kv_capacity_tokens")
        at = f" at {cap:,} KV tokens" if isinstance(cap, int) else ""
        text += (
            f"; Belady bound{at} {pct(belady.get('all'))} over the same requests (optimal "
            "offline eviction, requests one at a time with the whole pool as cache: no eviction "
            "policy does better there; see `radixbench replay`)"
        )
    return text
