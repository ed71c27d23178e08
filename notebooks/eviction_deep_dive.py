# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Eviction deep-dive
#
# How much does one `evict` call cost under each evictor, and how does that cost grow with the
# number of evictable leaves? `RadixCache.evict` of sglang 0.5.23 rebuilds a heap over all
# evictable leaves on every call (`heapify`, O(L)); before PR #14339 it first walked the whole
# tree to find them (`heapify-walk`, O(N)); `persistent-heap` keeps the heap between calls.
# Loads one run folder (`RADIXBENCH_RUN`, default: the newest under `runs/`).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from _nbutil import run_dir, show

from radixbench.harness.experiments.rerender import load_run
from radixbench.reports.plots import fit_loglog_slope

RUN = run_dir()
run = load_run(RUN)
ops = run["ops"]
evict = ops[ops["op"] == "evict"].copy()
evict["evictor"] = evict["variant"].str.split("/").str[0]
print(f"run {RUN}: {len(evict)} evict calls over {evict['variant'].nunique()} variants")

# %% [markdown]
# ## Cost per call: median, p99 and the log-log slope against evictable leaves
# A slope near 1 means the call is linear in the number of evictable leaves.

# %%
rows = []
for evictor, g in evict.groupby("evictor"):
    rows.append({
        "evictor": evictor,
        "calls": len(g),
        "p50_ns": g["ns"].median(),
        "p99_ns": g["ns"].quantile(0.99),
        "slope_vs_leaves": fit_loglog_slope(g["evictable_leaves"].to_numpy(), g["ns"].to_numpy()),
        "evicted_tokens": int(g["result"].sum()),
    })
summary = pd.DataFrame(rows)
summary

# %%
fig, ax = plt.subplots(figsize=(7, 4.5))
for evictor, g in evict.groupby("evictor"):
    g = g[(g["evictable_leaves"] > 0) & (g["ns"] > 0)]
    ax.scatter(g["evictable_leaves"], g["ns"], s=5, alpha=0.4, label=evictor)
ax.set(xscale="log", yscale="log", title="evict latency vs evictable leaves",
       xlabel="evictable leaves before the call (count)", ylabel="evict latency (ns)")
ax.legend()
show(fig, "evict_vs_leaves")

# %% [markdown]
# ## When does eviction happen? Evicted tokens over simulated time

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for variant, g in evict.sort_values("sim_time_s").groupby("variant"):
    ax.plot(g["sim_time_s"], np.cumsum(g["result"]), label=variant)
ax.set(title="cumulative evicted tokens", xlabel="simulated time (s)",
       ylabel="evicted tokens (cumulative)")
ax.legend(fontsize="x-small")
show(fig, "evicted_over_time")

# %% [markdown]
# ## Evictable vs protected KV over time (runs with a `timeseries` table)

# %%
ts = run["timeseries"]
fig, ax = plt.subplots(figsize=(7, 4))
if ts is not None and {"evictable_tokens", "protected_tokens"} <= set(ts.columns):
    first = ts[ts["variant"] == ts["variant"].iloc[0]]
    ax.stackplot(first["sim_time_s"], first["protected_tokens"], first["evictable_tokens"],
                 labels=["protected (lock_ref > 0)", "evictable"])
    ax.legend()
else:
    ax.text(0.5, 0.5, "no timeseries table in this run", ha="center", transform=ax.transAxes)
ax.set(title="KV tokens held by the tree", xlabel="simulated time (s)", ylabel="tokens")
show(fig, "evictable_protected")
