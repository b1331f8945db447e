# The first two targets are what a new user runs: `make demo`, then `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast bench lint format venv clean

demo: $(STAMP)
	$(BIN)/nsight-analyze demo

# One worker process per core, at most 4 (each test's DuckDB uses every core as well).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4

# The quick loop for contributors: every test but those marked slow.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

lint: $(STAMP)
	$(BIN)/ruff format --check nsight_analyze tests benchmarks
	$(BIN)/ruff check nsight_analyze tests benchmarks

format: $(STAMP)
	$(BIN)/ruff format nsight_analyze tests benchmarks

venv: $(STAMP)

# Re-install whenever the project metadata changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,ncu,dask]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) build dist *.egg-info
