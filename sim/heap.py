"""Give the C heap's free pages back to the operating system (glibc ``malloc_trim``).

A simulation frees medium-sized buffers all the time: every request's prompt tokens, its KV
slot indices and the tensors and arrays built from them (64 KB to 1 MB each; strace of 400
Mooncake requests on 2 instances: ~9,700 such frees, from numpy, ``array`` and torch). glibc
serves them from its heap once its dynamic mmap threshold has risen (it rises to the size of
any mmapped block freed, up to 32 MB), and long-lived blocks allocated in between (radix-tree
keys, per-request token times) pin the heap's pages, so freed memory stays resident: measured
on the whole Mooncake trace behind 8 instances, 167 MB of the process's RSS at the end of the
simulation was free heap that ``malloc_trim(0)`` returned in 13 ms. Fixing the threshold
instead (``MALLOC_MMAP_THRESHOLD_=65536``) kept the heap small too but turned every such
buffer into an mmap / munmap pair: +9 s of system time on a 20 s run. :func:`trim_heap`
is what a long run calls now and then (``sim.run.VariantSim`` after it moves logs to disk);
dask.distributed's workers do the same (``distributed.worker_memory``'s ``trim_memory``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

__all__ = ["trim_heap"]


def _libc_trim() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
        return None


_TRIM = _libc_trim()


def trim_heap() -> bool:
    """Return the C heap's free pages to the OS (``malloc_trim(0)``); False where the C
    library has no such call (then nothing happens). Mutates no Python object."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
