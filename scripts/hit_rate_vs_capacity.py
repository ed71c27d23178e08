"""Prefix hit rate of every bundled scenario against the KV pool size.

Runs ``radixbench compare SCENARIO --kv-capacity C`` for one fast variant
(persistent-heap / memcmp / numpy: the variant does not change hits, the equivalence check
guarantees it) at ``--factors`` x the scenario's own capacity, and prints one Markdown table:
achieved hit rate per capacity, the infinite-cache ceiling over the same requests, and whether
the hit rate ever falls as the capacity grows. The hit rate of a run counts finished requests.

    python scripts/hit_rate_vs_capacity.py                      # every bundled scenario
    python scripts/hit_rate_vs_capacity.py --scenarios multi-turn,few-shot --factors 0.5,1,2
    python scripts/hit_rate_vs_capacity.py --radixbench "python -m radixbench.harness"

``--radixbench`` is the command to run (default: the ``radixbench`` beside this interpreter), so
the same script measures an older checkout too. Each run writes to a temporary folder.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import subprocess
import sys
import tempfile
import tomllib
from importlib import resources
from pathlib import Path

import pandas as pd


def scenario_capacity(name: str) -> int:
    """The bundled scenario's ``[cache] kv_capacity_tokens`` (400,000 when it sets none)."""
    text = resources.files("radixbench.workloads.scenarios").joinpath(f"{name}.toml").read_text()
    return int(tomllib.loads(text).get("cache", {}).get("kv_capacity_tokens", 400_000))


def run_one(cmd: list[str], scenario: str, capacity: int, extra: list[str]) -> dict[str, float]:
    """One compare run; returns hit rate, ceiling, finished and rejected requests."""
    with tempfile.TemporaryDirectory() as out:
        argv = [*cmd, "compare", scenario, "--kv-capacity", str(capacity), "--no-progress",
                "--out", out, "--evictors", "persistent-heap", "--matchers", "memcmp",
                "--flatten", "numpy", *extra]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        runs = sorted(Path(out).glob("*/summary_variants.parquet"))
        if proc.returncode not in (0, 1) or not runs:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
            return {"error": 1.0, "message": tail[0]}  # type: ignore[dict-item]
        row = pd.read_parquet(runs[0]).iloc[0]
        meta = json.loads((runs[0].parent / "config.json").read_text())
        ceiling = (meta.get("meta") or meta).get("hit_rate_ceiling", {}).get("all", float("nan"))
        return {
            "hit_rate": float(row["prefix_hit_rate"]),
            "ceiling": float(ceiling),
            "finished": float(row["finished"]),
            "rejected": float(row["rejected"]),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="", help="comma-separated (default: all bundled)")
    ap.add_argument("--factors", default="0.25,0.5,1,2,4", help="x the scenario's capacity")
    ap.add_argument("--radixbench", default=str(Path(sys.executable).with_name("radixbench")))
    ap.add_argument("--extra", default="", help="more compare arguments, e.g. '--requests 300'")
    args = ap.parse_args(argv)
    cmd = shlex.split(args.radixbench)
    names = [s for s in args.scenarios.split(",") if s] or sorted(
        p.name.removesuffix(".toml")
        for p in resources.files("radixbench.workloads.scenarios").iterdir()
        if p.name.endswith(".toml")
    )
    factors = [float(f) for f in args.factors.split(",")]
    print("| scenario | capacity (tokens) | " + " | ".join(f"x{f:g}" for f in factors)
          + " | ceiling | monotone |")  # fmt: skip
    print("|---|---|" + "---|" * len(factors) + "---|---|")
    for name in names:
        base = scenario_capacity(name)
        rates, ceiling, notes = [], float("nan"), []
        for f in factors:
            res = run_one(cmd, name, max(1, int(base * f)), shlex.split(args.extra))
            if "error" in res:
                rates.append(float("nan"))
                notes.append(f"x{f:g}: {res['message']}")
                continue
            rates.append(res["hit_rate"])
            ceiling = res["ceiling"]
            if res["rejected"]:
                notes.append(f"x{f:g}: {int(res['rejected'])} rejected")
        ok = [r for r in rates if r == r]
        monotone = all(b >= a - 1e-9 for a, b in itertools.pairwise(ok))
        cells = " | ".join("error" if r != r else f"{r:.3f}" for r in rates)
        note = f" ({'; '.join(notes)})" if notes else ""
        print(f"| {name} | {base:,} | {cells} | {ceiling:.3f} | {'yes' if monotone else 'NO'}"
              f"{note} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
