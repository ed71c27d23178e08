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
# # Trace exploration
#
# What did the replayed workload look like? Arrival rate, input/output lengths, how much of
# each prompt was a cached prefix, and how the prefix hit rate evolved. Loads the per-request
# table of one run folder (`RADIXBENCH_RUN`, default: the newest under `runs/`).

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
from _nbutil import run_dir, show

from radixbench.harness.experiments.rerender import load_run

RUN = run_dir()
run = load_run(RUN)
req = run["requests"]
one = req[req["variant"] == req["variant"].iloc[0]].sort_values("arrival_s")
print(f"run {RUN}: {len(one)} requests, {req['variant'].nunique()} variants")
print(json.dumps({k: run["meta"].get(k) for k in ("scenario", "seed", "device")}, indent=1))

# %%
one[["input_len", "output_len", "prefix_hit_tokens", "ttft_s", "e2e_s"]].describe()

# %% [markdown]
# ## Arrivals and lengths

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 4))
span = max(one["arrival_s"].max(), 1.0)
axes[0].hist(one["arrival_s"], bins=max(5, int(span // 5)))
axes[0].set(title="arrivals", xlabel="arrival time (s)", ylabel="requests per bin (count)")
axes[1].hist(one["input_len"], bins=40)
axes[1].set(title="input length", xlabel="input length (tokens)", ylabel="requests (count)")
axes[2].hist(one["output_len"], bins=40)
axes[2].set(title="output length", xlabel="output length (tokens)", ylabel="requests (count)")
show(fig, "arrivals_lengths")

# %% [markdown]
# ## Prefix hits: per request and over time

# %%
done = one[one["status"] == "finished"]
frac = np.where(done["input_len"] > 0, done["prefix_hit_tokens"] / done["input_len"], 0.0)
cum = np.cumsum(done["prefix_hit_tokens"]) / np.maximum(np.cumsum(done["input_len"]), 1)
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
axes[0].hist(frac, bins=40)
axes[0].set(title="prefix hit fraction per request", xlabel="hit tokens / input tokens",
            ylabel="requests (count)")
axes[1].plot(done["arrival_s"], cum)
ceiling = run["meta"].get("hit_rate_ceiling")
if isinstance(ceiling, dict) and ceiling.get("all") is not None:
    axes[1].axhline(ceiling["all"], ls="--", color="k", label="ceiling")
    axes[1].legend()
axes[1].set(title="cumulative prefix hit rate", xlabel="arrival time (s)",
            ylabel="hit rate (fraction)", ylim=(0, 1))
show(fig, "prefix_hits")

# %% [markdown]
# ## Latency against prompt length

# %%
fig, ax = plt.subplots(figsize=(7, 4))
ax.scatter(done["input_len"] - done["prefix_hit_tokens"], done["ttft_s"], s=6, alpha=0.5)
ax.set(xscale="log", yscale="log", title="TTFT vs uncached prompt tokens",
       xlabel="input - prefix hit (tokens)", ylabel="TTFT (s)")
show(fig, "ttft_vs_uncached")
