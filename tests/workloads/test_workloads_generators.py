"""Tests for the synthetic workload generators: structure, defaults, determinism, ceilings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from radixbench.workloads.ceiling import hit_ceiling, prefix_hits
from radixbench.workloads.generators import (
    GENERATORS,
    FewShot,
    GeneratedSharedPrefix,
    LongContext,
    MultiTurn,
    PrefixRepetition,
    TreeOfThought,
    generate,
)
from radixbench.workloads.tokens import block_tokens


def gen(name: str, params, seed: int = 0):
    return generate(name, params, np.random.default_rng(seed))


def test_gsp_defaults_follow_sglang() -> None:
    p = GeneratedSharedPrefix()
    assert (p.groups, p.prompts_per_group, p.system_prompt_tokens) == (64, 16, 2048)
    assert (p.question_tokens, p.output_tokens) == (128, 256)
    r = gen("generated-shared-prefix", GeneratedSharedPrefix(groups=3, prompts_per_group=4))
    assert len(r) == 12 and {x.input_length for x in r} == {2176}
    assert {x.output_length for x in r} == {256}
    heads = {x.hash_ids[:128] for x in r}  # 2048 / 16 blocks of system prompt
    assert len(heads) == 3
    # ceiling: the 3 first prompts of each group miss, the other 9 hit the system prompt
    assert sum(prefix_hits(r)) == 9 * 2048


def test_prefix_repetition_defaults_follow_vllm() -> None:
    p = PrefixRepetition()
    assert (p.prefix_tokens, p.suffix_tokens, p.num_prefixes, p.output_tokens) == (
        256,
        256,
        10,
        128,
    )
    r = gen("prefix-repetition", PrefixRepetition(requests=50))
    assert len(r) == 50 and {x.input_length for x in r} == {512}
    assert sum(prefix_hits(r)) == (50 - 10) * 256
    assert len({x.hash_ids for x in r}) == 50


def test_multi_turn_context_grows_and_keeps_turn_order() -> None:
    r = gen("multi-turn", MultiTurn(sessions=3, turns=4))
    assert len(r) == 12
    by_session: dict[tuple, list] = {}
    for x in r:
        by_session.setdefault(x.hash_ids[:32], []).append(x)  # 512-token system prompt
    assert len(by_session) == 3
    for turns in by_session.values():
        lens = [t.input_length for t in turns]
        assert lens == sorted(lens) and len(set(lens)) == 4
        for a, b in itertools.pairwise(turns):
            ta, tb = (
                block_tokens(a.hash_ids, a.input_length),
                block_tokens(b.hash_ids, b.input_length),
            )
            assert tb[: len(ta)] == ta  # each turn's prompt extends the previous one


def test_few_shot_tree_and_long_context_shapes() -> None:
    fs = gen("few-shot", FewShot(requests=40, tasks=2, pool=5, shots=3))
    assert len(fs) == 40 and {x.input_length for x in fs} == {256 + 3 * 128 + 64}
    tree = gen("tree-of-thought", TreeOfThought(problems=2, branching=2, depth=3))
    assert len(tree) == 2 * (2 + 4 + 8)
    assert sorted({x.input_length for x in tree}) == [512, 640, 768]
    lc = gen(
        "long-context",
        LongContext(
            documents=3, questions=2, min_document_tokens=1000, max_document_tokens=1_000_000
        ),
    )
    assert len(lc) == 6 and all(1000 <= x.input_length - 64 <= 1_000_192 for x in lc)
    assert hit_ceiling(lc)["all"] > 0.3


def test_long_context_reaches_a_million_tokens() -> None:
    lc = gen("long-context", LongContext(documents=1, questions=2, min_document_tokens=1_000_000))
    assert max(x.input_length for x in lc) >= 1_000_000


@pytest.mark.parametrize("name", list(GENERATORS))
def test_generators_are_deterministic_and_seeded(name: str) -> None:
    cls = GENERATORS[name][0]
    small = {
        "generated-shared-prefix": {"groups": 4, "prompts_per_group": 3},
        "prefix-repetition": {"requests": 30},
        "multi-turn": {"sessions": 4, "turns": 3},
        "few-shot": {"requests": 30},
        "tree-of-thought": {"problems": 3, "depth": 2},
        "long-context": {"documents": 3, "min_document_tokens": 1000, "max_document_tokens": 50000},
        "multi-tenant": {"tenants": 4, "context_tokens": 64, "query_tokens": 16, "requests": 30},
    }[name]
    a, b, c = gen(name, cls(**small), 1), gen(name, cls(**small), 1), gen(name, cls(**small), 2)
    assert a == b
    assert a != c
    assert [x.rid for x in a] == list(range(len(a)))
    assert all(x.arrival_s == 0.0 for x in a)


@pytest.mark.parametrize(
    ("cls", "kwargs", "needle"),
    [
        (GeneratedSharedPrefix, {"groups": 0}, "groups"),
        (PrefixRepetition, {"suffix_tokens": -3}, "suffix_tokens"),
        (MultiTurn, {"jitter": 1.0}, "jitter"),
        (FewShot, {"shots": 9, "pool": 4}, "shots"),
        (TreeOfThought, {"branching": 0}, "branching"),
        (LongContext, {"min_document_tokens": 10, "max_document_tokens": 5}, "min_document"),
    ],
)
def test_invalid_generator_parameters(cls, kwargs, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        cls(**kwargs)


def test_unknown_generator() -> None:
    with pytest.raises(ValueError, match="unknown generator"):
        generate("nope", None, np.random.default_rng(0))


def test_multi_turn_turns_name_their_session() -> None:
    """Each turn carries its conversation's ``session_id`` (sglang's ``Req.session_id``, which
    its KV events carry): one per session, the same on all of its turns."""
    r = gen("multi-turn", MultiTurn(sessions=3, turns=4))
    by_prompt: dict[tuple, set] = {}
    for x in r:
        by_prompt.setdefault(x.hash_ids[:32], set()).add(x.session_id)
    assert sorted(s for ids in by_prompt.values() for s in ids) == [
        "session-0",
        "session-1",
        "session-2",
    ]
    assert all(len(ids) == 1 for ids in by_prompt.values())
