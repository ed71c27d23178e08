"""The AIC cost model (sim/cost_aic.py, sim/cost_aic_spec.py) against aiconfigurator-core's own
calls; the fallback and the refusals without it."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from radixbench.sim import cost_aic
from radixbench.sim.cost import RooflineCostModel, cost_info, load_cost_model, preset_names
from radixbench.sim.cost_aic import GRID_BITS, AicCostModel, quantize, quantize_array

needs_aic = pytest.mark.skipif(cost_aic.aic_version() is None, reason="aiconfigurator-core absent")


@given(st.integers(0, 10**9))
def test_quantize_keeps_grid_bits_and_is_monotone(x: int) -> None:
    q = quantize(x)
    assert abs(q - x) <= x * 2.0**-GRID_BITS
    assert quantize(x + 1) >= q
    assert quantize(q) == q  # a grid point is its own key


@needs_aic
def test_h100_h200_presets_run_on_aic_a100_on_the_roofline() -> None:
    from aiconfigurator_core.sdk.perf_database import get_version_slots

    for name in preset_names():
        model = load_cost_model(name)
        if "a100" in name:
            assert isinstance(model, RooflineCostModel), name
            continue
        assert isinstance(model, AicCostModel), name
        # the sglang data nearest the reference 0.5.23 among what AIC exposes for the system
        slots = get_version_slots(model.system, "sglang")
        assert model.version == max(slots.values(), key=lambda v: tuple(map(int, v.split("."))))
        info = cost_info(model)
        assert info["kind"] == "aic" and info["system"] == model.system
        assert info["version"] == model.version and "aiconfigurator-core" in info["source"]
        roof = load_cost_model(f"roofline:{name}")
        assert model.kv_bytes_per_token == roof.kv_bytes_per_token and model.tp == roof.tp


@needs_aic
def test_steps_match_aic_own_calls_within_the_grid() -> None:
    model = load_cost_model("llama-3.1-8b-h100")
    assert isinstance(model, AicCostModel)
    h = model._engine().handle
    tol = 2 * 2.0**-GRID_BITS  # two rounded coordinates
    for k in (1, 3, 8):
        for n, c in ((37, 0), (512, 461), (3000, 9000), (16_384, 0), (700, 130_000)):
            want = h.predict_prefill_latency(k, n + c, c) * 1e-3
            assert model.prefill_time([n] * k, [c] * k) == pytest.approx(want, rel=tol)
    fn = model.decode_time_fn()
    for b in (1, 7, 64, 256):
        for s in (100, 1000, 4097, 32_000):
            want = h.decode_step_latency(b, s - 1, 0) * 1e-3
            assert fn(b, b * s) == pytest.approx(want, rel=tol)
            assert fn(b, b * s) == model.decode_time(b, b * s)


@needs_aic
def test_a_batch_is_charged_per_request_shares() -> None:
    model = load_cost_model("llama-3.1-8b-h100")
    one = model.prefill_time([51], [461])
    eight = model.prefill_time([51] * 8, [461] * 8)
    assert one < eight < 8 * one  # the batch shares the kernels' fixed cost
    mixed = model.prefill_time([51, 4000], [461, 0])
    assert model.prefill_time([4000], [0]) < mixed < one + model.prefill_time([4000], [0])


@needs_aic
def test_model_pickles_and_recompiles_in_a_fresh_process_cache(monkeypatch) -> None:
    model = load_cost_model("qwen3-32b-h100")
    want = model.prefill_time([1000, 20], [0, 5000]), model.decode_time(9, 40_000)
    monkeypatch.setattr(cost_aic, "_ENGINES", {})
    back = pickle.loads(pickle.dumps(model))
    assert (back.prefill_time([1000, 20], [0, 5000]), back.decode_time(9, 40_000)) == want


@needs_aic
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("aic:foo/bar@h100_sxm", "no model config for 'foo/bar'"),
        ("aic:Llama-3.1-8B@x100_sxm", "no system 'x100_sxm'"),
        ("aic:Llama-3.1-8B@h100_sxm/sglang-0.5.23", "no sglang 0.5.23 data for h100_sxm"),
        ("aic:Llama-3.1-8B@h100_sxm/tgi", "no tgi data"),
        ("aic:llama-3.1-8b-a100", "no AIC data named for preset"),
        ("aic:nonsense", "no AIC data named for preset 'nonsense'"),
        ("aic:Llama-3.1-8B@", "expected aic:MODEL@"),
    ],
)
def test_bad_aic_specs_are_one_line_errors(spec: str, message: str, monkeypatch) -> None:
    import urllib.request

    def no_network(*a, **k):  # a model outside AIC's configs must be refused, not downloaded
        raise AssertionError("tried the network")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    with pytest.raises(ValueError, match=message) as e:
        load_cost_model(spec)
    assert "\n" not in str(e.value)


@needs_aic
def test_custom_model_spec_takes_tp_and_version() -> None:
    model = load_cost_model("aic:Qwen/Qwen3-8B@2xh200_sxm/sglang-current")
    assert isinstance(model, AicCostModel)
    assert (model.tp, model.system, model.version) == (2, "h200_sxm", "0.5.14")
    # the memory side is derived from AIC's config: 36 layers x 8 KV heads x 128 x 2 x bf16
    assert model.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2
    assert 7.5e9 < model.roofline.params < 8.5e9


def test_without_aiconfigurator_presets_fall_back_and_aic_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(cost_aic, "aic_version", lambda: None)
    monkeypatch.setattr(cost_aic, "_ENGINES", {})
    monkeypatch.setitem(sys.modules, "aiconfigurator_core", None)  # import fails
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.engine", None)
    assert isinstance(load_cost_model("llama-3.1-8b-h100"), RooflineCostModel)
    for spec in ("aic", "aic:qwen3-32b-h100", "aic:Llama-3.1-8B@h100_sxm"):
        with pytest.raises(ValueError, match="aiconfigurator-core is not installed"):
            load_cost_model(spec)


def test_quantize_array_is_quantize_elementwise() -> None:
    xs = [0, 1, 2, 255, 256, 257, 383, 384, 385, 511, 512, 513, 1023, 1024, 1025, 4097]
    xs += [2**k + d for k in range(9, 52) for d in (-1, 0, 1, 2 ** (k - 8), 2 ** (k - 9))]
    arr = np.array(xs, dtype=np.int64)
    assert quantize_array(arr).tolist() == [quantize(x) for x in xs]
