"""Synthetic per-request and per-op tables for the reports tests.

Four variants of radixbench's cache (records of named axes, :data:`AXES`; the tables carry them
as columns, as the simulator's do) are simulated with a fixed NumPy seed:

* evict latency (ns) grows linearly in ``evictable_leaves`` for ``heapify`` and
  logarithmically for ``persistent-heap`` (so heapify is the slower evictor);
* match_prefix latency (ns) grows linearly in ``key_len`` (tokens) for ``linear`` and
  logarithmically for ``galloping`` (so linear is the slower matcher);
* requests have identical prefix hits (tokens) across variants, about 10 % rejected
  (timing columns NaN), and per-variant TTFT/E2E (s).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

VARIANTS = [
    "heapify/linear/chain",
    "heapify/galloping/chain",
    "persistent-heap/linear/chain",
    "persistent-heap/galloping/chain",
]


def rb(evictor: str, matcher: str, flatten: str = "chain") -> dict[str, str | None]:
    """The axis record of a variant of radixbench's cache."""
    return {"impl": "radixbench", "evictor": evictor, "matcher": matcher, "flatten": flatten}


def other(impl: str, flatten: str = "chain") -> dict[str, str | None]:
    """The axis record of a variant of another implementation (own evictor and matcher)."""
    return {"impl": impl, "evictor": None, "matcher": None, "flatten": flatten}


#: Variant name -> its axis record (the names are display names, never parsed).
AXES: dict[str, dict[str, str | None]] = {
    "heapify/linear/chain": rb("heapify", "linear"),
    "heapify/galloping/chain": rb("heapify", "galloping"),
    "persistent-heap/linear/chain": rb("persistent-heap", "linear"),
    "persistent-heap/galloping/chain": rb("persistent-heap", "galloping"),
}


def with_axes(
    df: pd.DataFrame, axes: dict[str, dict[str, str | None]] | None = None
) -> pd.DataFrame:
    """``df`` (a ``variant`` column) with the axis columns of its variants from ``axes``
    (default :data:`AXES`), inserted after ``variant``, as the simulator writes them."""
    from radixbench.reports.axes import VariantSet

    table = {**AXES, **(axes or {})}
    names = tuple(dict.fromkeys(map(str, df["variant"])))
    cols = ("impl", "evictor", "matcher", "flatten")
    vs = VariantSet(names, cols, {n: table[n] for n in names})
    return vs.attach(df.drop(columns=[c for c in cols if c in df.columns]))


N_REQUESTS = 300
OP_COUNTS = {"match_prefix": 400, "insert": 300, "evict": 150, "build_extend": 100}
OP_COUNTS_EXTRA = {"inc_lock_ref": 120}


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    """Multiplicative log-normal noise with median 1."""
    return rng.lognormal(mean=0.0, sigma=0.25, size=n)


def make_requests(seed: int = 1234) -> pd.DataFrame:
    """Per-request table (docs/CONTRACTS.md) for all :data:`VARIANTS`."""
    rng = np.random.default_rng(seed)
    rid = np.arange(N_REQUESTS, dtype=np.int64)
    arrival = np.cumsum(rng.exponential(0.05, N_REQUESTS))
    input_len = rng.integers(256, 8192, N_REQUESTS).astype(np.int64)
    output_len = rng.integers(16, 512, N_REQUESTS).astype(np.int64)
    rejected = rng.random(N_REQUESTS) < 0.1
    hit = (rng.random(N_REQUESTS) * input_len // 512 * 512).astype(np.int64)
    hit[rejected] = 0
    frames = []
    for i, variant in enumerate(VARIANTS):
        ttft = 0.02 + (input_len - hit) * 2e-6 * (1 + 0.1 * i) * _noise(rng, N_REQUESTS)
        e2e = ttft + output_len * 0.01 * _noise(rng, N_REQUESTS)
        first = arrival + ttft
        finish = arrival + e2e
        nan = np.where(rejected, np.nan, 1.0)
        frames.append(
            pd.DataFrame(
                {
                    "variant": [variant] * N_REQUESTS,
                    "rid": rid,
                    "arrival_s": arrival.astype(np.float64),
                    "input_len": input_len,
                    "output_len": output_len,
                    "prefix_hit_tokens": hit,
                    "first_token_s": first * nan,
                    "finish_s": finish * nan,
                    "ttft_s": ttft * nan,
                    "e2e_s": e2e * nan,
                    "status": np.where(rejected, "rejected", "finished").tolist(),
                }
            )
        )
    return with_axes(pd.concat(frames, ignore_index=True))


def _op_ns(
    rng: np.random.Generator, variant: str, op: str, key_len: np.ndarray, leaves: np.ndarray
) -> np.ndarray:
    """Synthetic wall time (ns) of ``op`` under ``variant``."""
    evictor, matcher = AXES[variant]["evictor"], AXES[variant]["matcher"]
    n = key_len.size
    if op == "evict":
        base = 40.0 * leaves if evictor == "heapify" else 300.0 * np.log2(leaves + 1.0)
    elif op == "match_prefix":
        base = 3.0 * key_len if matcher == "linear" else 150.0 * np.log2(key_len + 1.0)
    elif op == "insert":
        base = 2.0 * key_len + 500.0
    elif op == "build_extend":
        base = 50.0 * key_len
    else:
        base = np.full(n, 200.0)
    return np.maximum(base * _noise(rng, n), 1.0).astype(np.int64)


def make_ops(seed: int = 99, counts: dict[str, int] | None = None) -> pd.DataFrame:
    """Per-op table (docs/CONTRACTS.md) for all :data:`VARIANTS`."""
    counts = counts if counts is not None else {**OP_COUNTS, **OP_COUNTS_EXTRA}
    rng = np.random.default_rng(seed)
    frames = []
    for variant in VARIANTS:
        for op, n in counts.items():
            key_len = np.exp(rng.uniform(np.log(16), np.log(32768), n)).astype(np.int64)
            leaves = np.exp(rng.uniform(np.log(8), np.log(100_000), n)).astype(np.int64)
            ns = _op_ns(rng, variant, op, key_len, leaves)
            frames.append(
                pd.DataFrame(
                    {
                        "variant": [variant] * n,
                        "op": [op] * n,
                        "ns": ns,
                        "key_len": key_len,
                        "result": (key_len * rng.random(n)).astype(np.int64),
                        "tree_nodes": (leaves * 2).astype(np.int64),
                        "tree_tokens": (leaves * 600).astype(np.int64),
                        "evictable_leaves": leaves,
                        "sim_time_s": np.sort(rng.uniform(0.0, 60.0, n)),
                    }
                )
            )
    return with_axes(pd.concat(frames, ignore_index=True))


@pytest.fixture
def requests_df() -> pd.DataFrame:
    """Synthetic per-request table, 4 variants x 300 requests."""
    return make_requests()


@pytest.fixture
def ops_df() -> pd.DataFrame:
    """Synthetic per-op table, 4 variants x 5 ops."""
    return make_ops()


@pytest.fixture
def equivalence_ok() -> dict:
    """A passing equivalence result for the synthetic run."""
    return {"ok": True, "n_requests": N_REQUESTS, "variants": list(VARIANTS), "first_diff": None}


@pytest.fixture
def equivalence_bad() -> dict:
    """A failing equivalence result whose first differing request is rid 17."""
    values = dict.fromkeys(VARIANTS, 1024)
    values["persistent-heap/galloping/chain"] = 1536
    return {
        "ok": False,
        "n_requests": N_REQUESTS,
        "variants": list(VARIANTS),
        "first_diff": {"rid": 17, "values": values},
    }


@pytest.fixture
def meta():
    """The run record as the harness passes it (``radixbench.reports.record.RunMeta``)."""
    from radixbench.reports.record import RunMeta

    return RunMeta(
        scenario="synthetic-smoke",
        requests=N_REQUESTS,
        seed=1234,
        device="cpu",
        clock="isolated",
        wall_s=12.34,
    )


@pytest.fixture
def ops_factory():
    """The :func:`make_ops` builder, for tests that need a custom op mix."""
    return make_ops


def make_timeseries(seed: int = 7, steps: int = 200) -> pd.DataFrame:
    """Time-series table (docs/CONTRACTS.md, stem ``timeseries``) for all :data:`VARIANTS`:
    prefill/decode steps with a queue that builds up and drains and KV use below capacity."""
    rng = np.random.default_rng(seed)
    capacity = 200_000
    frames = []
    for variant in VARIANTS:
        t = np.cumsum(rng.uniform(0.01, 0.05, steps))
        used = np.minimum(np.cumsum(rng.integers(0, 4000, steps)), capacity).astype(np.int64)
        queue = np.maximum(0, (20 * np.sin(np.linspace(0, 3, steps))).astype(np.int64))
        frames.append(
            pd.DataFrame(
                {
                    "variant": [variant] * steps,
                    "sim_time_s": t,
                    "step": np.where(np.arange(steps) % 3 == 0, "prefill", "decode").tolist(),
                    "batch_size": rng.integers(1, 64, steps).astype(np.int64),
                    "new_tokens": rng.integers(1, 8192, steps).astype(np.int64),
                    "step_s": rng.uniform(0.01, 0.05, steps),
                    "queue_len": queue,
                    "running": rng.integers(1, 64, steps).astype(np.int64),
                    "kv_used_tokens": used,
                    "kv_capacity_tokens": np.full(steps, capacity, dtype=np.int64),
                    "evictable_tokens": used // 2,
                    "protected_tokens": used - used // 2,
                }
            )
        )
    return with_axes(pd.concat(frames, ignore_index=True))


def make_metrics() -> pd.DataFrame:
    """Serving-metrics table (vLLM names), one row per variant."""
    n = len(VARIANTS)
    return with_axes(
        pd.DataFrame(
            {
                "variant": list(VARIANTS),
                "request_throughput": np.linspace(5.0, 6.0, n),
                "output_throughput": np.linspace(900.0, 1000.0, n),
                "mean_ttft_ms": np.linspace(120.0, 100.0, n),
                "median_ttft_ms": np.linspace(110.0, 90.0, n),
                "p99_ttft_ms": np.linspace(400.0, 350.0, n),
                "mean_tpot_ms": np.full(n, 12.0),
                "prefix_hit_rate_all": np.full(n, 0.41),
                "prefix_hit_rate_last_half": np.full(n, 0.52),
                "retractions": np.zeros(n, dtype=np.int64),
            }
        )
    )


@pytest.fixture
def timeseries_df() -> pd.DataFrame:
    """Synthetic time-series table, 4 variants x 200 steps."""
    return make_timeseries()


@pytest.fixture
def metrics_df() -> pd.DataFrame:
    """Synthetic serving-metrics table, one row per variant."""
    return make_metrics()


@pytest.fixture(scope="module")
def rendered_run(tmp_path_factory) -> tuple[dict, pd.DataFrame]:
    """One full :func:`write_report` of the synthetic run with time series and metrics (50
    bootstrap resamples), shared by a test module: ``(result, metrics frame)``."""
    from radixbench.reports.pipeline import write_report

    meta = {
        "scenario": "synthetic-smoke",
        "requests": N_REQUESTS,
        "seed": 1234,
        "wall_s": 1.0,
        "max_running": 64,
    }
    eq = {"ok": True, "n_requests": N_REQUESTS, "variants": list(VARIANTS), "first_diff": None}
    metrics = make_metrics()
    result = write_report(
        tmp_path_factory.mktemp("rendered"),
        make_requests(),
        make_ops(),
        meta,
        eq,
        timeseries=make_timeseries(),
        metrics=metrics,
        n_resamples=50,
    )
    return dict(result), metrics
