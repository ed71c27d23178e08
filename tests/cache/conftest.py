"""Fixtures for the radixbench.cache tests.

A cache under test is built by a factory fixture whose name says which algorithm axis the test
varies, so that a test runs once per evictor only where what it checks depends on the evictor,
and once per matcher only where it depends on the matcher (one test instance per entry):

    make_cache_per_evictor  every evictor, matcher ``FIXED_MATCHER``
    make_cache_per_matcher  every matcher, evictor ``FIXED_EVICTOR``
    make_cache              every evictor x matcher pair
    make_default_cache      ``FIXED_EVICTOR`` + ``FIXED_MATCHER`` only
    make_impl_per_evictor, make_impl_per_matcher, make_impl, make_default_impl
                            the same, plus sglang 0.5.23's own ``RadixCache``

What a test varies is decided from what it checks. The evictor: evict's victims, their order
and what they free, and the evictor's own bookkeeping of the evictable leaves (``on_change``
on lock / unlock / touch / split, ``reset``), which ``check_integrity`` compares with the tree
(``Evictor.members``). The matcher: a prefix length — match results, insert's cached prefix,
where a node splits, page rounding, namespaces. Both: a test whose subject is every kind of
operation together. Neither (``make_default_*``): request bookkeeping (checkpoint / release),
node fields, clock readings, value copies, validation, ``check_integrity``'s own detection.
Every evictor and every matcher still runs every kind of operation on random streams compared
after each operation: test_cache_differential.py and test_cache_model.py run every pair (tree
operations, against a reference pair and an oracle), test_sglang_fidelity.py and
test_sglang_served_fidelity.py every evictor and every matcher against SGLang, request flows
(checkpoint, release) included.

The ``make_impl*`` factories add sglang 0.5.23's own ``RadixCache``
(``legacy.SGLangCache``; that case is skipped when sglang is not installed), so a test
written against them checks that radixbench and SGLang behave alike. ``impl_name*`` is the
instance's implementation: ``"evictor+matcher"`` or ``"sglang"``. ``put`` inserts a token list
with freshly allocated KV slots and frees the duplicate-prefix slots exactly as a caller of
``RadixCache.insert`` must (``p = cache.insert(key, v); alloc.free(v[:p])``), then checks the
cache's invariants (``check_any``: ``check_integrity`` for radixbench, a recount of the sizes
and of the held / free KV slots for SGLang).

Requests: ``Req`` is a minimal ``CacheReq`` (the fields sglang 0.5.23's ``checkpoint`` /
``release_kv_cache`` use); ``admit`` schedules one as 0.5.23's scheduler does and ``extend``
writes KV for more of its tokens (prefill chunks, decode steps).
"""

from __future__ import annotations

import importlib.util
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from radixbench.cache import (
    EVICTORS,
    MATCHERS,
    CacheConfig,
    RadixCache,
    RadixKey,
    ReqToTokenPool,
    TokenToKVPoolAllocator,
    TreeNode,
    check_integrity,
    make_allocator,
)

EVICTOR_NAMES = sorted(EVICTORS)
MATCHER_NAMES = sorted(MATCHERS)
#: The axis a test does not vary is fixed at sglang 0.5.23's own algorithm (``CacheConfig``'s
#: defaults): ``RadixCache.evict``'s heapify and ``RadixKey.match``'s galloping search.
FIXED_EVICTOR = "heapify"
FIXED_MATCHER = "galloping"
#: radixbench's cache as ``"evictor+matcher"``, and sglang 0.5.23's own ``RadixCache``.
SGLANG = "sglang"
IMPL_NAMES = [f"{e}+{m}" for e in EVICTOR_NAMES for m in MATCHER_NAMES] + [SGLANG]
IMPL_NAMES_PER_EVICTOR = [f"{e}+{FIXED_MATCHER}" for e in EVICTOR_NAMES] + [SGLANG]
IMPL_NAMES_PER_MATCHER = [f"{FIXED_EVICTOR}+{m}" for m in MATCHER_NAMES] + [SGLANG]
IMPL_NAMES_DEFAULT = [f"{FIXED_EVICTOR}+{FIXED_MATCHER}", SGLANG]


@pytest.fixture(params=EVICTOR_NAMES)
def evictor_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=MATCHER_NAMES)
def matcher_name(request: pytest.FixtureRequest) -> str:
    return request.param


def build_cache(
    page_size: int = 1,
    evictor: str = "heapify",
    matcher: str = "linear",
    policy: str = "lru",
    kv_size: int = 256,
    max_reqs: int = 8,
    max_context_len: int = 256,
    policy_config: tuple[tuple[str, int], ...] = (),
    paged_alloc: bool = False,
    clock: Callable[[], int] | None = None,
    split_rule: str = "legacy",
) -> tuple[RadixCache, TokenToKVPoolAllocator]:
    """A fresh ``RadixCache``; its allocator is a token allocator, or with ``paged_alloc`` the
    paged one of ``page_size`` (``make_allocator``). ``split_rule`` defaults to ``legacy``:
    these tests state the legacy ``RadixCache``'s node times and run side by side with it
    (``make_impl``); the served rule is tested against the unified cores
    (test_sglang_served_fidelity.py)."""
    alloc = make_allocator(kv_size, page_size) if paged_alloc else TokenToKVPoolAllocator(kv_size)
    pool = ReqToTokenPool(max_reqs, max_context_len)
    cfg = CacheConfig(
        page_size=page_size,
        evictor=evictor,
        matcher=matcher,
        policy=policy,
        policy_config=policy_config,
        split_rule=split_rule,
    )
    cache = RadixCache(pool, alloc, cfg, clock=clock)
    check_integrity(cache)
    return cache, alloc


_SGLANG_LOADED: list[Any] = []


def load_sglang_or_skip() -> Any:
    """sglang 0.5.23 loaded once (``legacy_load.load_sglang("sglang")``); skips the test when
    the package is not installed."""
    if not _SGLANG_LOADED:
        if importlib.util.find_spec("sglang") is None:
            pytest.skip("sglang is not installed (make install): SGLang comparison skipped")
        from radixbench.cache.sglang.legacy_load import load_sglang

        _SGLANG_LOADED.append(load_sglang("sglang"))
    return _SGLANG_LOADED[0]


@pytest.fixture
def sglang_loaded() -> Any:
    """sglang 0.5.23 as ``load_sglang("sglang")`` loads it; skips when it is not installed."""
    return load_sglang_or_skip()


def build_sglang(
    page_size: int = 1,
    policy: str = "lru",
    kv_size: int = 256,
    max_reqs: int = 8,
    max_context_len: int = 256,
    policy_config: tuple[tuple[str, int], ...] = (),
    paged_alloc: bool = False,
    clock: Callable[[], int] | None = None,
) -> tuple[Any, TokenToKVPoolAllocator]:
    """sglang 0.5.23's ``RadixCache`` behind ``SGLangCache``, with ``build_cache``'s arguments
    (default clock: a counter from 1, as radixbench's)."""
    from radixbench.cache.sglang.legacy import SGLangCache

    loaded = load_sglang_or_skip()
    alloc = make_allocator(kv_size, page_size) if paged_alloc else TokenToKVPoolAllocator(kv_size)
    pool = ReqToTokenPool(max_reqs, max_context_len)
    cfg = CacheConfig(page_size=page_size, policy=policy, policy_config=policy_config)
    return SGLangCache(pool, alloc, cfg, loaded, clock=clock), alloc


def is_sglang(cache: Any) -> bool:
    return not isinstance(cache, RadixCache)


def check_any(cache: Any) -> None:
    """``check_integrity`` for radixbench's cache. For SGLang's: the sizes, node count and
    unlocked-leaf count equal a recount of the tree, and no KV slot is held by two nodes or
    both held and free."""
    if isinstance(cache, RadixCache):
        check_integrity(cache)
        return
    nodes = leaves = evictable = protected = 0
    held: list[torch.Tensor] = []
    stack = list(cache.root.children.values())
    while stack:
        node = stack.pop()
        nodes += 1
        held.append(node.value)
        if node.lock_ref == 0:
            evictable += len(node.key)
            leaves += not node.children
        else:
            protected += len(node.key)
        stack.extend(node.children.values())
    assert cache.num_nodes == nodes
    assert cache.num_evictable_leaves == leaves
    assert (cache.evictable_size(), cache.protected_size()) == (evictable, protected)
    if held:
        slots = torch.cat(held)
        assert slots.unique().numel() == slots.numel(), "a KV slot is held by two nodes"
        assert not bool(cache.allocator.is_free[slots].any()), "a KV slot is held and free"


MakeCache = Callable[..., tuple[Any, TokenToKVPoolAllocator]]


def _cache_factory(evictor: str, matcher: str) -> MakeCache:
    """``factory(page_size=1, policy="lru", kv_size=256, ...)`` -> (cache, alloc): a
    ``build_cache`` defaulting to ``evictor`` and ``matcher``."""

    def factory(**kw: Any) -> tuple[RadixCache, TokenToKVPoolAllocator]:
        kw.setdefault("evictor", evictor)
        kw.setdefault("matcher", matcher)
        return build_cache(**kw)

    return factory


@pytest.fixture
def make_cache(evictor_name: str, matcher_name: str) -> MakeCache:
    """Factory ``make_cache(page_size=1, policy="lru", kv_size=256, ...)`` -> (cache, alloc),
    defaulting to this instance's evictor x matcher pair (every pair): for a test whose
    subject depends on both axes."""
    return _cache_factory(evictor_name, matcher_name)


@pytest.fixture
def make_cache_per_evictor(evictor_name: str) -> MakeCache:
    """``make_cache`` with this instance's evictor (every evictor) and ``FIXED_MATCHER``."""
    return _cache_factory(evictor_name, FIXED_MATCHER)


@pytest.fixture
def make_cache_per_matcher(matcher_name: str) -> MakeCache:
    """``make_cache`` with this instance's matcher (every matcher) and ``FIXED_EVICTOR``."""
    return _cache_factory(FIXED_EVICTOR, matcher_name)


@pytest.fixture
def make_default_cache() -> MakeCache:
    """``make_cache`` with ``FIXED_EVICTOR`` and ``FIXED_MATCHER`` only: for a test that
    depends on neither axis."""
    return _cache_factory(FIXED_EVICTOR, FIXED_MATCHER)


def _impl_factory(impl_name: str) -> MakeCache:
    """``factory(page_size=1, policy="lru", kv_size=256, ...)`` -> (cache, alloc): radixbench's
    cache with ``impl_name``'s ``evictor+matcher``, or sglang 0.5.23's (``build_sglang``;
    skipped when sglang is not installed)."""

    def factory(**kw: Any) -> tuple[Any, TokenToKVPoolAllocator]:
        if impl_name == SGLANG:
            return build_sglang(**kw)
        evictor, matcher = impl_name.split("+")
        return build_cache(evictor=evictor, matcher=matcher, **kw)

    return factory


@pytest.fixture(params=IMPL_NAMES)
def impl_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=IMPL_NAMES_PER_EVICTOR)
def impl_name_per_evictor(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=IMPL_NAMES_PER_MATCHER)
def impl_name_per_matcher(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=IMPL_NAMES_DEFAULT)
def impl_name_default(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_impl(impl_name: str) -> MakeCache:
    """Factory ``make_impl(page_size=1, policy="lru", kv_size=256, ...)`` -> (cache, alloc):
    radixbench's cache with this instance's evictor x matcher pair (every pair), or sglang
    0.5.23's (``build_sglang``; skipped when sglang is not installed)."""
    return _impl_factory(impl_name)


@pytest.fixture
def make_impl_per_evictor(impl_name_per_evictor: str) -> MakeCache:
    """``make_impl`` over every evictor (matcher ``FIXED_MATCHER``) and SGLang."""
    return _impl_factory(impl_name_per_evictor)


@pytest.fixture
def make_impl_per_matcher(impl_name_per_matcher: str) -> MakeCache:
    """``make_impl`` over every matcher (evictor ``FIXED_EVICTOR``) and SGLang."""
    return _impl_factory(impl_name_per_matcher)


@pytest.fixture
def make_default_impl(impl_name_default: str) -> MakeCache:
    """``make_impl`` over ``FIXED_EVICTOR`` + ``FIXED_MATCHER`` and SGLang."""
    return _impl_factory(impl_name_default)


def put_tokens(
    cache: RadixCache,
    alloc: TokenToKVPoolAllocator,
    tokens: Sequence[int],
    extra_key: str | None = None,
    priority: int = 0,
) -> tuple[int, torch.Tensor]:
    """Insert ``tokens`` with fresh KV slots; free the already-cached prefix's duplicates.

    Returns ``(prefix_len, slots)`` where ``slots`` are the fresh slots handed to ``insert``
    (``slots[:prefix_len]`` went back to the allocator, ``slots[prefix_len:]`` are the tree's).
    """
    slots = alloc.alloc(len(tokens))
    assert slots is not None, "test KV pool too small"
    p = cache.insert(RadixKey(list(tokens), extra_key), slots, priority=priority)
    alloc.free(slots[:p])
    check_any(cache)
    return p, slots


@pytest.fixture
def put() -> Callable[..., tuple[int, torch.Tensor]]:
    return put_tokens


def tree_paths(cache: RadixCache) -> dict[tuple[str | None, tuple[int, ...]], list[int]]:
    """Every root-to-node path: ``(extra_key, tokens) -> slots``, for whole-tree comparisons."""
    out: dict[tuple[str | None, tuple[int, ...]], list[int]] = {}
    stack: list[tuple[TreeNode, tuple[int, ...], list[int]]] = [(cache.root, (), [])]
    while stack:
        node, toks, slots = stack.pop()
        for child in node.children.values():
            t = toks + tuple(child.key.token_ids)
            s = slots + child.value.tolist()
            out[(child.key.extra_key, t)] = s
            stack.append((child, t, s))
    return out


@pytest.fixture
def paths() -> Callable[[RadixCache], dict]:
    return tree_paths


@pytest.fixture
def check() -> Callable[[Any], None]:
    return check_any


@pytest.fixture
def cache_builder() -> MakeCache:
    """``build_cache(page_size=1, evictor="heapify", matcher="linear", policy="lru", ...)``
    for tests that compare several evictor/matcher pairs themselves."""
    return build_cache


# ---------------------------------------------------------------- requests


@dataclass
class Req:
    """A ``CacheReq``: what sglang 0.5.23's ``checkpoint`` / ``release_kv_cache`` read and write
    of a request. ``tokens``: prompt then output tokens (``token_ids()``)."""

    tokens: array
    origin_input_len: int
    req_pool_idx: int
    extra_key: str | None = None
    priority: int = 0
    cache_protected_len: int = 0
    cache_inserted_len: int = 0
    lock: Any = None
    last_node: Any = None
    #: test bookkeeping, not ``CacheReq``: tokens whose KV is in the row so far.
    kv_len: int = 0

    def token_ids(self, up_to: int | None = None) -> array:
        return self.tokens if up_to is None else self.tokens[:up_to]


def extend_req(cache: Any, alloc: TokenToKVPoolAllocator, req: Req, upto: int) -> torch.Tensor:
    """Allocate and write KV for the request's tokens ``[req.kv_len, upto)``, as 0.5.23's
    allocation does: a paged allocator continues the partly filled last page
    (``alloc_extend``), a token allocator hands out single slots. Returns the new slots
    (int64)."""
    pool = cache.req_to_token_pool
    start = req.kv_len
    assert upto <= len(req.tokens)
    if hasattr(alloc, "alloc_extend"):
        last = pool.req_to_token[req.req_pool_idx, start - 1 : start].to(torch.int64)
        kv = alloc.alloc_extend(
            torch.tensor([start]),
            torch.tensor([upto]),
            last if start else torch.tensor([-1]),
            upto - start,
        )
    else:
        kv = alloc.alloc(upto - start)
    assert kv is not None, "test KV pool too small"
    pool.write(req.req_pool_idx, start, kv)
    req.kv_len = upto
    return kv


def admit_req(
    cache: Any,
    alloc: TokenToKVPoolAllocator,
    tokens: Sequence[int],
    n_prompt: int | None = None,
    extra_key: str | None = None,
    priority: int = 0,
    prefill: int | None = None,
) -> tuple[Req, torch.Tensor]:
    """Schedule a request as sglang 0.5.23 does: match the prompt ``tokens[:n_prompt]``
    (default: all of ``tokens``), lock the match, ``cache_protected_len`` = the prefix length,
    take a ``req_to_token`` row holding the prefix's slots, then allocate fresh KV for the
    tokens ``[prefix, prefill)`` (default: the whole prompt). Returns ``(req, fresh slots)``."""
    pool = cache.req_to_token_pool
    n_prompt = len(tokens) if n_prompt is None else n_prompt
    row = pool.alloc()
    assert row is not None
    req = Req(array("q", tokens), n_prompt, row, extra_key=extra_key, priority=priority)
    m = cache.match_prefix(RadixKey(list(tokens[:n_prompt]), extra_key))
    req.cache_protected_len = m.prefix_len
    req.last_node = m.last_node
    req.lock = cache.lock(m.last_node)
    pool.write(row, 0, m.device_indices)
    req.kv_len = m.prefix_len
    fresh = extend_req(cache, alloc, req, n_prompt if prefill is None else prefill)
    check_any(cache)
    return req, fresh


@pytest.fixture
def admit() -> Callable[..., tuple[Req, torch.Tensor]]:
    return admit_req


@pytest.fixture
def extend() -> Callable[..., torch.Tensor]:
    return extend_req


# ---------------------------------------------------------------- volume checks
#
# The hypothesis differential tests promise a volume: together their cases replay at least so
# many distinct random operations, and reach every outcome they are built to reach. The cases
# of one such test function carry ``@pytest.mark.volume(name, check)``, ``check()`` asserting
# the module's ledger totals (and returning a line for the terminal summary). Once the cases
# are selected, one check item per volume, ``<module>::volume[<name>]``, is added at the very
# end of the session, after every case whatever the order of the modules:
#
# * every case selected: after all ran, it fails unless every case passed and ``check()``
#   passes — the volume is short or an outcome is rare;
# * some cases deselected by the user (``-k``, ``--deselect``, node ids, ``--lf``, ``--sw``):
#   it skips, and the terminal summary says that the volume was not checked and how many cases
#   were selected;
# * some cases deselected otherwise (a marker on part of them): it fails — the default test
#   command (``-m "not slow"``) could otherwise pass without the volume it promises.
#
# A volume none of whose cases is selected is not checked (``-m slow`` selects the slow ones).

VOLUME = "volume"
_CASES = pytest.StashKey[dict[tuple[pytest.Module, str], dict[str, pytest.Item]]]()
_OUTCOMES = pytest.StashKey[dict[str, str]]()
_VOLUME_LINES = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_CASES] = {}
    config.stash[_OUTCOMES] = {}
    config.stash[_VOLUME_LINES] = []


def _volume_of(item: pytest.Item) -> pytest.Mark | None:
    return item.get_closest_marker(VOLUME)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """Every case of a volume a module collects, selected later or not (node ids on the command
    line, ``-k`` and ``-m`` drop cases from the session's items, not from here)."""
    report = yield
    for node in report.result or ():
        mark = _volume_of(node) if isinstance(node, pytest.Item) else None
        module = node.getparent(pytest.Module)
        if mark is not None and module is not None:
            cases = node.config.stash[_CASES].setdefault((module, mark.args[0]), {})
            cases[node.nodeid] = node
    return report


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """After deselection: one check item per volume with a selected case, at the end."""
    selected = {id(item) for item in items}
    for (module, name), by_id in config.stash[_CASES].items():
        cases = list(by_id.values())
        if any(id(case) in selected for case in cases):
            check = _volume_of(cases[0]).args[1]  # type: ignore[union-attr]
            items.append(
                VolumeCheck.from_parent(
                    module, name=f"{VOLUME}[{name}]", volume=name, cases=cases, check=check
                )
            )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Each case's outcome: passed, failed or skipped (a failed setup or teardown counts)."""
    report = yield
    if report.when == "call" or not report.passed:
        outcomes = item.config.stash[_OUTCOMES]
        if outcomes.get(report.nodeid) != "failed":
            outcomes[report.nodeid] = report.outcome
    return report


def _user_narrowed(config: pytest.Config) -> str:
    """How the user narrowed the selection below whole modules, or ``""``."""
    how = []
    if config.option.keyword:
        how.append(f"-k {config.option.keyword!r}")
    if config.option.deselect:
        how.append("--deselect")
    if any("::" in str(arg) for arg in config.args):
        how.append("node ids")
    for flag, dest in (("--lf", "lf"), ("--sw", "stepwise")):
        if config.getoption(dest, False):
            how.append(flag)
    return ", ".join(how)


class VolumeCheck(pytest.Item):
    """The volume check of the cases marked ``volume(name, check)`` in one module."""

    def __init__(
        self,
        *,
        volume: str,
        cases: list[pytest.Item],
        check: Callable[[], str],
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.volume = volume
        self.cases = cases
        self.check = check

    def runtest(self) -> None:
        config = self.config
        lines = config.stash[_VOLUME_LINES]
        chosen = {id(item) for item in self.session.items}
        selected = [c for c in self.cases if id(c) in chosen]
        n, k = len(self.cases), len(selected)
        if k < n:
            narrowed = _user_narrowed(config)
            what = f"{self.volume}: {k} of {n} cases selected"
            if not narrowed:
                raise VolumeError(
                    f"{what}, deselected by neither -k, --deselect, node ids, --lf nor --sw (a "
                    "marker on part of them?): the volume cannot be checked"
                )
            lines.append(f"{what} ({narrowed}): volume NOT checked")
            pytest.skip(f"volume not checked: {what} ({narrowed})")
        outcomes = config.stash[_OUTCOMES]
        missing = [c.nodeid for c in selected if c.nodeid not in outcomes]
        if missing:
            raise VolumeError(
                f"{self.volume}: checked before {len(missing)} of its {n} cases ran "
                f"(a plugin reordered the tests?), e.g. {missing[0]}"
            )
        bad = Counter(outcomes[c.nodeid] for c in selected if outcomes[c.nodeid] != "passed")
        if bad:
            how = ", ".join(f"{count} {outcome}" for outcome, count in sorted(bad.items()))
            lines.append(f"{self.volume}: FAILED, {how} of {n} cases")
            raise VolumeError(f"{self.volume}: {how} of its {n} cases: the volume is short")
        try:
            line = self.check()
        except AssertionError as e:
            lines.append(f"{self.volume}: FAILED, {e}")
            raise VolumeError(f"{self.volume}: {e}") from None
        lines.append(f"{self.volume}: {n} cases, {line}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, VolumeError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"volume check: {self.volume}"


class VolumeError(AssertionError):
    """A volume check failed; the message says why."""


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    lines = config.stash.get(_VOLUME_LINES, [])
    if lines:
        terminalreporter.write_sep("-", "volume checks")
        for line in lines:
            for part in line.splitlines():
                terminalreporter.write_line(part)
