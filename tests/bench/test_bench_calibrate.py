"""``radixbench calibrate``: the synthetic forward, the fit, the preset it writes, the CLI (a CPU
dry run here; the real CUDA run is marked gpu)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
import torch

from radixbench.bench import calibrate as cal
from radixbench.bench.cost import CostGrid
from radixbench.bench.forward import ModelShape, SyntheticModel
from radixbench.harness.cli import main
from radixbench.sim.cost import RooflineCostModel, cost_info, load_cost_model

TINY = ModelShape(layers=2, hidden=32, heads=4, kv_heads=2, head_dim=8, intermediate=64, vocab=50)


def test_extend_after_a_cached_prefix_equals_the_whole_prefill() -> None:
    """The lower-right causal mask and the K/V cache writes: prefilling c tokens then
    extending n over the caches gives the last token's logits of prefilling c + n at once."""
    torch.manual_seed(0)
    m = SyntheticModel(TINY, torch.device("cpu"))
    x = torch.randn(2, 12, TINY.hidden)
    with torch.inference_mode():
        whole = m._forward(x, m._caches(2, 12), 0)
        caches = m._caches(2, 12)
        m._forward(x[:, :7], caches, 0)
        extend = m._forward(x[:, 7:], caches, 7)
    torch.testing.assert_close(extend, whole, rtol=1e-4, atol=1e-4)
    assert m.attention_path == "sdpa"


def test_tp_rank_splits_heads_mlp_and_vocabulary() -> None:
    r = dataclasses.replace(TINY, tp=2).rank()
    assert (r.heads, r.kv_heads, r.intermediate, r.vocab, r.tp) == (2, 1, 32, 25, 1)


def test_fit_recovers_the_efficiencies_that_made_the_times() -> None:
    truth = dataclasses.replace(
        load_cost_model("roofline:llama-3.1-8b-h100"),
        compute_eff=0.41, bw_eff=0.83, step_overhead_s=2.5e-3,
    )  # fmt: skip
    rows = cal.measure(_Replay(truth), CostGrid.quick())
    start = load_cost_model("roofline:llama-3.1-8b-h100")
    fitted, rms = cal.fit(start, rows)
    assert fitted.compute_eff == pytest.approx(0.41, rel=1e-3)
    assert fitted.bw_eff == pytest.approx(0.83, rel=1e-3)
    assert fitted.step_overhead_s == pytest.approx(2.5e-3, rel=1e-3)
    assert rms < 1e-4
    with pytest.raises(ValueError, match="at least 3"):
        cal.fit(start, rows.head(2))


class _Replay:
    """Stands in for SyntheticModel: the times a known roofline gives (the fit's input)."""

    attention_path = "replay"

    def __init__(self, roof: RooflineCostModel) -> None:
        self.roof = roof

    def time(self, phase: str, a: int, b: int, c: int = 0, reps: int = 3) -> float:
        if phase == "prefill":
            return self.roof.prefill_time([b] * a, [c] * a)
        return self.roof.decode_time(a, a * b)


def test_written_preset_loads_as_a_calibrated_roofline(tmp_path: Path) -> None:
    import datetime

    from radixbench.sim.cost import read_preset

    doc, _ = read_preset("qwen3-32b-h100")
    fitted = dataclasses.replace(
        load_cost_model("roofline:qwen3-32b-h100"), compute_eff=0.6, bw_eff=0.9
    )
    text = cal.preset_toml(doc, fitted, 'NVIDIA "H100"', 0.05, 40, "qwen3-32b-h100", False,
                           date=datetime.date(2026, 1, 2))  # fmt: skip
    path = tmp_path / "cal.toml"
    path.write_text(text)
    model = load_cost_model(str(path))
    assert isinstance(model, RooflineCostModel)  # no [aic] table: the roofline runs it
    assert (model.compute_eff, model.bw_eff, model.tp) == (0.6, 0.9, 2)
    info = cost_info(model)
    assert 'calibrated on NVIDIA "H100" on 2026-01-02' in info["source"]
    assert tomllib.loads(text)["calibration"]["shapes"] == 40


def test_cli_cpu_dry_run_writes_the_preset_and_prints_the_table(tmp_path, capsys) -> None:
    out = tmp_path / "cal.toml"
    rc = main(["calibrate", "--device", "cpu", "--preset", "llama-3.1-8b-h100",
               "--reps", "1", "--out", str(out)])  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr().out
    assert "measured_ms" in printed and "fitted:" in printed and str(out) in printed
    doc = tomllib.loads(out.read_text())
    assert doc["calibration"]["dry_run"] is True and doc["calibration"]["device"]
    assert isinstance(load_cost_model(str(out)), RooflineCostModel)
    assert len(cal.measure(SyntheticModel(TINY, torch.device("cpu")), cal.DRY_GRID, 1)) == 12


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cli_cuda_without_a_gpu_is_one_line_exit_2(capsys) -> None:
    assert main(["calibrate", "--preset", "llama-3.1-8b-h100"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("radixbench: error: --device cuda: no CUDA device")


def test_cli_preset_without_shapes_names_the_flag(tmp_path, capsys) -> None:
    bad = tmp_path / "p.toml"
    text = Path(__file__).parents[2].joinpath("sim/presets/llama-3.1-8b-a100.toml").read_text()
    bad.write_text(text.replace("hidden_size", "# hidden_size"))
    assert main(["calibrate", "--device", "cpu", "--preset", str(bad)]) == 2
    assert "--preset: " in capsys.readouterr().err and "hidden_size" in bad.read_text()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cli_cuda_calibrates_the_8b_preset(tmp_path, capsys) -> None:
    out = tmp_path / "cal.toml"
    rc = main(["calibrate", "--preset", "llama-3.1-8b-h100", "--quick", "--reps", "3",
               "--out", str(out)])  # fmt: skip
    assert rc == 0
    model = load_cost_model(str(out))
    assert isinstance(model, RooflineCostModel)
    assert 0.05 < model.compute_eff <= 1 and 0.05 < model.bw_eff <= 1
    assert tomllib.loads(out.read_text())["calibration"]["rms_log_error"] < 0.5
