"""Workload inputs for radixbench: request traces and their synthetic token ids.

:func:`load_mooncake` reads the Mooncake FAST'25 conversation trace (bundled in
``radixbench.workloads.data``; timestamps in ms, ``hash_ids`` of 512-token blocks) into
:class:`TraceRequest` records with arrival times in seconds, raising :class:`TraceError`
(``"<file>:<line>: <reason>"``) on malformed input; :func:`block_tokens` and
:func:`output_tokens` turn block hashes and request ids into deterministic int64 token ids
so that requests sharing a hash prefix share a token prefix in the radix cache.
"""

from radixbench.workloads.tokens import DEFAULT_VOCAB_SIZE, block_tokens, output_tokens
from radixbench.workloads.trace import (
    MOONCAKE_BLOCK_SIZE,
    TraceError,
    TraceRequest,
    bundled_mooncake_path,
    load_mooncake,
)

__all__ = [
    "DEFAULT_VOCAB_SIZE",
    "MOONCAKE_BLOCK_SIZE",
    "TraceError",
    "TraceRequest",
    "block_tokens",
    "bundled_mooncake_path",
    "load_mooncake",
    "output_tokens",
]
