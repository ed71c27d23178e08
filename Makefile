# radixbench — the two commands of the README, and the checks CI runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast lint install clean bench bench-sim

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch is pinned to a range (>=2.4,<2.14) that the local CPU wheel satisfies.
# The real SGLang (radixbench.cache.sglang.legacy_load runs its RadixCache) is a separate step with
# --no-deps: only its pure-Python radix-cache modules are loaded, while its dependencies (CUDA
# kernels, triton, flashinfer, a GPU torch...) are gigabytes and need a GPU. A pyproject.toml
# optional-dependency group cannot say --no-deps, hence no `sglang` extra. Offline, the step
# warns and goes on: the tests that need sglang skip with the reason. msgspec (one of sglang's
# own dependencies, pure C, no further deps) is needed by its UnifiedRadixCache and tree cores
# (radixbench.cache.sglang.unified_load), the cache sglang 0.5.23 serves with; pyzmq (one of its
# dependencies, a self-contained wheel) by its disaggregation/kv_events.py, which the served
# cache imports for its KV-event classes (without it the demo's sglang reference cannot load).
SGLANG_PIN := sglang==0.5.23
SGLANG_EXTRA := msgspec pyzmq
# The demo needs only the runtime dependencies (.installed-run); the tests and lint add the dev
# extras (.installed), so a fresh `make demo` does not wait for pytest, mypy or jupyter.
$(VENV)/.installed-run: pyproject.toml Makefile | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	$(BIN)/python -m pip install -q --no-deps '$(SGLANG_PIN)' $(SGLANG_EXTRA) \
		|| echo "sglang 0.5.23 not installed: SGLang fidelity tests will be skipped"
	touch $@

$(VENV)/.installed: $(VENV)/.installed-run
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed-run
	$(BIN)/radixbench compare

# The test suite without the slow tests; --durations names the 25 slowest (CI runs this).
test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m "not slow" --durations=25

# The same without the end-to-end tests (-m e2e: Dask clusters, scalene, Jupyter kernels,
# headless Chromium): the quick check while editing.
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m "not slow and not e2e"

# Cache microbenchmarks (a few minutes): prints the tables, writes plots to runs/bench and
# regenerates BENCHMARKS.md; then radixbench against sglang 0.5.23's served cache (Rust and
# Python tree cores, legacy RadixCache) in one process, into its section of BENCHMARKS.md (the
# SGLang columns are left out, with the reason, where sglang is not installed). Each prints the
# calibration figure of its run. Run it on a quiet machine.
bench: $(VENV)/.installed
	$(BIN)/radixbench bench cache --out runs/bench --markdown BENCHMARKS.md
	$(BIN)/radixbench bench served --markdown BENCHMARKS.md

# Simulator speed (a few minutes): the whole Mooncake conversation trace for one variant,
# start-up to the first simulated event, `radixbench --help`, and the demo run's report writing;
# prints the figures and refreshes the "Simulator speed" section of BENCHMARKS.md.
bench-sim: $(VENV)/.installed
	$(BIN)/radixbench bench sim --markdown BENCHMARKS.md

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
