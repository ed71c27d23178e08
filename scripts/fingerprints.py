"""Fingerprints of seeded runs: proof that a refactor left every result bit-identical.

Runs a fixed set of configurations through the ``radixbench`` command line (so it works on any
version of the code that has the same commands), hashes every deterministic column of the
tables each run writes, and compares two such fingerprint files:

    python scripts/fingerprints.py run before.json            # on the old code
    python scripts/fingerprints.py run after.json             # on the new code
    python scripts/fingerprints.py diff before.json after.json

Tables fingerprinted: ``requests``, ``timeseries`` (the scheduler's steps), ``ops`` without the
measured ``ns``, and ``metrics`` without measured CPU and wall times (``measured_cpu_s``,
``wall_s``, ``events_per_s``; a router's decision time ``route_p50_us`` / ``route_p99_us``),
each without the rows of an A/A replica (``replica`` column);
sweeps and studies by their cells' / points' tables, replays by their ``summary`` and
``requests``. Each column is hashed on its own (sha256 of its values), so a column added later
is reported as added, not as a difference: ``diff`` fails (exit 1) when a column both files
have differs, when a table or configuration is missing, or when a row count changed.
``--only NAME[,NAME]`` runs some configurations; ``--radixbench CMD`` runs another
installation (default: the ``radixbench`` beside this Python).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

#: Columns whose values are measurements (wall clock), never deterministic.
MEASURED = {"ns", "measured_cpu_s", "wall_s", "events_per_s", "point_wall_s", "tokens_s",
            "route_p50_us", "route_p99_us"}  # fmt: skip

STUDY = """description = "fingerprint study: one point"
family = "eviction"
scenario = "eviction-pressure"
seed = 0
[base]
"variants.matchers" = ["galloping"]
"variants.flatten" = ["numpy"]
[variants]
baseline = "heapify"
candidates = ["persistent-heap"]
[points.quick]
"sim.kv_capacity_tokens" = [8000]
"workload.sessions" = [570]
"""

GRID = """description = "fingerprint sweep"
scenario = "mooncake-conversation"
[base]
arrivals.max_requests = 150
scheduler.max_running = 32
[grid]
"sim.kv_capacity_tokens" = [150000, 300000]
[variants]
evictors = ["heapify", "persistent-heap"]
matchers = ["galloping"]
flatten = ["numpy"]
seeds = [0]
"""

#: name -> (subcommand words, kind). Kinds: compare, sweep, study, replay.
CONFIGS: dict[str, tuple[list[str], str]] = {
    "whole-trace": (
        ["compare", "mooncake-conversation", "--window", "100000", "--evictors",
         "persistent-heap", "--matchers", "galloping", "--flatten", "numpy"],
        "compare",
    ),
    "demo": (["compare", "--evictors", "heapify,persistent-heap", "--reference", "none"],
             "compare"),
    "paged": (["compare", "mooncake-conversation", "--requests", "1500", "--page-size", "16"],
              "compare"),
    "chunked": (["compare", "mooncake-conversation", "--requests", "600",
                 "--chunked-prefill-size", "2048"], "compare"),
    "retraction": (["compare", "mooncake-conversation", "--requests", "600", "--kv-capacity",
                    "150000", "--max-running", "128"], "compare"),
    "paged-chunked-lpm": (["compare", "mooncake-conversation", "--requests", "1500",
                           "--page-size", "16", "--chunked-prefill-size", "2048",
                           "--sched-policy", "lpm", "--kv-capacity", "200000"], "compare"),
    "impl-sglang": (["compare", "eviction-pressure", "--requests", "1500", "--impl",
                     "radixbench,sglang", "--evictors", "heapify,persistent-heap"], "compare"),
    "impl-sglang-legacy": (["compare", "eviction-pressure", "--requests", "1500", "--impl",
                            "radixbench,sglang-legacy", "--evictors", "heapify,persistent-heap",
                            "--set", "cache.split_rule=legacy"], "compare"),
    "few-shot": (["compare", "few-shot", "--requests", "400"], "compare"),
    "cluster": (["compare", "mooncake-cluster", "--requests", "600", "--instances", "4",
                 "--routers", "cache-aware,round-robin,precise", "--page-size", "16"],
                "compare"),
    "cluster-flatten": (["compare", "mooncake-cluster", "--requests", "300", "--instances", "2",
                         "--routers", "cache-aware", "--flatten", "numpy,chain"], "compare"),
    "sweep": (["sweep", "{grid}", "--workers", "1"], "sweep"),
    "study": (["study", "{study}", "--quick", "--workers", "1"], "study"),
    "replay": (["replay", "eviction-pressure", "--requests", "3000"], "replay"),
}  # fmt: skip


def column_hash(s: pd.Series) -> str:
    """sha256 of a column's values: numbers as their bytes, anything else as text."""
    h = hashlib.sha256(str(s.dtype.kind if hasattr(s.dtype, "kind") else "O").encode())
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        h.update(np.ascontiguousarray(s.to_numpy(dtype=np.float64, na_value=np.nan)).tobytes())
    else:
        h.update("\0".join("<NA>" if pd.isna(v) else str(v) for v in s).encode())
    return h.hexdigest()[:16]


def table_print(df: pd.DataFrame) -> dict[str, object]:
    if "replica" in df.columns:  # an A/A replica's rows are an addition, like a new column
        df = df[df["replica"].isna()].drop(columns="replica").reset_index(drop=True)
    cols = {c: column_hash(df[c]) for c in df.columns if c not in MEASURED}
    return {"rows": len(df), "columns": cols}


def newest(folder: Path) -> Path:
    runs = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return max(runs, key=lambda p: p.stat().st_mtime)


def run_tables(d: Path, stems: tuple[str, ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for stem in stems:
        f = d / f"{stem}.parquet"
        if f.is_file():
            out[stem] = table_print(pd.read_parquet(f))
    return out


COMPARE_TABLES = ("requests", "timeseries", "ops", "metrics")


def fingerprint(name: str, cmd: list[str], work: Path) -> dict[str, object]:
    words, kind = CONFIGS[name]
    out = work / name
    out.mkdir()
    (work / "grid.toml").write_text(GRID)
    (work / "study.toml").write_text(STUDY)
    args = [w.format(grid=work / "grid.toml", study=work / "study.toml") for w in words]
    flag = ["--out", str(out / "sweep")] if kind == "sweep" else ["--out", str(out)]
    full = [*cmd, *args, *flag, "--no-progress"]
    t0 = time.perf_counter()
    res = subprocess.run(full, capture_output=True, text=True, cwd=work, check=False)
    if res.returncode not in (0, 1):
        raise SystemExit(f"{name}: {shlex.join(full)} exited {res.returncode}:\n{res.stderr}")
    print(f"  {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if kind == "compare":
        return run_tables(newest(out), COMPARE_TABLES)
    if kind == "replay":
        return run_tables(newest(out), ("summary", "requests"))
    if kind == "sweep":
        cells = out / "sweep" / "cells"
        return {
            f"{c.name}/{k}": v
            for c in sorted(p for p in cells.iterdir() if not p.name.startswith("."))
            for k, v in run_tables(c, COMPARE_TABLES).items()
        }
    points = newest(out) / "points"
    return {
        f"{p.name}/{k}": v
        for p in sorted(points.iterdir())
        for k, v in run_tables(p, COMPARE_TABLES).items()
    }


def cmd_run(args: argparse.Namespace) -> int:
    names = args.only.split(",") if args.only else list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration {unknown[0]!r}; known: {', '.join(CONFIGS)}")
    cmd = (
        shlex.split(args.radixbench)
        if args.radixbench
        else [str(Path(sys.executable).with_name("radixbench"))]
    )
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="radixbench-fp-") as tmp:
        for name in names:
            result[name] = fingerprint(name, cmd, Path(tmp))
    text = json.dumps(result, indent=1, sort_keys=True)
    Path(args.file).write_text(text + "\n")
    print(f"wrote {args.file}: {len(result)} configurations")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    a, b = (json.loads(Path(f).read_text()) for f in (args.before, args.after))
    bad = 0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print(f"{name}: only in {'after' if name in b else 'before'}")
            bad += 1
            continue
        ta, tb = a[name], b[name]
        same = added = 0
        for table in sorted(set(ta) | set(tb)):
            if table not in ta or table not in tb:
                print(f"{name}/{table}: only in {'after' if table in tb else 'before'}")
                bad += 1
                continue
            if ta[table]["rows"] != tb[table]["rows"]:
                print(f"{name}/{table}: rows {ta[table]['rows']} -> {tb[table]['rows']}")
                bad += 1
            ca, cb = ta[table]["columns"], tb[table]["columns"]
            for col in sorted((set(ca) | set(cb)) - MEASURED):  # files from before a MEASURED
                if col in ca and col in cb:
                    if ca[col] != cb[col]:
                        print(f"{name}/{table}.{col}: differs")
                        bad += 1
                    else:
                        same += 1
                elif col in cb:
                    added += 1
                else:
                    print(f"{name}/{table}.{col}: removed")
                    bad += 1
        print(f"{name}: {same} columns identical" + (f", {added} added" if added else ""))
    print("IDENTICAL" if not bad else f"{bad} DIFFERENCES")
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the configurations and write their fingerprints")
    r.add_argument("file")
    r.add_argument("--only", help="comma list of configurations")
    r.add_argument("--radixbench", help="command that runs radixbench")
    d = sub.add_parser("diff", help="compare two fingerprint files (exit 1 on a difference)")
    d.add_argument("before")
    d.add_argument("after")
    args = p.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    return cmd_run(args) if args.cmd == "run" else cmd_diff(args)


if __name__ == "__main__":
    sys.exit(main())
