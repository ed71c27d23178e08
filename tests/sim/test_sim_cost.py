from __future__ import annotations

import numpy as np
import pytest

from radixbench.sim.cost import LinearCostModel, RooflineCostModel, load_cost_model, preset_names


def test_presets_cover_two_models_on_two_gpus() -> None:
    names = preset_names()
    for want in (
        "llama-3.1-8b-h100",
        "llama-3.1-8b-a100",
        "llama-3.1-70b-h100",
        "llama-3.1-70b-a100",
    ):
        assert want in names
        assert isinstance(load_cost_model(f"roofline:{want}"), RooflineCostModel)
    assert isinstance(load_cost_model("linear"), LinearCostModel)


def test_kv_bytes_per_token_follow_the_architecture() -> None:
    # 2 (K, V) x layers x kv_heads x head_dim x 2 bytes
    assert load_cost_model("roofline:llama-3.1-8b-h100").kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert load_cost_model("llama-3.1-70b-a100").kv_bytes_per_token == 2 * 80 * 8 * 128 * 2


def test_decode_is_bandwidth_bound_and_grows_with_context() -> None:
    m = load_cost_model("roofline:llama-3.1-8b-h100")
    assert isinstance(m, RooflineCostModel)
    weights_s = m.weight_bytes / (m.mem_bw_bytes_s * m.bw_eff)
    t1 = m.decode_time(1, 1000)
    assert weights_s < t1 - m.step_overhead_s < weights_s * 1.1
    assert m.decode_time(8, 100_000) > m.decode_time(8, 10_000)


def test_prefill_pays_attention_over_cached_tokens_but_no_gemm() -> None:
    m = load_cost_model("roofline:llama-3.1-8b-h100")
    cold = m.prefill_time([8000], [0])
    warm = m.prefill_time([8000], [30_000])
    full = m.prefill_time([38_000], [0])
    assert cold < warm < full


def test_h100_is_faster_than_a100_and_8b_faster_than_70b() -> None:
    h, a = load_cost_model("roofline:llama-3.1-8b-h100"), load_cost_model("llama-3.1-8b-a100")
    assert h.prefill_time([4096], [0]) < a.prefill_time([4096], [0])
    assert h.decode_time(32, 50_000) < a.decode_time(32, 50_000)
    big = load_cost_model("roofline:llama-3.1-70b-h100")
    assert h.decode_time(32, 50_000) < big.decode_time(32, 50_000)


def test_kv_capacity_from_gpu_memory() -> None:
    m = load_cost_model("roofline:llama-3.1-8b-h100")
    assert isinstance(m, RooflineCostModel)
    assert m.kv_capacity_tokens(80) == int((80e9 - m.weight_bytes) // m.kv_bytes_per_token)
    with pytest.raises(ValueError, match="do not fit"):
        m.kv_capacity_tokens(10)


def test_bad_cost_model_input_names_the_file_and_key(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown cost model"):
        load_cost_model("gpt-9")
    with pytest.raises(ValueError, match="not found"):
        load_cost_model(str(tmp_path / "none.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nname = "x"\n')
    with pytest.raises(ValueError, match=r"bad.toml: missing key \[model\] params"):
        load_cost_model(str(bad))
    broken = tmp_path / "broken.toml"
    broken.write_text("[model\n")
    with pytest.raises(ValueError, match=r"broken\.toml"):
        load_cost_model(str(broken))
    with pytest.raises(ValueError, match=">= 0"):
        LinearCostModel(prefill_base_s=-1)


@pytest.mark.parametrize(
    "spec", ["linear", *preset_names(), *(f"roofline:{p}" for p in preset_names())]
)
def test_decode_time_fn_is_decode_time_bit_for_bit(spec: str) -> None:
    model = load_cost_model(spec)
    fn = model.decode_time_fn()
    for bs in (1, 3, 64, 257):
        for ctx in (0, 1, 1000, 123_457, 3_000_001):
            assert fn(bs, ctx) == model.decode_time(bs, ctx)  # exact, not approx
        # a decode block's call: every element bit for bit the per-step function's
        ctxs = np.array([0, 1, 255, 256, 257, 1000, 123_457, 3_000_001])
        ctxs = np.concatenate((ctxs, 40_000 + bs * np.arange(300)))
        many = model.decode_times(bs, ctxs)
        assert many.dtype == np.float64
        assert many.tolist() == [fn(bs, int(c)) for c in ctxs]
