"""Workload inputs for radixbench: request traces and their synthetic token ids.

:func:`load_mooncake` reads the Mooncake FAST'25 conversation trace (bundled in
``radixbench.workloads.data``; timestamps in ms, ``hash_ids`` of 512-token blocks) into
:class:`TraceRequest` records with arrival times in seconds, raising :class:`TraceError`
(``"<file>:<line>: <reason>"``) on malformed input; :func:`block_tokens` and
:func:`output_tokens` turn block hashes and request ids into deterministic int64 token ids
so that requests sharing a hash prefix share a token prefix in the radix cache.

Scenario workloads: :mod:`.sources` (kind -> parameters -> requests), :mod:`.generators` (the
synthetic prefix-sharing workloads), :mod:`.tabular` (Azure 2023 and generic JSONL/CSV traces),
:mod:`.segments` (segment prompts, the synthetic-prefix rule), :mod:`.arrivals` (Poisson, gamma,
constant, trace timestamps; scaling; selection) and :mod:`.ceiling` (infinite-cache hit ceiling).
"""

from radixbench.workloads.tokens import (
    DEFAULT_VOCAB_SIZE,
    HashBlocks,
    block_tokens,
    output_tokens,
)
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
    "HashBlocks",
    "TraceError",
    "TraceRequest",
    "block_tokens",
    "bundled_mooncake_path",
    "load_mooncake",
    "output_tokens",
]
