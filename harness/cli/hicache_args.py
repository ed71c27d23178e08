"""sglang 0.5.23's HiCache server arguments of the simulating commands (``compare``,
``profile``): ``--enable-hierarchical-cache``, ``--hicache-*``; any of them turns HiCache on.
They are declared with the other knobs (:data:`radixbench.harness.cli.knobs.KNOBS`), each
setting a scenario key; here what is not a plain override: ``--hicache-storage-backend-extra-
config`` read by :func:`storage_extra`, and :func:`hicache_flag`."""

from __future__ import annotations

import argparse
from typing import Any

from radixbench.harness.cli.util import UsageError

__all__ = ["EXTRA_CONFIG_FLAG", "hicache_flag", "storage_extra"]

#: The flag :func:`storage_extra` reads.
EXTRA_CONFIG_FLAG = "--hicache-storage-backend-extra-config"


#: ``--hicache-storage-backend-extra-config`` key -> ``StorageConfig`` field (sglang's names).
_STORAGE_EXTRA = {
    "sim_write_gbps": "write_gbps",
    "sim_read_gbps": "read_gbps",
    "sim_op_latency_us": "op_latency_us",
    "prefetch_threshold": "prefetch_threshold",
    "prefetch_timeout_base": "timeout_base_s",
    "prefetch_timeout_per_ki_token": "timeout_per_ki_token_s",
}


def storage_extra(text: str) -> dict[str, Any]:
    """``--hicache-storage-backend-extra-config`` -> scenario overrides. Raises
    :class:`UsageError` naming the flag for bad JSON or an unknown key."""
    import json

    flag = EXTRA_CONFIG_FLAG
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{flag}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{flag}: expected a JSON object")
    out = {}
    for k, v in doc.items():
        if k not in _STORAGE_EXTRA:
            raise UsageError(f"{flag}: unknown key {k!r}; known: {', '.join(_STORAGE_EXTRA)}")
        out[f"sim.hicache.storage.{_STORAGE_EXTRA[k]}"] = v
    return out


def hicache_flag(args: argparse.Namespace) -> str | None:
    """The first HiCache flag the command line gave (``--enable-hierarchical-cache``,
    ``--hicache-*``), or None."""
    for dest, value in vars(args).items():
        if dest.startswith(("enable_hierarchical_cache", "hicache_")) and value is not None:
            return f"--{dest.replace('_', '-')}"
    return None
