"""``--cost-model``'s bad input on the command line: one line naming the flag, exit 2."""

from __future__ import annotations

import sys

import pytest

from radixbench.harness.cli import main
from radixbench.sim import cost_aic


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("radixbench: error: --cost-model: ")
    return err


def test_aic_without_aiconfigurator_core(monkeypatch, capsys) -> None:
    monkeypatch.setattr(cost_aic, "aic_version", lambda: None)
    monkeypatch.setattr(cost_aic, "_ENGINES", {})
    monkeypatch.setitem(sys.modules, "aiconfigurator_core", None)
    err = _error(capsys, ["compare", "--cost-model", "aic", "--requests", "5"])
    assert "aiconfigurator-core is not installed (pip install aiconfigurator-core==0.12.0)" in err


@pytest.mark.skipif(cost_aic.aic_version() is None, reason="aiconfigurator-core absent")
@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("aic:meta-llama/Llama-9-1T@h100_sxm", "AIC has no model config for"),
        ("aic:Llama-3.1-8B@tpu_v5", "AIC has no system 'tpu_v5'"),
        ("aic:Llama-3.1-8B@h100_sxm/sglang-0.4.0", "no sglang 0.4.0 data for h100_sxm"),
    ],
)
def test_aic_model_or_system_without_data(spec: str, needle: str, capsys) -> None:
    assert needle in _error(capsys, ["compare", "--cost-model", spec, "--requests", "5"])
