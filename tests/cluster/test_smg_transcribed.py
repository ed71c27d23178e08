"""SMG's own unit tests, transcribed as data, run against radixbench's router.

``data/smg_token_tree.toml``: the tests of ``crates/kv_index/src/token_tree.rs`` with concrete
expectations, at lightseekorg/smg @73da68c and smg-project/smg @f8daa88, against
:class:`~radixbench.cluster.routers.approx_tree.ApproxTree` (counting and trim of the case's
revision). ``data/smg_cache_aware.toml``: the tests of ``model_gateway/src/policies/
cache_aware.rs`` that route token requests, against the ``cache-aware`` router. Each case names
the SMG ``path:lines@commit`` it comes from; tests not transcribed are listed with the reason in
each file's ``[not_transcribed]`` table. Threaded SMG tests run their operations in one order
(SMG asserts the result for every interleaving, so for this one too).
"""

from __future__ import annotations

import tomllib
from array import array
from pathlib import Path
from typing import Any

import pytest

from radixbench.cache.kv_events import BlockStored
from radixbench.cluster.routers import make_router, router_options
from radixbench.cluster.routers.approx_tree import ApproxTree
from radixbench.cluster.routers.base import RouteRequest
from radixbench.cluster.routers.page_hash import engine_block_ids, prefix_keys

DATA = Path(__file__).parent / "data"
TREE = tomllib.loads((DATA / "smg_token_tree.toml").read_text(encoding="utf-8"))
POLICY = tomllib.loads((DATA / "smg_cache_aware.toml").read_text(encoding="utf-8"))
PAGE = 16


def _num(x: Any, env: dict[str, int]) -> int:
    return int(eval(x, {"__builtins__": {}}, env)) if isinstance(x, str) else int(x)


def tokens_of(spec: list[Any], env: dict[str, int], page: int = PAGE) -> array:
    """``[[base, pages], tok, ...]``: ``make_tokens(base, pages)`` runs and raw tokens."""
    out = array("q")
    for part in spec:
        if isinstance(part, list):
            base, pages = _num(part[0], env), _num(part[1], env)
            out.extend(range(base, base + pages * page))
        else:
            out.append(_num(part, env))
    return out


def _keys(tokens: array) -> array:
    keys = array("Q")
    keys.frombytes(prefix_keys(tokens, PAGE).tobytes())
    return keys


class TreeRun:
    """One case's tree, tenants by name, saved values and the last match."""

    def __init__(self, revision: str) -> None:
        self.revision = revision
        self.tree = ApproxTree(PAGE, count_once=revision != "73da68c")
        self.ids: dict[str, int] = {}
        self.saved: dict[str, int] = {}
        self.last: Any = None

    def tenant(self, name: str, env: dict[str, int]) -> int:
        return self.ids.setdefault(name.format(**env), len(self.ids))

    def name(self, tid: int | None) -> str | None:
        return next((n for n, i in self.ids.items() if i == tid), None)

    def check_match(self, m: Any, n_in: int, op: dict[str, Any], env: dict[str, int]) -> None:
        where = f"{op}"
        if "matched" in op:
            assert m.tokens == _num(op["matched"], env), where
        if "matched_ge" in op:
            assert m.tokens >= _num(op["matched_ge"], env), where
        if "matched_le" in op:
            assert m.tokens <= _num(op["matched_le"], env), where
        if "input" in op:
            assert n_in == _num(op["input"], env), where
        if "tenant" in op:
            assert self.name(m.tenant) == op["tenant"].format(**env), where
        if "tenant_in" in op:
            assert self.name(m.tenant) in [t.format(**env) for t in op["tenant_in"]], where
        if "tenants" in op:
            assert {self.name(t) for t in m.tenants} == set(op["tenants"]), where
        if "tenants_len" in op:
            assert len(m.tenants) == op["tenants_len"], where
        if op.get("same_tenant_as_last"):
            assert self.last is not None and m.tenant == self.last.tenant, where
        self.last = m

    def count(self, op: dict[str, Any], env: dict[str, int]) -> None:
        n = self.tree.tokens.get(self.ids.get(op["tenant"].format(**env), -1), 0)
        for cmp, fn in (
            ("eq", int.__eq__), ("ge", int.__ge__), ("gt", int.__gt__),
            ("le", int.__le__), ("lt", int.__lt__),
        ):  # fmt: skip
            if cmp in op:
                ref = op[cmp]
                want = self.saved[ref] if isinstance(ref, str) and ref in self.saved else ref
                assert fn(n, _num(want, {**env, **self.saved})), f"{op}: count {n}"
        if "save" in op:
            self.saved[op["save"]] = n

    def run(self, ops: list[dict[str, Any]], env: dict[str, int]) -> None:
        for op in ops:
            kind = op["op"]
            if kind == "loop":
                self.loop(op, env)
            elif kind == "insert":
                toks = tokens_of(op["tokens"], env)
                self.tree.insert(_keys(toks), self.tenant(op["tenant"], env))
            elif kind in ("match", "fused"):
                toks = tokens_of(op["tokens"], env)
                if kind == "match":
                    m = self.tree.match(_keys(toks))
                else:
                    who = op["insert_for"]
                    t = None if who == "none" else self.tenant(who, env)
                    m = self.tree.match_and_insert(_keys(toks), lambda _m, t=t: t)
                self.check_match(m, len(toks), op, env)
            elif kind == "evict":
                mx = _num(op["max"], {**env, **self.saved})
                self.tree.evict_tenant(self.tenant(op["tenant"], env), mx)
            elif kind == "evict_by_size":
                mx = _num(op["max"], {**env, **self.saved})
                if self.revision == "73da68c":
                    self.tree.evict_tenants_by_size(mx)
                else:
                    self.tree.evict_tree_by_size(mx)
            elif kind == "count":
                self.count(op, env)
            elif kind == "total":
                assert self.tree.total == sum(self.tree.tokens.values())
                scope = {**env, **self.saved}
                if "eq" in op:
                    assert self.tree.total == _num(op["eq"], scope), op
                if "le" in op:
                    assert self.tree.total <= _num(op["le"], scope), op
                if "save" in op:
                    self.saved[op["save"]] = self.tree.total
            elif kind == "counts_nonzero":
                assert any(self.tree.tokens.values()) == op["value"], op
            elif kind == "root_children":
                assert bool(self.tree.root.children) == op["value"], op
            elif kind == "equiv":
                self.equiv(op, env)
            else:
                raise AssertionError(f"unknown op {kind}")

    def loop(self, op: dict[str, Any], env: dict[str, int]) -> None:
        (var, (lo, hi)), *rest = op["for"].items()
        for v in range(_num(lo, env), _num(hi, env)):
            inner = {**env, var: v}
            if rest:
                self.loop({"for": dict(rest), "body": op["body"]}, inner)
            else:
                self.run(op["body"], inner)

    def equiv(self, op: dict[str, Any], env: dict[str, int]) -> None:
        """``assert_fused_matches_pair``: match_and_insert on one tree and match + insert on
        another give the same matches and counts."""
        fused, pair = ApproxTree(PAGE, self.tree.count_once), ApproxTree(PAGE, self.tree.count_once)
        for spec, tenant in op["steps"]:
            k, t = _keys(tokens_of(spec, env)), self.tenant(tenant, env)
            a = fused.match_and_insert(k, lambda _m, t=t: t)
            b = pair.match(k)
            pair.insert(k, t)
            assert (a.tokens, a.tenant) == (b.tokens, b.tenant)
            assert fused.tokens == pair.tokens


@pytest.mark.parametrize("case", TREE["case"], ids=[c["name"] for c in TREE["case"]])
def test_token_tree(case: dict[str, Any]) -> None:
    assert case["source"].startswith("crates/kv_index/src/token_tree.rs:")
    TreeRun(case["revision"]).run(case["ops"], {})


# ---------------------------------------------------------------- cache_aware.rs


class View:
    """Loads of the SMG test's workers (``increment_load``), their load reports and health."""

    def __init__(self, n: int) -> None:
        self.n, self.t = n, 0.0
        self.outstanding, self.processed = [0] * n, [0] * n
        self.outstanding_tokens = [0] * n
        self.usage, self.queues, self.backlog = [0.0] * n, [0] * n, [0] * n
        self.eligible = list(range(n))

    @property
    def now(self) -> float:
        return self.t

    def waiting(self, i: int) -> int:
        return self.queues[i]

    def waiting_tokens(self, i: int) -> int:
        return self.backlog[i]

    def running(self, i: int) -> int:
        return 0

    def kv_usage(self, i: int) -> float:
        return self.usage[i]

    def kv_used_tokens(self, i: int) -> int:
        return 0


def _route(router: Any, view: View, op: dict[str, Any], saved: dict[str, int]) -> None:
    toks = tokens_of(op["tokens"], {})
    picks = []
    for _ in range(op.get("repeat", 1)):
        got = router.route(RouteRequest(0, toks, len(toks), 1, 0.0), view)
        picks.append(got)
        if op.get("count", True) and got >= 0:
            view.processed[got] += 1
    got = picks[-1]
    if "expect" in op:
        assert set(picks) == {op["expect"]}, (op, picks)
    if "expect_in" in op:
        assert got in op["expect_in"], op
    if "seen" in op:
        assert set(picks) == set(op["seen"]), (op, sorted(set(picks)))
    if "majority" in op:
        mine = picks.count(op["majority"])
        assert len(picks) > mine > len(picks) / 2, (op, mine)
    if "branch" in op:
        assert router.stats[op["branch"]] >= 1, (op, router.stats)
    if "not_branch" in op:
        assert router.stats[op["not_branch"]] == 0, (op, router.stats)
    if "save" in op:
        saved[op["save"]] = got
    if "same_as" in op:
        assert got == saved[op["same_as"]], op


def _keys_at(tokens: array, page: int) -> array:
    keys = array("Q")
    keys.frombytes(prefix_keys(tokens, page).tobytes())
    return keys


@pytest.mark.parametrize("case", POLICY["case"], ids=[c["name"] for c in POLICY["case"]])
def test_cache_aware(case: dict[str, Any]) -> None:
    assert case["source"].startswith("model_gateway/src/policies/cache_aware.rs:")
    opts = {**POLICY["defaults"][case["config"]], **case.get("options", {})}
    opts["revision"] = case["revision"]
    n = case["workers"]
    router = make_router(
        "cache-aware", n, router_options("cache-aware", opts), 0, case.get("engine_page", 16)
    )
    view, saved = View(n), {}
    for op in case["ops"]:
        kind = op["op"]
        if kind == "route":
            _route(router, view, op, saved)
        elif kind == "load":
            view.outstanding = list(op["loads"])
        elif kind == "usage":
            view.usage = list(op["usage"])
        elif kind == "queues":
            view.queues = list(op["queues"])
        elif kind == "waiting_tokens":
            view.backlog = list(op["tokens"])
        elif kind == "time":
            view.t = float(op["t"])
        elif kind == "events":  # blocks stored in order, chained from the root
            page = len(op["blocks"][0])
            toks = array("q", [t for block in op["blocks"] for t in block])
            ids = engine_block_ids(toks, page)
            router.on_events(op["worker"], [BlockStored(ids, None, list(toks), page)])
        elif kind == "seed":  # seed_token_tenants: insert for each tenant
            keys = _keys_at(tokens_of(op["tokens"], {}), router.opt.page)
            for t in op["tenants"]:
                router.tree.insert(keys, t)
        elif kind == "match":
            keys = _keys_at(tokens_of(op["tokens"], {}), router.opt.page)
            assert op["tenant_in_holders"] in router.tree.match(keys).tenants, op
        elif kind == "place":  # record_placement at the given boundaries, now
            pl = router.placements
            pl.record(pl.heads(tokens_of(op["tokens"], {}), op["boundaries"]), op["worker"], view.t)
        elif kind == "placements":
            keys = router.placements.keys
            if "count" in op:
                assert len(keys) == op["count"], op
            if "holder" in op:
                assert all([h[0] for h in v] == [saved[op["holder"]]] for v in keys.values())
            if "holders_at" in op:
                b, want = op["holders_at"]
                held = [sorted(h[0] for h in v) for (bb, _), v in keys.items() if bb == b]
                assert held == [sorted(want)], (op, held)
        else:
            raise AssertionError(f"unknown op {kind}")


def test_every_untranscribed_test_has_a_reason() -> None:
    for doc in (TREE, POLICY):
        for name, why in doc["not_transcribed"].items():
            assert isinstance(why, str) and len(why) > 20, name
        done = {c["name"].split("@")[0] for c in doc["case"]}
        assert not done & set(doc["not_transcribed"])
