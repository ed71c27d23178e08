"""Tests for scenario TOML loading and validation (every validation path gives file + key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.harness.config.overrides import parse_override
from radixbench.harness.config.scenario import ScenarioError, bundled_scenarios, load_scenario
from radixbench.sim.config import SimConfig
from radixbench.workloads.generators import GeneratedSharedPrefix

GOOD = """
description = "tiny"
seed = 3
[workload]
kind = "generated-shared-prefix"
groups = 2
[arrivals]
process = "poisson"
rate = 2.0
[cache]
kv_capacity_tokens = 5000
[scheduler]
max_running = 4
[cost]
model = "linear"
decode_base_s = 0.001
[variants]
evictors = ["heapify"]
matchers = ["linear", "galloping"]
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_good_scenario_maps_tables_onto_dataclasses(tmp_path: Path) -> None:
    sc = load_scenario(write(tmp_path, GOOD))
    assert sc.name == "s" and sc.seed == 3 and sc.kind == "generated-shared-prefix"
    assert sc.workload == GeneratedSharedPrefix(groups=2)
    assert sc.arrivals.process == "poisson" and sc.arrivals.rate == 2.0
    assert sc.sim.kv_capacity_tokens == 5000 and sc.sim.max_running == 4 and sc.sim.seed == 3
    assert sc.sim.cost.decode_base_s == 0.001
    assert sc.sim.max_prefill_tokens == SimConfig().max_prefill_tokens
    assert [v.name for v in sc.variants] == ["heapify/linear/chain", "heapify/galloping/chain"]


def test_overrides_apply_before_validation(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    sc = load_scenario(path, {"workload.groups": 5, "sim.max_running": 9, "sim.policy": "lru"})
    assert sc.workload.groups == 5 and sc.sim.max_running == 9
    assert parse_override("arrivals.rate=4.5") == ("arrivals.rate", 4.5)
    assert parse_override("workload.kind=few-shot") == ("workload.kind", "few-shot")
    assert parse_override('variants.evictors=["heapify"]') == ("variants.evictors", ["heapify"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_override("novalue")
    with pytest.raises(ScenarioError, match="seed: is not a table"):
        load_scenario(path, {"seed.x": 1})
    # a bare SimConfig field goes where the file sets it, else to [cache]
    sc = load_scenario(path, {"page_size": 16, "max_running": 5})
    assert sc.sim.page_size == 16 and sc.sim.max_running == 5
    with pytest.raises(ScenarioError, match=r"s.toml: cache.page_size: .*power of two, got 6"):
        load_scenario(path, {"page_size": 6})


def test_every_bundled_scenario_validates() -> None:
    found = bundled_scenarios()
    assert {
        "mooncake-conversation",
        "azure-code",
        "azure-conv",
        "generated-shared-prefix",
        "prefix-repetition",
        "multi-turn",
        "few-shot",
        "tree-of-thought",
        "long-context",
    } <= set(found)
    for name in found:
        sc = load_scenario(name)
        assert sc.description and "\n" not in sc.description


def edit(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


BAD = [
    # (scenario text, key path expected in the message, reason fragment)
    ("description = [", None, "invalid TOML"),
    ("colour = 1\n" + GOOD, "colour", "unknown key"),
    (edit('description = "tiny"', ""), "description", "required"),
    (edit('description = "tiny"', 'description = """a\nb"""'), "description", "one-line"),
    (edit("seed = 3", 'seed = "3"'), "seed", "must be int"),
    (edit("seed = 3", "seed = -1"), "seed", ">= 0"),
    (edit('kind = "generated-shared-prefix"', 'kind = "zipf"'), "workload.kind", "must be one of"),
    (edit('kind = "generated-shared-prefix"', ""), "workload.kind", "must be one of"),
    (
        edit("groups = 2", "groups = 2\non_bad_line = 'ignore'"),
        "workload.on_bad_line",
        "error, skip",
    ),
    (edit("groups = 2", "gruops = 2"), "workload.gruops", "unknown key"),
    (edit("groups = 2", "groups = 2.5"), "workload.groups", "must be int"),
    (edit("groups = 2", "groups = true"), "workload.groups", "must be int"),
    (edit("groups = 2", "groups = 0"), "workload.groups", ">= 1"),
    (edit("groups = 2", "shuffle = 1"), "workload.shuffle", "must be bool"),
    (edit("groups = 2", "block_size = 0"), "workload.block_size", ">= 1"),
    (edit('process = "poisson"', 'process = "weibull"'), "arrivals.process", "unknown process"),
    (edit('process = "poisson"', 'process = "trace"'), "arrivals.rate", "rate is set"),
    (edit("rate = 2.0", "rate = 0.0"), "arrivals.rate", "> 0"),
    (edit("rate = 2.0", 'rate = "fast"'), "arrivals.rate", "must be float"),
    (edit("rate = 2.0", ""), "arrivals.process", "needs a rate"),
    (edit('process = "poisson"\nrate = 2.0', ""), "arrivals.process", "no timestamps"),
    (edit("rate = 2.0", "rate = 2.0\nburst = 1"), "arrivals.burst", "unknown key"),
    (
        edit("kv_capacity_tokens = 5000", "kv_capacity_tokens = 0"),
        "cache.kv_capacity_tokens",
        "positive",
    ),
    (edit("kv_capacity_tokens = 5000", "kv_capacity = 5"), "cache.kv_capacity", "unknown key"),
    (edit("kv_capacity_tokens = 5000", "policy = 'random'"), "cache.policy", "unknown policy"),
    (edit("kv_capacity_tokens = 5000", "policy = 3"), "cache.policy", "must be str"),
    (
        edit("max_running = 4", "max_running = 4\nkv_capacity_tokens = 9"),
        "scheduler.kv_capacity_tokens",
        "also set in cache",
    ),
    (edit("max_running = 4", "seed = 4"), "scheduler.seed", "top-level seed"),
    (edit("max_running = 4", "max_running = -4"), "scheduler.max_running", "positive"),
    (edit("decode_base_s = 0.001", "decode_base_s = -1.0"), "cost.decode_base_s", ">= 0"),
    (edit("decode_base_s = 0.001", "decode_base = 1.0"), "cost.decode_base", "unknown key"),
    (
        "cost = 3\n" + edit('[cost]\nmodel = "linear"\ndecode_base_s = 0.001', ""),
        "cost",
        "must be a table",
    ),
    (edit('model = "linear"', 'model = "no-such-model"'), "cost.model", "no-such-model"),
    (edit('model = "linear"', "model = 3"), "cost.model", "model name"),
    (
        edit('model = "linear"', 'model = "llama-3.1-8b-h100"'),
        "cost.decode_base_s",
        "unknown key",
    ),
    ("cache = 1\n" + edit("[cache]\nkv_capacity_tokens = 5000", ""), "cache", "must be a table"),
    (edit("max_running = 4", "cost = 4"), "scheduler.cost", "top-level cost"),
    (edit('evictors = ["heapify"]', 'evictors = ["fifo"]'), "variants.evictors", "unknown evictor"),
    (
        edit('evictors = ["heapify"]', 'evictors = "heapify"'),
        "variants.evictors",
        "must be an array",
    ),
    (edit('evictors = ["heapify"]', "evictors = []"), "variants.evictors", "must not be empty"),
    (edit('evictors = ["heapify"]', "evictors = [1]"), "variants.evictors[0]", "must be str"),
    (
        edit('matchers = ["linear", "galloping"]', 'matchers = ["linear", "linear"]'),
        "variants.matchers",
        "'linear' is listed twice",
    ),
    (edit('evictors = ["heapify"]', 'evictor = ["heapify"]'), "variants.evictor", "unknown key"),
]


@pytest.mark.parametrize(("text", "key", "reason"), BAD)
def test_bad_scenarios_give_one_line_with_file_and_key(tmp_path: Path, text, key, reason) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: ")
    if key is not None:
        assert exc.value.key == key, msg
        assert f": {key}: " in msg
    assert reason in msg


def test_trace_workload_paths_and_kinds(tmp_path: Path) -> None:
    base = 'description = "t"\n[workload]\n'
    with pytest.raises(ScenarioError, match="workload: path is required"):
        load_scenario(write(tmp_path, base + 'kind = "trace"\n'))
    with pytest.raises(ScenarioError, match=r"workload\.trace: unknown Azure trace"):
        load_scenario(write(tmp_path, base + 'kind = "azure"\ntrace = "chat"\n'))
    sc = load_scenario(write(tmp_path, base + 'kind = "trace"\npath = "x.csv"\n'))
    assert sc.base_dir == tmp_path.resolve() and sc.workload.path == "x.csv"


def test_missing_file_unreadable_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario(tmp_path / "none.toml")
    with pytest.raises(ScenarioError, match=r"bundled: .*mooncake-conversation"):
        load_scenario("no-such-scenario")
    bad = tmp_path / "b.toml"
    bad.write_bytes(b'description = "\xff"\n')
    with pytest.raises(ScenarioError, match="UTF-8"):
        load_scenario(bad)


def test_cost_model_preset_with_field_override(tmp_path: Path) -> None:
    from radixbench.sim.cost import RooflineCostModel, load_cost_model

    text = edit(
        'model = "linear"\ndecode_base_s = 0.001', 'model = "llama-3.1-70b-a100"\ncompute_eff = 0.3'
    )
    cost = load_scenario(write(tmp_path, text)).sim.cost
    preset = load_cost_model("llama-3.1-70b-a100")
    assert isinstance(cost, RooflineCostModel)
    assert cost.name == preset.name and cost.layers == preset.layers
    assert cost.compute_eff == 0.3 != preset.compute_eff


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_trace_replaces_a_generator_workload_and_its_arrivals(tmp_path: Path) -> None:
    # compare --trace on the default (generator, Poisson) scenario: the generic trace's kind is
    # detected and replayed at its own timestamps.
    trace = _write(tmp_path / "g.csv", "arrival_s,input_length,output_length\n0,10,2\n")
    sc = load_scenario("shared-prefix-serving", {"arrivals.max_requests": 5}, trace=trace)
    assert sc.kind == "trace" and sc.workload.path == str(trace)
    assert sc.arrivals.process == "trace" and sc.arrivals.rate is None
    assert sc.arrivals.max_requests == 5


def test_trace_of_the_same_kind_keeps_the_workload_keys(tmp_path: Path) -> None:
    line = '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
    trace = _write(tmp_path / "m.jsonl", line)
    scen = _write(
        tmp_path / "s.toml",
        'description = "x"\n[workload]\nkind = "mooncake"\nblock_size = 64\n'
        'on_bad_line = "skip"\n[arrivals]\nprocess = "trace"\n',
    )
    sc = load_scenario(scen, trace=trace)
    assert sc.kind == "mooncake" and sc.workload.block_size == 64 and sc.on_bad_line == "skip"
    record = '{"arrival_s": 0, "input_length": 3, "output_length": 1}'
    generic = _write(tmp_path / "g.jsonl", record)
    sc = load_scenario(scen, trace=generic)
    # another kind: a fresh [workload] (its own block_size default), on_bad_line kept
    assert sc.kind == "trace" and sc.workload.block_size == 16 and sc.on_bad_line == "skip"


def test_error_in_an_override_names_its_origin(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"^--evictors: variants\.evictors: unknown evictor"):
        load_scenario(
            "mooncake-conversation",
            {"variants.evictors": ["nope"]},
            origins={"variants.evictors": "--evictors"},
        )
    with pytest.raises(ScenarioError, match=r"^--set page_size=3: cache\.page_size: "):
        load_scenario("mooncake-conversation", {"page_size": 3},
                      origins={"page_size": "--set page_size=3"})  # fmt: skip
    # without an origin (e.g. a grid's override) the file is named, as before
    with pytest.raises(ScenarioError, match=r"mooncake-conversation\.toml: variants\.evictors"):
        load_scenario("mooncake-conversation", {"variants.evictors": ["nope"]})


def test_cost_table_on_an_aic_preset(tmp_path: Path) -> None:
    """A preset AIC covers takes its own fields (step_overhead_s) in [cost]; a roofline field
    there is refused with the way out (model = "roofline:PRESET"), not silently ignored."""
    pytest.importorskip("aiconfigurator_core")
    from radixbench.sim.cost_aic import AicCostModel

    def cost_table(extra: str) -> str:
        return edit(
            'model = "linear"\ndecode_base_s = 0.001', f'model = "llama-3.1-8b-h100"{extra}'
        )

    cost = load_scenario(write(tmp_path, cost_table("\nstep_overhead_s = 0.002"))).sim.cost
    assert isinstance(cost, AicCostModel) and cost.step_overhead_s == 0.002
    with pytest.raises(ScenarioError, match=r'cost\.compute_eff: .*"roofline:llama-3.1-8b-h100"'):
        load_scenario(write(tmp_path, cost_table("\ncompute_eff = 0.3")))
