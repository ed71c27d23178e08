"""The standard synthetic prefix-sharing workloads, registered by name in :data:`GENERATORS`.

Each generator takes its frozen, validated parameter dataclass and a seeded
``numpy.random.Generator`` and returns requests in arrival order with ``arrival_s = 0``
(:mod:`radixbench.workloads.arrivals` assigns times) and ``rid`` = position. Prompts are built
from segments (:mod:`radixbench.workloads.segments`) of ``block_size``-token hash blocks; token
lengths of every segment but a prompt's last are rounded up to whole blocks. The simulator's
output tokens are synthetic, so a reply that reappears in a later prompt (multi-turn chat) is a
fresh segment there: it can hit only from the second time it is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from radixbench.workloads.segments import BlockIds, Segment, build_request
from radixbench.workloads.trace import TraceRequest

__all__ = [
    "GENERATORS",
    "FewShot",
    "GeneratedSharedPrefix",
    "LongContext",
    "MultiTurn",
    "PrefixRepetition",
    "TreeOfThought",
    "generate",
]


class _Params:
    """Positive-int validation of every int field (bools refused); floats checked by name."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, int) and not isinstance(v, bool) and v < 1:
                raise ValueError(f"{f.name} must be >= 1, got {v}")


def _interleave(streams: Sequence[Sequence[Any]], rng: np.random.Generator) -> list[Any]:
    """Random merge of ``streams`` that keeps each stream's own order."""
    owners = np.repeat(np.arange(len(streams)), [len(s) for s in streams])
    rng.shuffle(owners)
    pos = [0] * len(streams)
    out = []
    for o in owners.tolist():
        out.append(streams[o][pos[o]])
        pos[o] += 1
    return out


def _jitter(rng: np.random.Generator, mean: int, frac: float) -> int:
    """An int uniform in ``[mean * (1 - frac), mean * (1 + frac)]``, at least 1."""
    lo, hi = max(1, round(mean * (1 - frac))), max(1, round(mean * (1 + frac)))
    return int(rng.integers(lo, hi + 1))


def _finish(prompts: list[tuple[list[Segment], int, int]], bs: int) -> list[TraceRequest]:
    return [build_request(i, s, last, out, bs) for i, (s, last, out) in enumerate(prompts)]


@dataclass(frozen=True)
class GeneratedSharedPrefix(_Params):
    """SGLang bench_serving ``generated-shared-prefix`` (defaults as there): ``groups`` system
    prompts of ``system_prompt_tokens``, each followed by ``prompts_per_group`` distinct
    questions of ``question_tokens``; ``output_tokens`` each; order shuffled when ``shuffle``."""

    groups: int = 64
    prompts_per_group: int = 16
    system_prompt_tokens: int = 2048
    question_tokens: int = 128
    output_tokens: int = 256
    shuffle: bool = True
    block_size: int = 16


def _gsp(p: GeneratedSharedPrefix, rng: np.random.Generator) -> list[TraceRequest]:
    ids = BlockIds(p.block_size)
    prompts = []
    for _ in range(p.groups):
        system = ids.segment(p.system_prompt_tokens)
        for _ in range(p.prompts_per_group):
            q = ids.segment(p.question_tokens)
            prompts.append(([system, q], p.question_tokens, p.output_tokens))
    if p.shuffle:
        prompts = [prompts[i] for i in rng.permutation(len(prompts))]
    return _finish(prompts, p.block_size)


@dataclass(frozen=True)
class PrefixRepetition(_Params):
    """vLLM ``prefix_repetition`` dataset (defaults as there): ``num_prefixes`` prefixes of
    ``prefix_tokens``, each shared by ``requests / num_prefixes`` prompts with a distinct
    ``suffix_tokens`` suffix; ``output_tokens`` each; shuffled."""

    requests: int = 1000
    prefix_tokens: int = 256
    suffix_tokens: int = 256
    num_prefixes: int = 10
    output_tokens: int = 128
    block_size: int = 16


def _prefix_rep(p: PrefixRepetition, rng: np.random.Generator) -> list[TraceRequest]:
    ids = BlockIds(p.block_size)
    per = max(1, p.requests // p.num_prefixes)
    prompts = []
    for _ in range(p.num_prefixes):
        pre = ids.segment(p.prefix_tokens)
        prompts += [
            ([pre, ids.segment(p.suffix_tokens)], p.suffix_tokens, p.output_tokens)
            for _ in range(per)
        ]
    prompts = [prompts[i] for i in rng.permutation(len(prompts))][: p.requests]
    return _finish(prompts, p.block_size)


@dataclass(frozen=True)
class MultiTurn(_Params):
    """Chat sessions whose context grows turn by turn: turn ``k`` sends the system prompt,
    every earlier user message and reply, and a new user message (lengths jittered by
    ``jitter`` around their means); the reply is ``reply_tokens`` long. Sessions interleave
    at random, each keeping its turn order."""

    sessions: int = 32
    turns: int = 8
    system_prompt_tokens: int = 512
    user_tokens: int = 128
    reply_tokens: int = 256
    jitter: float = 0.5
    block_size: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")


def _multi_turn(p: MultiTurn, rng: np.random.Generator) -> list[TraceRequest]:
    """The turns; session ``j``'s carry ``session_id`` ``"session-j"``."""
    ids = BlockIds(p.block_size)
    sessions = []
    for j in range(p.sessions):
        ctx = [ids.segment(p.system_prompt_tokens)]
        turns = []
        for _ in range(p.turns):
            n_user = _jitter(rng, p.user_tokens, p.jitter)
            n_reply = _jitter(rng, p.reply_tokens, p.jitter)
            ctx = [*ctx, ids.segment(n_user)]
            turns.append((list(ctx), n_user, n_reply, f"session-{j}"))
            ctx.append(ids.segment(n_reply))
        sessions.append(turns)
    return [
        build_request(i, segs, last, out, p.block_size, session_id=sid)
        for i, (segs, last, out, sid) in enumerate(_interleave(sessions, rng))
    ]


@dataclass(frozen=True)
class FewShot(_Params):
    """Few-shot prompting: ``tasks`` tasks, each an instruction of ``instruction_tokens`` and a
    pool of ``pool`` examples of ``example_tokens``; a request picks a task, ``shots`` examples
    of its pool (in pool order) and a fresh question of ``question_tokens``."""

    requests: int = 1000
    tasks: int = 8
    instruction_tokens: int = 256
    pool: int = 16
    shots: int = 4
    example_tokens: int = 128
    question_tokens: int = 64
    output_tokens: int = 32
    block_size: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.shots > self.pool:
            raise ValueError(f"shots ({self.shots}) cannot exceed pool ({self.pool})")


def _few_shot(p: FewShot, rng: np.random.Generator) -> list[TraceRequest]:
    ids = BlockIds(p.block_size)
    tasks = [
        (ids.segment(p.instruction_tokens), [ids.segment(p.example_tokens) for _ in range(p.pool)])
        for _ in range(p.tasks)
    ]
    prompts = []
    for _ in range(p.requests):
        inst, pool = tasks[int(rng.integers(p.tasks))]
        shots = sorted(rng.choice(p.pool, size=p.shots, replace=False).tolist())
        segs = [inst, *(pool[i] for i in shots), ids.segment(p.question_tokens)]
        prompts.append((segs, p.question_tokens, p.output_tokens))
    return _finish(prompts, p.block_size)


@dataclass(frozen=True)
class TreeOfThought(_Params):
    """Tree-of-thought search: for each of ``problems`` problems (``problem_tokens``), every
    node above ``depth`` is expanded with ``branching`` requests that each sample one thought
    of ``thought_tokens`` (identical prompts); a child's prompt is its parent's plus that
    thought. Trees are expanded level by level and interleave at random."""

    problems: int = 16
    branching: int = 3
    depth: int = 3
    problem_tokens: int = 512
    thought_tokens: int = 128
    block_size: int = 16


def _tree(p: TreeOfThought, rng: np.random.Generator) -> list[TraceRequest]:
    ids = BlockIds(p.block_size)
    trees = []
    for _ in range(p.problems):
        level: list[tuple[list[Segment], int]] = [
            ([ids.segment(p.problem_tokens)], p.problem_tokens)
        ]
        reqs = []
        for _ in range(p.depth):
            nxt = []
            for segs, last in level:
                for _ in range(p.branching):
                    reqs.append((segs, last, p.thought_tokens))
                    nxt.append(([*segs, ids.segment(p.thought_tokens)], p.thought_tokens))
            level = nxt
        trees.append(reqs)
    return _finish(_interleave(trees, rng), p.block_size)


@dataclass(frozen=True)
class LongContext(_Params):
    """Long-document QA: ``documents`` documents with lengths log-uniform in
    ``[min_document_tokens, max_document_tokens]`` (up to 1M tokens), each asked
    ``questions`` distinct questions of ``question_tokens``; order shuffled."""

    documents: int = 4
    questions: int = 8
    min_document_tokens: int = 100_000
    max_document_tokens: int = 1_000_000
    question_tokens: int = 64
    output_tokens: int = 64
    block_size: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_document_tokens > self.max_document_tokens:
            raise ValueError("min_document_tokens exceeds max_document_tokens")


def _long(p: LongContext, rng: np.random.Generator) -> list[TraceRequest]:
    ids = BlockIds(p.block_size)
    lo, hi = np.log(p.min_document_tokens), np.log(p.max_document_tokens)
    prompts = []
    for _ in range(p.documents):
        n_doc = int(np.exp(rng.uniform(lo, hi)))
        doc = ids.segment(max(1, min(n_doc, p.max_document_tokens)))
        for _ in range(p.questions):
            prompts.append(
                ([doc, ids.segment(p.question_tokens)], p.question_tokens, p.output_tokens)
            )
    prompts = [prompts[i] for i in rng.permutation(len(prompts))]
    return _finish(prompts, p.block_size)


GENERATORS: dict[str, tuple[type, Callable[[Any, np.random.Generator], list[TraceRequest]]]] = {
    "generated-shared-prefix": (GeneratedSharedPrefix, _gsp),
    "prefix-repetition": (PrefixRepetition, _prefix_rep),
    "multi-turn": (MultiTurn, _multi_turn),
    "few-shot": (FewShot, _few_shot),
    "tree-of-thought": (TreeOfThought, _tree),
    "long-context": (LongContext, _long),
}
from radixbench.workloads.multi_tenant import MultiTenant, multi_tenant  # noqa: E402

GENERATORS["multi-tenant"] = (MultiTenant, multi_tenant)
"""Generator name -> (parameter dataclass, function(params, rng) -> requests)."""


def generate(name: str, params: Any, rng: np.random.Generator) -> list[TraceRequest]:
    """Run generator ``name`` with its ``params`` (``ValueError`` on an unknown name)."""
    if name not in GENERATORS:
        raise ValueError(f"unknown generator {name!r}; known: {', '.join(GENERATORS)}")
    cls, fn = GENERATORS[name]
    if not isinstance(params, cls):
        raise TypeError(f"{name} needs {cls.__name__} parameters")
    return fn(params, rng)
