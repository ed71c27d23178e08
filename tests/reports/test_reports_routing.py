"""Router tables and verdicts of a cluster run, on synthetic per-request tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radixbench.reports.record import RunMeta
from radixbench.reports.routing import (
    gateway_table,
    instance_table,
    router_labels,
    router_table,
    router_verdicts,
)
from radixbench.reports.routing_report import answer_lines, shown_tables


def _requests(router: str, ttft_scale: float, hit: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    arrival = np.sort(rng.uniform(0, 100, n))
    ttft = rng.exponential(0.5, n) * ttft_scale
    return pd.DataFrame(
        {
            "variant": f"heapify/galloping/numpy/router={router}/instances=2",
            "impl": "radixbench",
            "evictor": "heapify",
            "matcher": "galloping",
            "flatten": "numpy",
            "router": router,
            "instances": "2",
            "rid": np.arange(n),
            "arrival_s": arrival,
            "input_len": 1000,
            "output_len": 100,
            "prefix_hit_tokens": hit,
            "first_token_s": arrival + ttft,
            "finish_s": arrival + ttft + 2.0 * ttft_scale,
            "status": "finished",
            "ttft_s": ttft,
            "e2e_s": ttft + 2.0 * ttft_scale,
            "tpot_s": 0.02,
            "instance": np.arange(n) % 2,
        }
    )


def _timeseries(variant: str, queue: int) -> pd.DataFrame:
    t = np.linspace(0, 100, 50)
    rows = []
    for inst in (0, 1):
        rows.append(
            pd.DataFrame(
                {
                    "variant": variant,
                    "sim_time_s": t,
                    "step": "decode",
                    "step_s": 2.0,
                    "queue_len": queue * (inst + 1),
                    "running": 10,
                    "kv_used_tokens": 500,
                    "kv_capacity_tokens": 1000,
                    "instance": inst,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def test_router_verdicts_and_ranking() -> None:
    req = pd.concat(
        [_requests("round-robin", 1.0, 0, 1), _requests("precise", 0.25, 800, 2)],
        ignore_index=True,
    )
    v = router_verdicts(req, n_resamples=200, seed=0)
    ttft = v[v["metric"] == "ttft_p90_s"].iloc[0]
    assert ttft["candidate_router"] == "precise" and ttft["baseline_router"] == "round-robin"
    assert 3.0 < ttft["ratio"] < 5.5 and ttft["ci_low"] > 1 and ttft["verdict"] == "better"
    tput = v[v["metric"] == "output_throughput"].iloc[0]
    assert tput["ratio"] > 1.0 and tput["verdict"] in ("better", "no significant difference")
    ts = pd.concat(
        [_timeseries(n, q) for n, q in zip(req["variant"].unique(), (40, 0))], ignore_index=True
    )
    inst = instance_table(req, ts, RunMeta(max_running=16, max_prefill_tokens=1000))
    assert len(inst) == 4
    metrics = pd.DataFrame(
        {"variant": req["variant"].unique(), "output_throughput": [10.0, 20.0],
         "load_imbalance": [1.1, 1.4], "route_p50_us": [1.0, 300.0],
         "route_p99_us": [2.0, 900.0], "instances": [2, 2]}
    )  # fmt: skip
    routers = router_table(req, metrics, inst)
    assert list(routers["router"]) == ["round-robin", "precise"]
    assert routers.loc[1, "prefix_hit_rate"] == 0.8
    lines = answer_lines(routers, v)
    assert lines[0].startswith("1. precise") and "better" in lines[0]
    assert lines[1].startswith("2. round-robin") and "the baseline" in lines[1]


def test_per_gateway_hit_rate() -> None:
    """Each gateway's hit rate is over the requests it routed; the router table and the answer
    carry their mean and spread when a router ran behind several gateways."""
    one = _requests("cache-aware", 1.0, 500, 3).assign(gateway=0, gateways="1")
    many = _requests("cache-aware", 1.0, 0, 4).assign(gateways="4")
    many["variant"] = many["variant"] + "/gateways=4"
    many["gateway"] = np.arange(len(many)) % 4
    many.loc[many["gateway"] == 3, "prefix_hit_tokens"] = 800
    one["variant"] = one["variant"] + "/gateways=1"
    req = pd.concat([one, many], ignore_index=True)
    gw = gateway_table(req)
    assert list(gw["gateway"]) == [0, 0, 1, 2, 3]
    assert list(gw["prefix_hit_rate"]) == [0.5, 0.0, 0.0, 0.0, 0.8]
    ts = pd.concat([_timeseries(n, 0) for n in req["variant"].unique()], ignore_index=True)
    inst = instance_table(req, ts, RunMeta())
    metrics = pd.DataFrame(
        {"variant": req["variant"].unique(), "output_throughput": 1.0, "load_imbalance": 1.0}
    )
    routers = router_table(req, metrics, inst)
    row = routers.set_index("variant").loc[many["variant"].iloc[0]]
    assert row["gateways"] == 4 and row["gateway_hit_rate_max"] == 0.8
    assert row["gateway_hit_rate_mean"] == 0.2 and row["gateway_hit_rate_min"] == 0.0
    lines = answer_lines(routers, router_verdicts(req, n_resamples=50))
    assert any("per-gateway hit rate 0.200 [0.000–0.800] over 4 gateways" in ln for ln in lines)


def test_router_verdicts_pair_within_a_gateway_count() -> None:
    """A router behind 8 gateways is compared with the baseline router behind 8, not 1."""
    frames = []
    for k, (router, g, scale) in enumerate(
        [("cache-aware", "1", 1.0), ("cache-aware", "8", 3.0), ("precise", "1", 1.0),
         ("precise", "8", 1.0)]
    ):  # fmt: skip
        df = _requests(router, scale, 0, 10 + k).assign(gateways=g, gateway=0)
        df["variant"] = df["variant"] + f"/gateways={g}"
        df["ttft_s"] = np.linspace(0.1, 1.0, len(df)) * scale
        frames.append(df)
    v = router_verdicts(pd.concat(frames, ignore_index=True), n_resamples=50)
    ttft = v[v["metric"] == "ttft_p90_s"].set_index("candidate")
    at8 = ttft.loc[frames[3]["variant"].iloc[0]]
    assert at8["baseline"] == frames[1]["variant"].iloc[0] and at8["ratio"] == pytest.approx(3.0)
    at1 = ttft.loc[frames[2]["variant"].iloc[0]]
    assert at1["baseline"] == frames[0]["variant"].iloc[0] and at1["ratio"] == pytest.approx(1.0)


def test_every_table_names_the_gateway_count() -> None:
    """A router behind 1 and behind 8 gateways: the router table's labels, the answer's "vs"
    partner, the verdicts' and instances' router columns all say the count (they read
    'cache-aware' twice, or the full variant name, before)."""
    frames = []
    for k, (router, g) in enumerate(
        [("cache-aware", "1"), ("cache-aware", "8"), ("precise", "1"), ("precise", "8")]
    ):
        df = _requests(router, 1.0 + k, 0, 20 + k).assign(gateways=g, gateway=0)
        df["variant"] = df["variant"] + f"/gateways={g}"
        frames.append(df)
    req = pd.concat(frames, ignore_index=True)
    ts = pd.concat([_timeseries(n, 0) for n in req["variant"].unique()], ignore_index=True)
    inst = instance_table(req, ts, RunMeta())
    metrics = pd.DataFrame(
        {"variant": req["variant"].unique(), "output_throughput": 1.0, "load_imbalance": 1.0}
    )
    routers = router_table(req, metrics, inst)
    names = ["cache-aware, 1 gateway", "cache-aware, 8 gateways", "precise, 1 gateway",
             "precise, 8 gateways"]  # fmt: skip
    assert list(routers["label"]) == names
    verdicts = router_verdicts(req, n_resamples=50)
    lines = answer_lines(routers, verdicts)
    assert any(ln.split(":")[0].endswith("precise, 8 gateways") and
               "— vs cache-aware, 8 gateways:" in ln for ln in lines)  # fmt: skip
    shown = shown_tables({"routers": routers, "router_verdicts": verdicts, "instances": inst})
    assert list(shown["Routers"].columns[1:]) == names
    assert set(shown["Router verdicts"]["baseline_router"]) == {
        "cache-aware, 1 gateway",
        "cache-aware, 8 gateways",
    }
    assert list(dict.fromkeys(shown["Instances"]["router"])) == names


def test_router_labels_fall_back_to_the_variant_name() -> None:
    """Two cache variants behind one router keep their full names; one gateway everywhere
    leaves the router's name alone."""
    two = pd.DataFrame({"variant": ["heapify/router=a", "lru-list/router=a"], "router": "a"})
    assert router_labels(two) == {v: v for v in two["variant"]}
    one = pd.DataFrame({"variant": ["v1", "v2"], "router": ["a", "b"], "gateways": "1"})
    assert router_labels(one) == {"v1": "a", "v2": "b"}


def test_cache_variants_alike_behind_a_router_share_one_answer_line() -> None:
    """Three cache variants behind each of two routers, the same schedule (the isolated clock):
    the answer has one line per router saying how many variants it stands for (it listed every
    router x cache variant, six near-identical lines, before); a variant whose figures differ
    keeps its own line under its full name."""
    frames = []
    for router, scale, seed in (("round-robin", 1.0, 30), ("precise", 0.5, 31)):
        base = _requests(router, scale, 100, seed)
        for ev in ("heapify", "persistent-heap", "lru-list"):
            df = base.assign(evictor=ev)
            df["variant"] = f"{ev}/galloping/numpy/router={router}/instances=2"
            frames.append(df)
    odd = frames[-1].copy()
    odd["variant"] = "heapify/linear/numpy/router=precise/instances=2"
    odd["ttft_s"] = odd["ttft_s"] * 3
    req = pd.concat([*frames, odd], ignore_index=True)
    ts = pd.concat([_timeseries(n, 0) for n in req["variant"].unique()], ignore_index=True)
    inst = instance_table(req, ts, RunMeta())
    metrics = pd.DataFrame(
        {"variant": req["variant"].unique(), "output_throughput": 1.0, "load_imbalance": 1.0}
    )
    routers = router_table(req, metrics, inst)
    lines = answer_lines(routers, router_verdicts(req, n_resamples=50))
    assert len(lines) == 3, lines
    assert lines[0].startswith("1. precise (3 cache variants, alike): ")
    assert "— vs round-robin:" in lines[0]
    assert lines[1].startswith("2. round-robin (3 cache variants, alike): ")
    assert lines[2].startswith("3. heapify/linear/numpy/router=precise/instances=2: ")


def test_ranked_answers_render_as_ordered_lists() -> None:
    """A ranked answer ("1. ...") is an ordered list in HTML and Markdown, not a bullet before
    each rank (report.html read "• 1. 1." on a cluster run)."""
    from radixbench.reports.headline import Answer
    from radixbench.reports.html import answer_html
    from radixbench.reports.markdown import answer_block

    ans = Answer(load=[], headline=["1. precise: TTFT p90 1 s", "2. round-robin: x"], serving=[])
    html = answer_html(ans)
    assert "<ol><li>precise: TTFT p90 1 s</li><li>round-robin: x</li></ol>" in html
    assert "<ul>" not in html
    md = answer_block(ans)
    assert "1. precise: TTFT p90 1 s" in md and not any(ln.startswith("- 1.") for ln in md)
    plain = answer_html(Answer(load=[], headline=["evict: 2x faster"], serving=[]))
    assert "<ul><li>evict: 2x faster</li></ul>" in plain
