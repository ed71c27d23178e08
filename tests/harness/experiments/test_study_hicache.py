"""``radixbench study hicache``: bad study files as one line, one tiny study end to end."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from radixbench.harness.cli import main
from radixbench.harness.config.study import StudyError
from radixbench.harness.config.study_hicache import load_hicache_study
from radixbench.harness.experiments.study import run_study
from radixbench.harness.experiments.study_family import family_of

TINY = """
description = "tiny hicache study"
family = "hicache"
scenario = "long-multi-turn"
[base]
"workload.sessions" = 6
"workload.turns" = 3
"workload.think_time_s" = 2.0
"arrivals.rate" = 2.0
"sim.kv_capacity_tokens" = 24000
[sweeps.ratio]
key = "sim.hicache.ratio"
log = true
quick = [1.0, 2.0]
full = [1.0]
set = { "variants.hicache" = ["off", "write_through"] }
[sweeps.storage]
key = "sim.hicache.storage.write_gbps"
quick = [2.0]
full = [2.0]
[sweeps.storage.set]
"variants.hicache" = ["off", "write_through"]
"sim.hicache.ratio" = 1.0
"sim.hicache.storage.backend" = "sim"
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "study-tiny.toml"
    p.write_text(text)
    return p


def test_bundled_hicache_study_loads_in_both_modes() -> None:
    assert family_of("hicache").names == ("hicache",)
    assert family_of("eviction").names == ("eviction", "matching")
    quick, full = load_hicache_study("hicache", quick=True), load_hicache_study("hicache")
    assert set(quick.sweeps) == {"ratio", "policy", "storage", "prefetch"}
    assert len(full.points) >= len(quick.points) and quick.mode == "quick"
    assert all(p.policies[0] == "off" for p in quick.points)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (("quick = [1.0, 2.0]", "quick = []"), "sweeps.ratio.quick"),
        (("quick = [1.0, 2.0]", "quick = [1.0, 1.0]"), "sweeps.ratio.quick"),
        (("quick = [1.0, 2.0]", "quick = [0.5]"), "sweeps.ratio.quick[0]"),
        (('key = "sim.hicache.ratio"', 'key = "workload.nope"'), "workload.nope"),
        (('["off", "write_through"] }\n[sweeps.storage]', '["off"] }\n[sweeps.storage]'),
         "sweeps.ratio.set.variants.hicache"),
        (('"write_through"] }\n[sweeps.storage]', '"write_nowhere"] }\n[sweeps.storage]'),
         "write_nowhere"),
        (("log = true", 'log = "yes"'), "sweeps.ratio.log"),
        (('family = "hicache"', 'family = "hicache"\nextra = 1'), "extra"),
    ],
)  # fmt: skip
def test_bad_study_file_is_one_line_naming_the_key(tmp_path, edit, needle) -> None:
    path = _write(tmp_path, TINY.replace(*edit))
    with pytest.raises(StudyError) as e:
        load_hicache_study(path, quick=True)
    assert needle in str(e.value) and "\n" not in str(e.value) and str(path) in str(e.value)


def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys) -> None:
    bad = _write(tmp_path, TINY.replace("quick = [1.0, 2.0]", "quick = [0.5]"))
    assert main(["study", str(bad), "--quick"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sweeps.ratio.quick[0]" in err and "--hicache-ratio" in err
    good = _write(tmp_path, TINY)
    assert main(["study", str(good), "--quick", "--set", "workload.nope=1"]) == 2
    assert "workload.nope" in capsys.readouterr().err
    assert main(["study", str(good), "--impl", "sglang,radixbench"]) == 2
    assert "--impl" in capsys.readouterr().err


@pytest.fixture(scope="module")
def cluster():
    """An in-process cluster (one worker thread): the Dask path without process start-up."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as c:
        yield c


@pytest.mark.e2e  # a Dask cluster
def test_tiny_hicache_study_runs_on_dask(tmp_path, cluster) -> None:
    study = load_hicache_study(_write(tmp_path, TINY), quick=True)
    out = run_study(study, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False)
    run = out.run_dir
    assert run.name.startswith("study-tiny-quick-") and not list(run.parent.glob(".tmp-*"))
    for f in ("study.md", "study.json", "points.parquet", "plots/study-hicache.png"):
        assert (run / f).is_file(), f
    pts = pd.read_parquet(run / "points.parquet")
    assert list(pts["point"]) == [0, 1, 2] and set(pts["candidate"]) == {"write_through"}
    assert list(pts["sweep"]) == ["ratio", "ratio", "storage"]
    split = pts[["device_hit_rate", "host_hit_rate", "storage_hit_rate"]].sum(axis=1)
    assert (abs(split - pts["hit_rate"]) < 1e-9).all()
    assert (pts["hit_rate"] >= pts["baseline_hit_rate"] - 1e-9).all()
    assert pts["ttft_p50_lo"].le(pts["ttft_p50_ratio"]).all()
    lines = out.summary["lines"]
    assert lines[-1].startswith("L3 crossover: an L3 hit of a 8,192-token prompt")
    assert out.summary["crossover"]["model_gbps"] > 0
