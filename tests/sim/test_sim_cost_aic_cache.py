"""The on-disk cache of AIC cost models (sim/cost_aic_cache.py): a hit builds nothing, a miss,
a corrupt entry, another aiconfigurator-core or other memo code rebuild, and the numbers are
the same either way."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from radixbench.sim import cost_aic, cost_aic_cache, cost_aic_spec
from radixbench.sim.cost import load_cost_model
from radixbench.sim.cost_aic import AicCostModel

pytestmark = pytest.mark.skipif(cost_aic.aic_version() is None, reason="aiconfigurator-core absent")

PRESET = "llama-3.1-8b-h100"
#: Prefill batches and decode steps asked of the model: (extend lens, prefix lens), (B, C).
PREFILLS = (([37], [0]), ([512, 51], [461, 461]), ([3000] * 3, [9000] * 3))
DECODES = ((1, 100), (7, 7 * 4097), (64, 64 * 1000))


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """A cache folder of the test's own, a fresh process's engines, and counts of the calls
    into aiconfigurator-core that the cache saves: resolving, compiling, building the engine."""
    from aiconfigurator_core.sdk import engine as sdk

    monkeypatch.setenv(cost_aic_cache.ENV, str(tmp_path))
    monkeypatch.setattr(cost_aic_cache, "_KEPT", [])
    monkeypatch.setattr(cost_aic, "_ENGINES", {})
    n: Counter[str] = Counter()

    def counted(key: str, fn):
        def call(*a, **k):
            n[key] += 1
            return fn(*a, **k)

        return call

    monkeypatch.setattr(sdk, "compile_engine", counted("compile", sdk.compile_engine))
    monkeypatch.setattr(cost_aic, "_handle", counted("handle", cost_aic._handle))
    monkeypatch.setattr(
        cost_aic_spec, "resolve_version", counted("resolve", cost_aic_spec.resolve_version)
    )
    return n


def steps(model: AicCostModel) -> list[float]:
    return [model.prefill_time(n, c) for n, c in PREFILLS] + [
        model.decode_time(b, ctx) for b, ctx in DECODES
    ]


def new_process() -> None:
    """What a process leaves (its memo, merged at exit) and what the next one starts with."""
    cost_aic_cache.save_memos()
    cost_aic_cache._KEPT.clear()
    cost_aic._ENGINES.clear()


def build() -> AicCostModel:
    model = load_cost_model(PRESET)
    assert isinstance(model, AicCostModel)
    return model


def test_a_second_process_builds_nothing_and_gets_the_same_numbers(calls, tmp_path) -> None:
    first = build()
    want = steps(first)
    assert calls == {"resolve": 1, "compile": 1, "handle": 1}
    new_process()
    assert sorted(p.name.partition("-")[0] for p in (tmp_path / "aic").iterdir()) == [
        "engine", "memo", "resolve"
    ]  # fmt: skip
    again = build()
    assert again == first  # same version, data versions, deployment
    assert steps(again) == want  # bit for bit, from the stored memo
    assert calls == {"resolve": 1, "compile": 1, "handle": 1}  # nothing rebuilt
    # a shape no process asked builds the engine from the stored spec, not a compile
    again.decode_time(3, 3 * 777)
    assert calls == {"resolve": 1, "compile": 1, "handle": 2}


def test_corrupt_entries_are_rebuilt_and_rewritten(calls, tmp_path) -> None:
    want = steps(build())
    new_process()
    files = sorted((tmp_path / "aic").iterdir())
    files[0].write_text("{not json")  # engine: unparsable
    doc = json.loads(files[1].read_text())  # memo: a value that is not what was stored
    doc["value"]["decode"][0][1] *= 2
    files[1].write_text(json.dumps(doc))
    files[2].write_bytes(files[2].read_bytes()[:40])  # resolve: truncated
    assert steps(build()) == want
    assert calls == {"resolve": 2, "compile": 2, "handle": 2}
    new_process()
    assert steps(build()) == want
    assert calls == {"resolve": 2, "compile": 2, "handle": 2}  # rewritten whole


def test_a_spec_the_library_rejects_is_compiled_again(calls) -> None:
    model = build()
    request = {"model": model.model, "system": model.system, "framework": model.framework,
               "version": model.version, "tp": model.tp}  # fmt: skip
    cost_aic_cache.store("engine", request, cost_aic_cache.encode(b"not an engine spec"))
    cost_aic._ENGINES.clear()
    assert build().decode_time(5, 5000) == model.decode_time(5, 5000)
    assert calls["compile"] == 2
    assert cost_aic_cache.decode(cost_aic_cache.load("engine", request)) != b"not an engine spec"


def test_another_aiconfigurator_core_or_memo_code_is_another_entry(calls, monkeypatch) -> None:
    want = steps(build())
    new_process()
    monkeypatch.setattr(cost_aic, "aic_version", lambda: "0.12.1")  # an upgrade
    assert steps(build()) == want
    assert calls == {"resolve": 2, "compile": 2, "handle": 2}
    new_process()
    real = cost_aic._Engine.decode_ms
    monkeypatch.setattr(cost_aic._Engine, "decode_ms", lambda self, b, s: real(self, b, s) * 2)
    model = build()  # the same spec, but the memo of other code is not read
    assert [model.decode_time(b, c) for b, c in DECODES] != want[len(PREFILLS) :]
    assert calls["compile"] == 2


def test_off_writes_nothing_and_unwritable_folders_cost_only_the_rebuild(
    calls, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(cost_aic_cache.ENV, "off")
    want = steps(build())
    new_process()
    assert not (tmp_path / "aic").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(cost_aic_cache.ENV, str(blocker))  # a folder that cannot be made
    assert steps(build()) == want
    new_process()
    assert calls["compile"] == 2


def test_cache_dir_follows_the_variable_then_xdg_then_home(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(cost_aic_cache.ENV, str(tmp_path / "mine"))
    assert cost_aic_cache.cache_dir() == tmp_path / "mine" / "aic"
    monkeypatch.delenv(cost_aic_cache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cost_aic_cache.cache_dir() == tmp_path / "xdg" / "radixbench" / "aic"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cost_aic_cache.cache_dir() == tmp_path / ".cache" / "radixbench" / "aic"
