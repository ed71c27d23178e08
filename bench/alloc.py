"""Benchmark of the KV allocators: radixbench's against sglang's own, in one process.

``radixbench bench alloc`` (and a section of ``bench cache``) times ``alloc`` and ``free`` of
radixbench's ``TokenToKVPoolAllocator`` / ``PagedTokenToKVPoolAllocator`` (debug checks off, as
the simulator runs them) and of sglang's classes of the same names, loaded at run time from the
installed package (``load_sglang_allocators``; no SGLang code is copied). Not a timed test: it
prints figures.

Method. A case is (allocator, slots per call ``n``, free-list state). Each side gets its own
pool of ``pool`` slots; with state ``short`` all but the ``calls * n`` slots the rounds take are
allocated first (untimed), so the free list is short (sglang's best case: its ``free``
concatenates onto the whole free list); with ``long`` the whole pool is free. A round times
``calls`` consecutive ``alloc(n)`` (one sample), then ``calls`` ``free`` of the results in the
same order (one sample); sides alternate within each round (the first side alternates between
rounds) so background load hits both alike. Nothing is reset between rounds, so radixbench's
deferred work (merging the freed tensors into the free list when it runs short) is paid inside
the timed ``alloc`` calls. Figures are µs per call: the mean over all rounds (deferred merges
included), after one untimed warm-up round. The cyclic garbage collector is collected once
before a case and off during it (no collection returns memory to the OS between timed calls).
The token allocators must hand out the same slots in the same order (checked every round);
paged, sglang 0.5.23 puts freed pages at the front of its free list, radixbench at the back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import pandas as pd
import torch

from radixbench.bench.calibration import Calibration
from radixbench.bench.timing import Row, gc_paused
from radixbench.cache.allocator import TokenToKVPoolAllocator
from radixbench.cache.paged_allocator import PagedTokenToKVPoolAllocator
from radixbench.cache.sglang import SGLangAllocators, SGLangLoadError, load_allocators
from radixbench.reports.markdown import markdown_table


class SGLangAllocatorsUnavailable(RuntimeError):
    """sglang's allocators cannot be loaded; the message says why (one line: the loader's
    ``SGLangLoadError`` without its ``"sglang: "`` prefix)."""


def load_sglang_allocators() -> SGLangAllocators:
    """sglang's allocator classes (``radixbench.cache.sglang.load_allocators``: executed from the
    installed package by the one SGLang loader). Raises ``SGLangAllocatorsUnavailable`` (the
    loader's one-line reason) when sglang is not installed or its files do not load."""
    try:
        return load_allocators()
    except SGLangLoadError as e:
        raise SGLangAllocatorsUnavailable(str(e).removeprefix("sglang: ")) from None


@dataclass(frozen=True)
class AllocBenchSpec:
    """``calls`` per sample, ``rounds`` samples per case, ``pool`` slots (raised to fit one
    round), ``page_size`` of the paged cases, ``sizes``: tokens per call (token allocator) and
    pages per call (paged)."""

    calls: int = 200
    rounds: int = 40
    pool: int = 65_536
    page_size: int = 16
    sizes: tuple[int, ...] = (1, 16)

    def __post_init__(self) -> None:
        if min(self.calls, self.rounds, self.pool, self.page_size, *self.sizes) < 1:
            raise ValueError("bench alloc: calls, rounds, pool, page_size and sizes must be >= 1")

    @classmethod
    def quick(cls) -> AllocBenchSpec:
        return cls(calls=20, rounds=4, pool=4_096)


def _make(side: str, paged: bool, pool: int, ps: int, sgl: SGLangAllocators | None) -> Any:
    if side == "radixbench":
        if paged:
            return PagedTokenToKVPoolAllocator(pool, ps, "cpu", debug=False)
        return TokenToKVPoolAllocator(pool, "cpu", debug=False)
    assert sgl is not None
    if paged:  # (size, page_size, dtype, device, kvcache, need_sort)
        return sgl.paged(pool, ps, torch.float16, "cpu", None, False)
    return sgl.token(pool, torch.float16, "cpu", None, False)  # (size, dtype, device, ...)


def _case(
    spec: AllocBenchSpec, paged: bool, n: int, state: str, sgl: SGLangAllocators | None
) -> list[Row]:
    """Rows of one case (see the module docstring), one per side."""
    ps = spec.page_size if paged else 1
    tokens = n * ps
    take = spec.calls * tokens
    pool = max(spec.pool // ps * ps, take + ps)
    sides = ["radixbench"] + (["sglang"] if sgl is not None else [])
    allocs = {s: _make(s, paged, pool, ps, sgl) for s in sides}
    held = {s: a.alloc(pool - take) if state == "short" else None for s, a in allocs.items()}
    ns: dict[str, dict[str, int]] = {s: {"alloc": 0, "free": 0} for s in sides}

    def one_round(side: str, record: bool) -> list[torch.Tensor]:
        alloc = allocs[side].alloc
        free = allocs[side].free
        t0 = perf_counter_ns()
        outs = [alloc(tokens) for _ in range(spec.calls)]
        t1 = perf_counter_ns()
        for o in outs:
            free(o)
        t2 = perf_counter_ns()
        if record:
            ns[side]["alloc"] += t1 - t0
            ns[side]["free"] += t2 - t1
        if any(o is None for o in outs):
            raise RuntimeError(f"bench alloc: {side} ran out of slots ({state} free list)")
        return outs

    with gc_paused():  # collected once, then off for the case
        for r in range(spec.rounds + 1):  # round 0: warm-up, untimed
            order = sides if r % 2 == 0 else sides[::-1]
            outs = {s: one_round(s, r > 0) for s in order}
            if not paged and len(sides) == 2:
                a, b = (torch.cat(outs[s]) for s in sides)
                if not torch.equal(a, b):
                    raise RuntimeError("bench alloc: the token allocators handed out other slots")
    del held
    calls = spec.calls * spec.rounds
    label = f"{n} page{'s' if n > 1 else ''} of {ps}" if paged else f"{n} slot{'s' * (n > 1)}"
    rows: list[Row] = []
    for op in ("alloc", "free"):
        row: Row = {
            "allocator": "paged" if paged else "token",
            "op": op,
            "per_call": label,
            "tokens": tokens,
            "free_list": state,
            "pool_tokens": pool,
            "radixbench_us": ns["radixbench"][op] / calls / 1e3,
            "sglang_us": None,
            "sglang_over_radixbench": None,
        }
        if sgl is not None:
            row["sglang_us"] = ns["sglang"][op] / calls / 1e3
            row["sglang_over_radixbench"] = ns["sglang"][op] / max(ns["radixbench"][op], 1)
        rows.append(row)
    return rows


def run_alloc_bench(
    spec: AllocBenchSpec, sgl: SGLangAllocators | str | None = "load"
) -> tuple[list[Row], str]:
    """All cases; returns the rows and a one-line note on sglang (its version, or why it is not
    timed). ``sgl``: ``"load"`` loads it (``load_sglang_allocators``), ``None`` skips it."""
    note = "sglang not timed (not requested)"
    if sgl == "load":
        try:
            sgl = load_sglang_allocators()
        except SGLangAllocatorsUnavailable as e:
            sgl, note = None, f"sglang not timed: {e}"
    if isinstance(sgl, SGLangAllocators):
        note = f"sglang {sgl.version} from {sgl.origin} (its own allocator classes)"
    assert sgl is None or isinstance(sgl, SGLangAllocators)
    rows: list[Row] = []
    with torch.inference_mode():
        for paged in (False, True):
            for n in spec.sizes:
                for state in ("short", "long"):
                    rows += _case(spec, paged, n, state, sgl)
    return rows, note


def _fmt(v: object, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def alloc_report(
    rows: list[Row], note: str, spec: AllocBenchSpec, cal: Calibration | None = None
) -> str:
    """Markdown section: method, the sglang note, one table row per case and op; with ``cal``
    (the run's calibration) both means also in calibration units (mean / the unit)."""
    lines = ["## KV allocators: radixbench vs sglang, alloc and free (µs per call)", ""]
    lines += [
        f"Method: {spec.rounds} rounds of {spec.calls} `alloc(n)` then {spec.calls} `free` of "
        "the results per case, radixbench and sglang interleaved in one process (alternating "
        "first), CPU tensors, radixbench's debug checks off (as in the simulator); mean µs "
        "per call over all rounds after one warm-up round, so radixbench's deferred merge of "
        "freed slots is counted in its `alloc`. Free list `short`: all but the slots one "
        "round takes are held (sglang's best case: its `free` concatenates onto the whole "
        "free list); `long`: the whole pool is free. Garbage collector: collected once before "
        "each case, off during it. See `bench/alloc.py`.",
        "",
        f"SGLang: {note}.",
        "",
    ]
    head = ["allocator", "op", "per call", "free list", "pool tokens", "radixbench µs"]
    head += ["sglang µs", "sglang / radixbench"]
    if cal is not None:
        head += ["radixbench cal", "sglang cal"]
    cells = []
    for r in rows:
        row = [str(r["allocator"]), f"`{r['op']}`", str(r["per_call"]), str(r["free_list"])]
        row += [f"{r['pool_tokens']:,}", _fmt(r["radixbench_us"], ".2f")]
        row += [_fmt(r["sglang_us"], ".2f"), _fmt(r["sglang_over_radixbench"], ".2f") + "x"]
        if r["sglang_over_radixbench"] is None:
            row[-1] = "n/a"
        if cal is not None:
            row += [_in_cal(r["radixbench_us"], cal), _in_cal(r["sglang_us"], cal)]
        cells.append(row)
    return "\n".join([*lines, markdown_table(head, cells)])


def _in_cal(us: object, cal: Calibration) -> str:
    """A mean in µs as a multiple of the calibration unit, or ``n/a``."""
    return "n/a" if us is None else f"{cal.cal(float(us) * 1e3):.3g}"  # type: ignore[arg-type]


def bench_alloc_section(
    spec: AllocBenchSpec,
    sgl: SGLangAllocators | str | None = "load",
    cal: Calibration | None = None,
) -> tuple[list[Row], str]:
    """Run the benchmark and render its Markdown section: ``(rows, markdown)``."""
    rows, note = run_alloc_bench(spec, sgl)
    return rows, alloc_report(rows, note, spec, cal)


def write_alloc_section(spec: AllocBenchSpec, out: Path, cal: Calibration | None = None) -> str:
    """Run the benchmark (:func:`bench_alloc_section`), write its rows to
    ``out/bench_alloc.csv`` (``out`` created if missing) and return its Markdown section."""
    rows, text = bench_alloc_section(spec, cal=cal)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "bench_alloc.csv", index=False)
    return text


def alloc_document(
    section: str, command: str, env: dict[str, Any], cal: Calibration | None = None
) -> str:
    """The whole ``bench alloc`` report: title, the command that regenerates it, the machine
    (``env``: name -> value; ``cal``: the run's calibration figure) and ``section``."""
    lines = ["# KV allocator benchmark", "", f"Regenerate: `{command}`", "", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += [f"- {cal.line()}"] if cal is not None else []
    return "\n".join([*lines, "", section])
