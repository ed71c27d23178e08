# radixbench — the two commands of the README, and the checks CI runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint install clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch is pinned to a range (>=2.4,<2.14) that the local CPU wheel satisfies.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/radixbench compare --requests 1000

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m "not slow"

# Cache microbenchmarks (a few minutes): prints the tables, writes plots to runs/bench and
# regenerates BENCHMARKS.md. Run it on a quiet machine.
bench: $(VENV)/.installed
	$(BIN)/radixbench bench cache --out runs/bench --markdown BENCHMARKS.md

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
