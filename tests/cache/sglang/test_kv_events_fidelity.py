"""Differential test of KV events against sglang 0.5.23's own recorder.

radixbench's ``RadixCache`` (``KVEventRecorder``) and sglang 0.5.23's served
``UnifiedRadixCache`` with BOTH tree cores — Rust (the extension hashes the pages) and Python
(``KVCacheEventRecorder`` of ``mem_cache/events.py`` with the hash helpers of
``mem_cache/utils.py`` and ``disaggregation/kv_events.py``, its native page hash compiled from
the installed ``hash_binding.cpp``) — all loaded from the installed package at run time, replay
the operation streams of ``test_served_fidelity.py`` / ``test_legacy_fidelity.py``
(inserts under memory pressure, matches, locks, evictions, request flows with checkpoints,
finishes, retractions; keys in the default namespace, an ``extra_key`` and a ``cache_salt``)
in lockstep, with events on; admitted requests belong to one of two sessions or to none
(``session_id``). After EVERY operation each side's events are drained (``take_actions``, the
call the scheduler's publisher makes) and compared: with the Python core, event for event in
wire form (boundaries included: radixbench's queue coalesces as its ``KVCacheEventRecorder.
enqueue`` does); with the Rust core, which groups removals its own way, the concatenated block
sequences: per stored page its id, parent id, tokens, medium, salt, session, LoRA name and id;
per removed page its id and medium; every ``AllBlocksCleared``.

Cases: page size {1, 16} x event format {default, default with ``extra_key`` "lora" naming a
LoRA adapter, Dynamo, Dynamo with "lora" the id of a loaded adapter (``lora_name`` resolved
from the adapter table)} under LRU, plus LFU / priority / FIFO victims at both page sizes.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import assume, given, settings

from radixbench.cache import CacheConfig, RadixCache, ReqToTokenPool, make_allocator
from radixbench.cache.kv_events import KVEventConfig, event_to_wire
from radixbench.cache.radix_cache import counter_clock

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed (make install)", allow_module_level=True)

from radixbench.cache.sglang.legacy_load import SGLangLoadError
from radixbench.cache.sglang.served import ServedSGLangCache


def _sibling(name: str) -> Any:
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"radixbench_tests_events_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


served = _sibling("test_served_fidelity.py")  # skips the module when sglang cannot load
base = served.base
RUST, PYTHON = served.RUST, served.PYTHON

FORMATS = {
    "default": KVEventConfig(),
    "lora": KVEventConfig(lora_names=(("lora", "adapter-a"),)),
    "dynamo": KVEventConfig(dynamo_format=True),
    "dynamo-adapter": KVEventConfig(dynamo_format=True, lora_adapters=(("lora", "adapter-b"),)),
}
SESSIONS = (None, "session-a", "session-b")  # a request's, by its row
CASES = [("lru", page, fmt) for page in (1, 16) for fmt in FORMATS] + [
    (policy, page, "default") for policy in ("lfu", "priority", "fifo") for page in (1, 16)
]
EXAMPLES = 6
TOTALS: Counter[str] = Counter()


def _blocks(events: list[Any]) -> list[tuple]:
    """The concatenated block sequence of one drain."""
    out: list[tuple] = []
    for e in events:
        kind = type(e).__name__
        if kind == "BlockStored":
            size, parent = e.block_size, e.parent_block_hash
            for i, h in enumerate(e.block_hashes):
                tokens = tuple(e.token_ids[i * size : (i + 1) * size])
                page = ("stored", h, parent, tokens, e.medium)
                out.append((*page, e.cache_salt, e.session_id, e.lora_name, e.lora_id))
                parent = h
        elif kind == "BlockRemoved":
            out += [("removed", h, e.medium) for h in e.block_hashes]
        else:
            out.append(("cleared",))
    return out


def _sides(policy: str, page: int, fmt: KVEventConfig) -> list[Any]:
    cfg = base.policy_config(policy, page)
    ctx = (base.LIMIT_PAGES + 1) * page

    def parts() -> tuple[Any, ReqToTokenPool]:
        return make_allocator(base.POOL_PAGES * page, page), ReqToTokenPool(base.MAX_RUNNING, ctx)

    alloc, pool = parts()
    conf = CacheConfig(page, "heapify", "galloping", policy, cfg, kv_events=fmt)
    sides = [EventSide(RadixCache(pool, alloc, conf, clock=counter_clock()), alloc, pool, "rb")]
    for loaded in (RUST, PYTHON):
        a, p = parts()
        try:
            cache = ServedSGLangCache(
                p, a, CacheConfig(page, policy=policy, policy_config=cfg, kv_events=fmt), loaded
            )
        except SGLangLoadError as e:  # the Python core's page hash could not be compiled
            pytest.skip(str(e))
        sides.append(EventSide(cache, a, p, f"sglang-{loaded.core}"))
    return sides


class EventSide(served.Side):
    """A side whose admitted requests carry a session (``SESSIONS``, by their row)."""

    def op_admit(self, op: Any) -> tuple:
        r = self.apply_admit(op)
        if r[0] == "admit":
            req = self.reqs[-1]
            req.session_id = SESSIONS[req.req_pool_idx % len(SESSIONS)]
        return r

    apply_admit = served.Side.op_admit


def run_lockstep(case: tuple[str, int, str], ops: list[bytes]) -> int:
    """Replay ``ops``; after each, drain all sides and compare block sequences. Returns the
    number of blocks compared."""
    policy, page, fmt = case
    ours, *refs = _sides(policy, page, FORMATS[fmt])
    pats = base.page_patterns(page)
    compared = 0
    history: list[str] = []

    def check(i: int, what: str) -> int:
        events = ours.cache.take_actions()
        mine, wire = _blocks(events), [event_to_wire(e) for e in events]
        TOTALS["events rb"] += len(events)
        TOTALS["session pages"] += sum(b[0] == "stored" and b[6] is not None for b in mine)
        TOTALS["lora pages"] += sum(b[0] == "stored" and b[7] is not None for b in mine)
        for ref in refs:
            theirs_events = ref.cache.take_actions()
            TOTALS[f"events {ref.name}"] += len(theirs_events)
            if ref.name == "sglang-python":  # the recorder radixbench's queue follows
                mine_, theirs = wire, [event_to_wire(e) for e in theirs_events]
            else:
                mine_, theirs = mine, _blocks(theirs_events)
            if mine_ != theirs:
                text = "\n".join(history[-20:])
                raise AssertionError(
                    f"{case}: op {i} ({what}): events differ on {ref.name}\n"
                    f"  radixbench: {mine_}\n  {ref.name}: {theirs}\nlast ops:\n{text}"
                )
        return len(mine)

    compared += check(-1, "construction")
    for i, b in enumerate(ops):
        op = base.decode(b, page, pats)
        results = [side.apply(op) for side in (ours, *refs)]
        assert all(r == results[0] for r in results), f"{case}: op {i} results {results}"
        history.append(f"  {i}: {op.describe()} -> {results[0]}")
        compared += check(i, op.describe())
    for side in (ours, *refs):
        side.drain()
    compared += check(len(ops), "drain")
    for side in (ours, *refs):
        side.cache.reset()
    compared += check(len(ops) + 1, "reset")
    return compared


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-p{c[1]}-{c[2]}")
@settings(max_examples=EXAMPLES, **base.SETTINGS)
@given(ops=base.STREAM)
def test_kv_events_match_sglang(case: tuple[str, int, str], ops: list[bytes]) -> None:
    assume(len(set(ops)) > 1)
    t0 = time.process_time()
    with torch.inference_mode():
        blocks = run_lockstep(case, ops)
    TOTALS["ops"] += len(ops)
    TOTALS["blocks"] += blocks
    TOTALS["cpu_ms"] += int((time.process_time() - t0) * 1000)
    TOTALS["cases"] += 1


def test_zz_kv_events_total() -> None:
    """After the cases: every case ran, and the streams compared many blocks (0 differences:
    any difference failed its case)."""
    if TOTALS["cases"] < len(CASES):
        pytest.skip("some KV-event cases were deselected or failed")
    assert TOTALS["ops"] >= len(CASES) * base.OPS_PER_STREAM
    assert TOTALS["blocks"] >= 25_000, TOTALS
    assert TOTALS["events rb"] == TOTALS["events sglang-python"] < TOTALS["blocks"]
    assert TOTALS["session pages"] >= 1000 and TOTALS["lora pages"] >= 1000, TOTALS
    print(
        f"\nKV events: {TOTALS['ops']} ops, {TOTALS['blocks']} blocks compared on radixbench, "
        f"sglang Rust and Python cores, 0 differences; events (grouped): radixbench "
        f"{TOTALS['events rb']}, sglang Python core {TOTALS['events sglang-python']}, Rust core "
        f"{TOTALS['events sglang-rust']}; stored pages naming a session {TOTALS['session pages']}, "
        f"an adapter {TOTALS['lora pages']} ({TOTALS['cpu_ms'] / 1000:.1f} s CPU)"
    )
