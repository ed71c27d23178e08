"""Does any bundled scenario reach SGLang PR #6907's claimed saving? (docs/PR6907-CHECK.md)

Runs ``radixbench compare SCENARIO --evictors heapify,persistent-heap --matchers galloping
--flatten numpy --clock coupled`` for every bundled scenario (or ``--scenarios``) and prints one
Markdown table: evict calls and calls per request, the median / max evictable leaves and median
tree nodes before an evict call, the median evict ns of each evictor, the mean E2E latency
under heapify and the mean-E2E saving of persistent-heap (the PR claims 82 ms per request), and
whether the run was overloaded (the report's load line). Each run writes to a temporary folder.

    python scripts/pr6907_scenarios.py
    python scripts/pr6907_scenarios.py --scenarios eviction-pressure,azure-conv
    python scripts/pr6907_scenarios.py --radixbench "python -m radixbench.harness"
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from radixbench.harness.config.scenario import bundled_scenarios
from radixbench.reports.markdown import pipe_table

BASE, CAND = "heapify/galloping/numpy", "persistent-heap/galloping/numpy"


def run_one(cmd: list[str], scenario: str) -> dict[str, object]:
    """One coupled-clock compare of the two evictors; the row of the table (or an error)."""
    with tempfile.TemporaryDirectory() as out:
        argv = [*cmd, "compare", scenario, "--evictors", "heapify,persistent-heap",
                "--matchers", "galloping", "--flatten", "numpy", "--clock", "coupled",
                "--no-progress", "--out", out]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        runs = sorted(Path(out).glob("*/ops.parquet"))
        if proc.returncode not in (0, 1) or not runs:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
            return {"scenario": scenario, "error": tail[0]}
        run = runs[0].parent
        ops = pd.read_parquet(run / "ops.parquet")
        req = pd.read_parquet(run / "requests.parquet")
    ev = ops[ops["op"] == "evict"]
    n_req = int(req[req["variant"] == BASE]["rid"].nunique())
    base_ev, cand_ev = ev[ev["variant"] == BASE], ev[ev["variant"] == CAND]
    done = req[req["status"] == "finished"]
    e2e = (done["finish_s"] - done["arrival_s"]).groupby(done["variant"]).mean()
    overloaded = "OVERLOADED" in proc.stdout  # the answer's load line
    row: dict[str, object] = {
        "scenario": scenario,
        "requests": n_req,
        "evict calls": len(base_ev),
        "evicts/req": round(len(base_ev) / max(n_req, 1), 2),
        "leaves (median / max)": (
            f"{base_ev['evictable_leaves'].median():,.0f} / {base_ev['evictable_leaves'].max():,}"
            if len(base_ev)
            else "-"
        ),
        "nodes (median)": f"{base_ev['tree_nodes'].median():,.0f}" if len(base_ev) else "-",
        "evict µs heapify / persistent (median)": (
            f"{base_ev['ns'].median() / 1e3:,.1f} / {cand_ev['ns'].median() / 1e3:,.1f}"
            if len(base_ev)
            else "-"
        ),
        "mean E2E heapify (s)": round(float(e2e.get(BASE, float("nan"))), 3),
        "E2E saving (ms)": round(1e3 * float(e2e.get(BASE, 0.0) - e2e.get(CAND, 0.0)), 1),
        "load": "overloaded" if overloaded else "served",
    }
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", help="comma list (default: every bundled scenario)")
    p.add_argument("--radixbench", help="command to run (default: the one beside this python)")
    args = p.parse_args(argv)
    script = Path(sys.executable).with_name("radixbench")
    cmd = shlex.split(args.radixbench) if args.radixbench else [str(script)]
    names = args.scenarios.split(",") if args.scenarios else list(bundled_scenarios())
    rows = []
    for name in names:
        rows.append(run_one(cmd, name))
        print(f"{name}: done", file=sys.stderr, flush=True)
    print(pipe_table(pd.DataFrame(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
