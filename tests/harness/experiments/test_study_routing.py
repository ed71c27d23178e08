"""``radixbench study routing``: the bundled study loads in both modes, bad files are one line,
and a tiny routing study runs on an in-process Dask cluster to its folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.harness.config.study import StudyError
from radixbench.harness.config.study_routing import load_routing_study
from radixbench.harness.experiments.study import run_study
from radixbench.harness.experiments.study_family import family_of

TINY = """description = "tiny routing study"
family = "routing"
scenario = "{scenario}"
seed = 0
tenants_per_instance = 3
duration_s = 8.0
[base]
"workload.context_tokens" = 256
"workload.query_tokens" = 64
"workload.output_tokens" = 16
[variants]
baseline = "round-robin"
candidates = ["cache-aware"]
[points.quick]
instances = [1, 2]
load = [2.0, 2.0]
"""


def _write(tmp_path: Path, text: str) -> Path:
    scenario = Path(__file__).parents[3] / "harness/config/studies/routing-tenants.toml"
    p = tmp_path / "study-tiny.toml"
    p.write_text(text.replace("{scenario}", str(scenario)))
    return p


def test_bundled_routing_study_loads() -> None:
    assert family_of("routing").names == ("routing",)
    assert family_of("eviction").names == ("eviction", "matching")
    quick, full = load_routing_study("routing", quick=True), load_routing_study("routing")
    assert quick.mode == "quick" and quick.baseline == "round-robin"
    assert {"cache-aware", "precise"} <= set(quick.candidates)
    assert max(n for n, _ in full.points) == 32 and min(n for n, _ in full.points) == 1
    assert len({x for _, x in full.points}) >= 2  # several loads
    o = full.overrides(len(full.points) - 1)
    n, load = full.points[-1]
    assert o["cluster.instances"] == n and o["arrivals.rate"] == load * n


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (("instances = [1, 2]", "instances = [1]"), "two non-empty lists of one length"),
        (("instances = [1, 2]", "instances = [0, 2]"), "points.quick.instances"),
        (('candidates = ["cache-aware"]', 'candidates = ["warp"]'), "points.quick[0]"),
        (("duration_s = 8.0", "duration_s = -1"), "duration_s"),
        (("seed = 0", "seed = 0\ngateways = [0]"), "gateways"),
        (("seed = 0", "seed = 0\ngateways = [2, 2]"), "gateways"),
    ],
)
def test_bad_routing_study_is_one_line(tmp_path: Path, edit: tuple[str, str], needle: str) -> None:
    path = _write(tmp_path, TINY.replace(*edit))
    with pytest.raises(StudyError) as exc:
        load_routing_study(path, quick=True)
    msg = str(exc.value)
    assert "\n" not in msg and needle in msg


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as c:
        yield c


@pytest.mark.e2e  # a Dask cluster
def test_tiny_routing_study(tmp_path: Path, cluster) -> None:
    spec = load_routing_study(_write(tmp_path, TINY), quick=True)
    out = run_study(spec, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False)
    run = out.run_dir
    for f in ("study.md", "points.parquet", "crossover.csv", "plots/study-routing.png"):
        assert (run / f).is_file(), f
    pts = pd.read_parquet(run / "points.parquet")
    assert len(pts) == 4 and set(pts["router"]) == {"round-robin", "cache-aware"}
    assert set(pts["instances"]) == {1, 2}
    one = pts[pts["instances"] == 1].set_index("router")
    # one instance: routing changes nothing
    assert one.loc["cache-aware", "ttft_p90_s"] == one.loc["round-robin", "ttft_p90_s"]
    cross = pd.read_parquet(run / "crossover.parquet")
    assert set(cross["metric"]) == {"ttft_p90", "throughput"}
    assert "## Verdict" in (run / "study.md").read_text()


@pytest.mark.e2e  # a Dask cluster
def test_routing_study_gateways_axis(tmp_path: Path, cluster) -> None:
    """Every router runs behind each gateway count; rows carry the count and the per-gateway
    hit rate, the crossovers pair routers at the same count."""
    text = TINY.replace("seed = 0", "seed = 0\ngateways = [1, 3]").replace(
        "instances = [1, 2]\nload = [2.0, 2.0]", "instances = [2]\nload = [2.0]"
    )
    spec = load_routing_study(_write(tmp_path, text), quick=True)
    assert spec.gateways == (1, 3) and spec.overrides(0)["cluster.gateways"] == [1, 3]
    out = run_study(spec, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False)
    pts = pd.read_parquet(out.run_dir / "points.parquet")
    assert sorted(zip(pts["router"], pts["gateways"])) == [
        ("cache-aware", 1), ("cache-aware", 3), ("round-robin", 1), ("round-robin", 3),
    ]  # fmt: skip
    assert (pts["gateway_hit_rate_min"] <= pts["gateway_hit_rate_max"]).all()
    cross = pd.read_parquet(out.run_dir / "crossover.parquet")
    assert set(cross["gateways"]) == {1, 3}


def test_cli_routing_study_errors(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, TINY)
    assert main(["study", str(path), "--quick", "--set", "workload.nope=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "workload.nope" in err
