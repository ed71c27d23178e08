"""``radixbench bench cost``: AIC vs the roofline over the grid, the decomposition check, the
table, plot and BENCHMARKS.md section."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixbench.bench import cost as bc
from radixbench.harness.cli import main
from radixbench.sim import cost_aic
from radixbench.sim.cost import load_cost_model

pytestmark = pytest.mark.skipif(cost_aic.aic_version() is None, reason="aiconfigurator-core absent")


def test_grid_spans_the_issue_ranges() -> None:
    g = bc.CostGrid()
    shapes = g.prefill_shapes()
    assert {k for k, _, _ in shapes} == {1, 2, 4, 8}
    assert min(n + c for _, n, c in shapes) == 512 and max(n + c for _, n, c in shapes) == 16384
    assert max(c / (n + c) for _, n, c in shapes) == pytest.approx(0.9, abs=1e-3)
    assert (min(g.batch), max(g.batch), min(g.context), max(g.context)) == (1, 256, 1024, 32768)


def test_rows_are_the_two_models_and_the_decomposition_is_small() -> None:
    rows = bc.cost_rows(bc.CostGrid.quick(), ["llama-3.1-8b-h100"])
    aic, roof = load_cost_model("llama-3.1-8b-h100"), load_cost_model("roofline:llama-3.1-8b-h100")
    pre = rows[rows["phase"].eq("prefill")].iloc[-1]
    k, n, c = int(pre["requests"]), int(pre["new_tokens"]), int(pre["cached_tokens"])
    assert pre["aic_s"] == aic.prefill_time([n] * k, [c] * k)
    assert pre["roofline_s"] == roof.prefill_time([n] * k, [c] * k)
    assert pre["ratio"] == pre["aic_s"] / pre["roofline_s"]
    assert rows["decomposition"].abs().max() < 0.005  # rounding only: 8 significant bits
    assert len(rows) == len(bc.CostGrid.quick().prefill_shapes()) + 4
    assert set(bc.uncovered()) == {"llama-3.1-8b-a100", "llama-3.1-70b-a100"}


def test_decomposition_column_catches_a_per_request_attention_sum(monkeypatch) -> None:
    """Charging each request a batch-of-one attention (not its share of the batch's) is what
    the column exists to catch: 8 short extends after a cached prefix come out far dearer."""
    monkeypatch.setattr(cost_aic, "_ENGINES", {})
    real = cost_aic._Engine.attn_ms
    monkeypatch.setattr(cost_aic._Engine, "attn_ms", lambda self, k, n, c: real(self, 1, n, c))
    rows = bc.cost_rows(bc.CostGrid.quick(), ["llama-3.1-8b-h100"])
    assert rows["decomposition"].max() > 0.05


def test_cli_prints_the_summary_and_writes_the_section(tmp_path: Path, capsys) -> None:
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Benchmarks\n\nkept text\n")
    out = tmp_path / "bench"
    rc = main(["bench", "cost", "--quick", "--presets", "qwen3-32b-h100", "--out", str(out),
               "--markdown", str(md)])  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr().out
    assert "qwen3-32b-h100" in printed and "ratio_median" in printed
    assert (out / "bench_cost.csv").is_file() and (out / "bench_cost.png").is_file()
    text = md.read_text()
    assert text.startswith("# Benchmarks\n\nkept text\n")
    assert "## Step times: AIC vs roofline" in text and "| qwen3-32b-h100 | decode |" in text
    assert (tmp_path / "docs" / "bench-cost.png").is_file()
    assert main(["bench", "cost", "--quick", "--presets", "llama-3.1-8b-a100"]) == 2
