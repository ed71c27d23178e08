"""Lockstep driver of two tiered caches: radixbench's ``TieredRadixCache`` and sglang 0.5.23's
``UnifiedRadixCache`` with HiCache on (``ServedHiCache``), fed the same seeded op stream.

Ops: insert (a key with fresh slots; the device evicts the shortfall first), match (and, on a
host hit, load back and hold a lock), unlock, evict the device, evict the host, complete
transfers (the oldest of a random kind: device->host, host->device, storage query / read /
write) and poll events, prefetch a request's key from storage, poll a prefetch at admission.
After every op the driver compares the op's result, both caches' transfers, sizes, pools, and
(Python core) every node: its parent, length, residency on each tier, lock counts and leaf
state on each tier. A mismatch raises ``AssertionError`` naming the op number.
"""

from __future__ import annotations

import random
from array import array
from collections import deque
from typing import Any

import pytest
import torch

from radixbench.cache.hicache.storage import STORAGE_BATCH_PAGES
from radixbench.cache.key import RadixKey


class Side:
    """One cache, its allocator and its held locks."""

    def __init__(self, cache: Any, alloc: Any) -> None:
        self.c, self.alloc = cache, alloc
        self.locks: list[Any] = []
        self.host_victims: list[int] = []

    def evict(self, n: int) -> list[int]:
        return list(self.c.evict(n).victims)

    def put(self, tokens: array, page: int) -> tuple[int, list[int], list[tuple[int, int]]]:
        n = len(tokens) // page * page
        victims: list[int] = []
        if n == 0:
            return 0, victims, []
        short = n - self.alloc.available_size()
        if short > 0:
            victims = self.evict(short)
        if self.alloc.available_size() < n:
            return -1, victims, []
        v = self.alloc.alloc(n)
        p = self.c.insert(RadixKey(tokens[:n]), v)
        adopted = list(self.c.adopted)
        parts, cur = [], 0
        for a, b in sorted(adopted):
            parts.append(v[cur:a])
            cur = b
        parts.append(v[cur:p])
        dup = torch.cat(parts) if parts else v[:0]
        if dup.numel():
            self.alloc.free(dup.clone())
        return p, victims, adopted


def _node_id(cache: Any, handle: Any) -> int:
    return int(cache.node_id(handle))


class Lockstep:
    """Drives ``rb`` (radixbench) and ``sg`` (sglang) together; ``python_core``: compare nodes."""

    def __init__(self, rb: Side, sg: Side, page: int, seed: int, storage: bool) -> None:
        self.rb, self.sg, self.page = rb, sg, page
        self.rng = random.Random(seed)
        self.pending: dict[str, deque[tuple[Any, Any]]] = {
            k: deque() for k in ("d2h", "h2d", "l3_query", "l3_read", "l3_write")
        }
        self.storage = storage
        self.now = 0.0
        self.rids: list[int] = []
        self.next_rid = 0
        self.ops = 0
        self.python_core = not sg.c.rust
        if self.python_core:
            core = sg.c.core

            def wrap(name: str) -> None:
                inner = getattr(core, name)

                def call(node: Any, *a: Any, **k: Any) -> Any:
                    sg.host_victims.append(_node_id(sg.c, node.id))
                    return inner(node, *a, **k)

                setattr(core, name, call)

            wrap("_evict_host_leaf")
            wrap("_release_full_host_duplicate")
        rb.c.host_victims = rb.host_victims
        self.docs = self._docs()

    def _docs(self) -> list[array]:
        rng, scale = self.rng, max(1, self.page // 4)

        def run(lo: int, hi: int) -> array:
            return array("q", [rng.randrange(1, 50) for _ in range(rng.randrange(lo, hi) * scale)])

        roots = [run(8, 64) for _ in range(4)]
        docs = []
        for _ in range(24):
            base = roots[rng.randrange(len(roots))]
            cut = rng.randrange(0, len(base) + 1)
            tail = run(0, 96)
            docs.append(base[:cut] + tail)
        return [d for d in docs if len(d) >= 2]

    def key(self) -> array:
        doc = self.docs[self.rng.randrange(len(self.docs))]
        return doc[: self.rng.randrange(1, len(doc) + 1)]

    # ------------------------------------------------------------------ checks
    def fail(self, what: str, a: Any, b: Any) -> None:
        raise AssertionError(f"op {self.ops}: {what}: radixbench {a!r} != sglang {b!r}")

    def same(self, what: str, a: Any, b: Any) -> None:
        if a != b:
            self.fail(what, a, b)

    def transfers(self) -> None:
        a, b = self.rb.c.take_actions(), self.sg.c.take_actions()
        self.same("transfers", [_desc(x) for x in a], [_desc(x) for x in b])
        for x, y in zip(a, b):
            self.pending[x.kind].append((x, y))

    def state(self) -> None:
        rb, sg = self.rb.c, self.sg.c
        self.same("evictable size", rb.evictable_size(), sg.evictable_size())
        self.same("protected size", rb.protected_size(), sg.protected_size())
        self.same(
            "free device slots", self.rb.alloc.available_size(), self.sg.alloc.available_size()
        )
        self.same("host slots in use", rb.host_pool.used(), sg.group.used())
        if self.python_core:
            self.same("host victims", self.rb.host_victims, self.sg.host_victims)
            self.same("nodes", self.rb_nodes(), self.sg_nodes())

    def rb_nodes(self) -> dict[int, tuple[Any, ...]]:
        out = {}
        for i, n in self.rb.c.nodes_by_id.items():
            if n.parent is None:
                continue
            out[i] = (
                n.parent.id, len(n.key), n.value is not None, n.host_value is not None,
                n.lock_ref, n.host_lock_ref, n.evictable, n.host.evictable,
            )  # fmt: skip
        return out

    def sg_nodes(self) -> dict[int, tuple[Any, ...]]:
        c, core = self.sg.c, self.sg.c.core
        full = c._full
        out = {}
        for handle, n in core._node_arena.items():
            if n.parent is None:
                continue
            cd = n.component_data[full]
            out[_node_id(c, handle)] = (
                _node_id(c, n.parent.id), len(n.key), cd.value is not None,
                cd.host_value is not None, cd.lock_ref, cd.host_lock_ref,
                n in core.evictable_device_leaves, n in core.evictable_host_leaves,
            )  # fmt: skip
        return out

    # ------------------------------------------------------------------ ops
    def step(self) -> None:
        self.ops += 1
        r = self.rng.random()
        if r < 0.30:
            self.op_put()
        elif r < 0.52:
            self.op_match()
        elif r < 0.58:
            self.op_unlock()
        elif r < 0.64:
            n = self.rng.randrange(1, 64 * self.page)
            self.same("device victims", self.rb.evict(n), self.sg.evict(n))
        elif r < 0.68:
            n = self.rng.randrange(1, 64 * self.page) // self.page * self.page or self.page
            self.same("host freed", self.rb.c.evict_host(n), self.sg.c.evict_host(n))
        elif r < 0.86 or not self.storage:
            self.op_complete()
        elif r < 0.93:
            self.op_prefetch()
        else:
            self.op_admit()
        self.transfers()
        self.state()

    def op_put(self) -> None:
        k = self.key()
        a, b = self.rb.put(k, self.page), self.sg.put(k, self.page)
        self.same("insert", (a[0], a[1], a[2]), (b[0], b[1], b[2]))

    def _match(self, side: Side, k: array) -> Any:
        return side.c.match_prefix(RadixKey(k))

    def op_match(self) -> None:
        k = self.key()
        ma, mb = self._match(self.rb, k), self._match(self.sg, k)
        desc = [
            (
                m.prefix_len,
                m.host_hit_length,
                _node_id(s.c, m.last_node),
                _node_id(s.c, m.best_node),
            )
            for m, s in ((ma, self.rb), (mb, self.sg))
        ]
        self.same("match", desc[0], desc[1])
        if ma.host_hit_length > 0 and self.rng.random() < 0.7:
            ra, rb_ = self.rb.c.load_back(ma), self.sg.c.load_back(mb)
            self.same(
                "load back",
                (ra[0], _node_id(self.rb.c, ra[1])),
                (rb_[0], _node_id(self.sg.c, rb_[1])),
            )
            self.rb.c.start_loading()
            self.sg.c.start_loading()
            self.rb.locks.append(self.rb.c.lock(ra[1]))
            self.sg.locks.append(self.sg.c.lock(rb_[1]))
        elif self.rng.random() < 0.3 and ma.prefix_len:
            self.rb.locks.append(self.rb.c.lock(ma.last_node))
            self.sg.locks.append(self.sg.c.lock(mb.last_node))

    def op_unlock(self) -> None:
        if not self.rb.locks:
            return
        i = self.rng.randrange(len(self.rb.locks))
        self.rb.c.unlock(self.rb.locks.pop(i))
        self.sg.c.unlock(self.sg.locks.pop(i))

    def op_complete(self) -> None:
        kinds = [k for k, q in self.pending.items() if q]
        for _ in range(self.rng.randrange(0, 4)):
            if not kinds:
                break
            kind = self.rng.choice(kinds)
            x, y = self.pending[kind][0]
            done = [self.complete(act, side) for act, side in ((x, self.rb), (y, self.sg))]
            self.same("transfer done", done[0], done[1])
            if done[0]:
                self.pending[kind].popleft()
            kinds = [k for k, q in self.pending.items() if q]
        self.now += self.rng.choice((0.0, 0.01, 0.3))
        self.rb.c.check_events()
        self.sg.c.check_events()

    def complete(self, act: Any, side: Side) -> bool:
        """Advance ``act`` on ``side``: a read one batch at a time (its final ack a step of its
        own), anything else whole. Whether it is over."""
        ctrl = side.c.ctrl
        f = act.fields
        if act.kind in ("d2h", "h2d"):
            f["ack"].finish_event.set()
            return True
        if act.kind == "l3_query":
            op, pages, hit = f["op"], f["pages"], 0
            while hit < pages:
                n = min(STORAGE_BATCH_PAGES, pages - hit)
                got = ctrl.query_batch(op, hit, n)
                hit += got
                if got < n:
                    break
            ctrl.query_done(op, hit)
            return True
        if act.kind == "l3_read":
            op = f["op"]
            total, done = len(op.hash_value), f.setdefault("pages_read", 0)
            if done < total and not op.is_terminated():
                f["pages_read"] = done = done + min(STORAGE_BATCH_PAGES, total - done)
                ctrl.read_batch_done(op, done)
                return False
            ctrl.read_done(op)
            return True
        op = f["op"]
        for s in range(0, len(op.hash_value), STORAGE_BATCH_PAGES):
            ctrl.write_batch_done(op, s, min(STORAGE_BATCH_PAGES, len(op.hash_value) - s))
        ctrl.write_done(op)
        return True

    def op_prefetch(self) -> None:
        k = self.key()
        if len(k) < 2:
            return
        rid = self.next_rid
        self.next_rid += 1
        ma, mb = self._match(self.rb, k[:-1]), self._match(self.sg, k[:-1])
        self.rb.c.prefetch(rid, ma, k[:-1], None)
        self.sg.c.prefetch(rid, mb, k[:-1], None)
        self.rids.append(rid)

    def op_admit(self) -> None:
        if not self.rids:
            return
        recent = self.rng.random() < 0.7  # mostly a request whose prefetch is in flight
        rid = self.rids[-1] if recent else self.rids[self.rng.randrange(len(self.rids))]
        a, b = self.rb.c.prefetch_ready(rid, self.now), self.sg.c.prefetch_ready(rid, self.now)
        self.same("prefetch ready", a, b)
        if a:
            self.rids.remove(rid)
            self.same(
                "prefetched", self.rb.c.pop_prefetch_loaded(rid), self.sg.c.pop_prefetch_loaded(rid)
            )


def _desc(a: Any) -> tuple[Any, ...]:
    f = a.fields
    if a.kind in ("d2h", "h2d"):
        return (a.kind, f["tokens"])
    if a.kind == "l3_query":
        return (a.kind, f["pages"])
    return (a.kind, len(f["op"].hash_value))


def build_pair(
    write_policy: str,
    page: int,
    core: str = "python",
    storage: bool = False,
    device_tokens: int = 512,
    ratio: float = 2.0,
    evictor: str = "heapify",
    prefetch_policy: str = "best_effort",
    policy: str = "lru",
) -> tuple[Side, Side]:
    """radixbench's tiered cache (``evictor``) and sglang's served cache with HiCache, same
    settings; ``policy``: the eviction policy of both tiers (``--radix-eviction-policy``)."""
    from radixbench.cache.allocator import ReqToTokenPool
    from radixbench.cache.config import CacheConfig
    from radixbench.cache.hicache import (
        HiCacheConfig,
        StorageConfig,
        TieredRadixCache,
        host_pool_tokens,
    )
    from radixbench.cache.paged_allocator import make_allocator
    from radixbench.cache.sglang.hicache import ServedHiCache, load_hicache

    dev = torch.device("cpu")
    st = (
        StorageConfig(prefetch_policy=prefetch_policy, prefetch_threshold=4 * page)
        if storage
        else None
    )
    hc = HiCacheConfig(
        write_policy, host_pool_tokens(device_tokens, page, ratio), storage=st, bytes_per_token=64
    )
    cfg = CacheConfig(page_size=page, evictor=evictor, policy=policy, hicache=hc)
    sides = []
    for which in ("radixbench", "sglang"):
        alloc = make_allocator(device_tokens, page, dev)
        pool = ReqToTokenPool(8, 4096, dev)
        if which == "radixbench":
            cache: Any = TieredRadixCache(pool, alloc, cfg, hc, hc.bytes_per_token)
        else:
            cache = ServedHiCache(
                pool,
                alloc,
                cfg,
                load_hicache("sglang-python" if core == "python" else "sglang", core),
            )
        sides.append(Side(cache, alloc))
    return sides[0], sides[1]


@pytest.fixture
def lockstep() -> Any:
    """The driver: ``build_pair(...)`` and ``Lockstep(rb, sg, page, seed, storage)``."""
    from types import SimpleNamespace

    return SimpleNamespace(build_pair=build_pair, Lockstep=Lockstep, Side=Side)
