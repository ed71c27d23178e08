"""sglang 0.5.23's HiCache server arguments of the simulating commands (``compare``,
``profile``): ``--enable-hierarchical-cache``, ``--hicache-*``; any of them turns HiCache on.
Each sets a scenario key (``scenario_args.OVERRIDES``); ``--hicache-storage-backend-extra-config``
is read by :func:`storage_extra`. Building the arguments imports nothing heavy (help texts are
:class:`~radixbench.harness.cli.util.LazyText`)."""

from __future__ import annotations

import argparse
from typing import Any

from radixbench.harness.cli.util import UsageError, csv_list, lazy_help

__all__ = ["EXTRA_CONFIG_FLAG", "add_hicache_arguments", "hicache_flag", "storage_extra"]

#: The flag :func:`storage_extra` reads.
EXTRA_CONFIG_FLAG = "--hicache-storage-backend-extra-config"


def _hicache() -> Any:
    import radixbench.cache.hicache as hicache

    return hicache


def add_hicache_arguments(c: argparse.ArgumentParser) -> None:
    """sglang 0.5.23's HiCache server arguments (``arg_groups/fields/memory.py:98-200``); any
    of them turns HiCache on. Scenario keys: ``[cache.hicache]`` (``HiCacheSim``) and
    ``[variants] hicache`` (the write policies, an axis)."""

    g = c.add_argument_group("HiCache (host and storage tiers; any flag turns HiCache on)")
    g.add_argument(
        "--enable-hierarchical-cache",
        action="store_const",
        const=True,
        help="host (L2) tier behind the device KV pool, as sglang --enable-hierarchical-cache",
    )
    g.add_argument(
        "--hicache-ratio", type=float, metavar="R",
        help="host pool = R x the device pool (>= 1; default 2)",
    )  # fmt: skip
    g.add_argument(
        "--hicache-size", type=float, metavar="GB",
        help="host pool in GB per rank (overrides --hicache-ratio)",
    )  # fmt: skip
    g.add_argument(
        "--hicache-write-policy",
        type=csv_list,
        metavar="POLICY[,POLICY]",
        help=lazy_help(
            lambda: (
                f"{', '.join(_hicache().WRITE_POLICIES)} (a comma list is an axis: one "
                "variant per policy)"
            )
        ),
    )
    g.add_argument(
        "--hicache-storage-backend",
        metavar="NAME",
        help=lazy_help(
            lambda: (
                f"storage (L3) tier behind the host: {', '.join(_hicache().STORAGE_BACKENDS)} "
                "(sglang's no-IO simulator: bandwidth and latency, see "
                "--hicache-storage-backend-extra-config)"
            )
        ),
    )
    g.add_argument(
        "--hicache-storage-prefetch-policy",
        metavar="POLICY",
        help=lazy_help(
            lambda: (
                "when a prefetch from storage stops: "
                f"{', '.join(_hicache().PREFETCH_POLICIES)} (default timeout)"
            )
        ),
    )
    g.add_argument(
        "--hicache-storage-backend-extra-config",
        metavar="JSON",
        help='storage settings, as sglang: {"sim_write_gbps": 5, "sim_read_gbps": 5, '
        '"sim_op_latency_us": 100, "prefetch_threshold": 256, "prefetch_timeout_base": 1.0, '
        '"prefetch_timeout_per_ki_token": 0.25}',
    )
    g.add_argument(
        "--hicache-host-link-gbps", type=float, metavar="GB/S",
        help="device<->host link per direction (default: the cost model's, e.g. 55 on H100)",
    )  # fmt: skip


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
