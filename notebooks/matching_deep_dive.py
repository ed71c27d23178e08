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
# # Matching deep-dive
#
# `match_prefix` walks the radix tree and compares the key against each node's tokens.
# SGLang's `_key_match_paged` / `_key_match_page_size1` compare token by token (`linear`);
# `galloping` compares exponentially growing spans. This notebook splits the cost by key
# length and by matched length, and shows the speed-up per key-length bin.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from _nbutil import run_dir, show

from radixbench.harness.experiments.rerender import load_run
from radixbench.reports.plots import fit_loglog_slope

RUN = run_dir()
ops = load_run(RUN)["ops"]
match = ops[ops["op"] == "match_prefix"].copy()
match["matcher"] = match["variant"].str.split("/").str[1]
match["hit_fraction"] = np.where(match["key_len"] > 0, match["result"] / match["key_len"], 0.0)
print(f"run {RUN}: {len(match)} match_prefix calls; matchers {sorted(match['matcher'].unique())}")

# %% [markdown]
# ## Cost against key length and against matched length (log-log, fitted slope)

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for ax, col, label in zip(axes, ["key_len", "result"], ["key length", "matched length"]):
    for matcher, g in match.groupby("matcher"):
        g = g[(g[col] > 0) & (g["ns"] > 0)]
        slope = fit_loglog_slope(g[col].to_numpy(), g["ns"].to_numpy())
        ax.scatter(g[col], g["ns"], s=5, alpha=0.4, label=f"{matcher} (slope {slope:.2f})")
    ax.set(xscale="log", yscale="log", title=f"match_prefix latency vs {label}",
           xlabel=f"{label} (tokens)", ylabel="latency (ns)")
    ax.legend()
show(fig, "match_cost")

# %% [markdown]
# ## Median speed-up per key-length bin (linear / galloping)

# %%
bins = np.unique(np.geomspace(1, max(2, match["key_len"].max() + 1), 12).astype(int))
match["bin"] = pd.cut(match["key_len"], bins, include_lowest=True)
med = match.pivot_table(index="bin", columns="matcher", values="ns", aggfunc="median",
                        observed=True)
if {"linear", "galloping"} <= set(med.columns):
    med["speedup"] = med["linear"] / med["galloping"]
med

# %%
fig, ax = plt.subplots(figsize=(7, 4))
if "speedup" in med:
    ax.bar([str(b) for b in med.index], med["speedup"])
    ax.axhline(1.0, color="k", lw=1)
    ax.tick_params(axis="x", rotation=60)
else:
    ax.text(0.5, 0.5, "needs both linear and galloping", ha="center", transform=ax.transAxes)
ax.set(title="median match_prefix speed-up by key length", xlabel="key length bin (tokens)",
       ylabel="linear / galloping (ratio)")
show(fig, "match_speedup_bins")

# %% [markdown]
# ## How much of each key is matched?

# %%
fig, ax = plt.subplots(figsize=(7, 4))
first = match[match["variant"] == match["variant"].iloc[0]]
ax.hist(first["hit_fraction"], bins=40)
ax.set(title="matched fraction of the key per call", xlabel="matched / key length (fraction)",
       ylabel="calls (count)")
show(fig, "hit_fraction")
