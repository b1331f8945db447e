# The first two targets are what a new user runs: `make demo`, then `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast bench lint format docs venv clean

demo: $(STAMP)
	$(BIN)/nsight-analyze demo

# One worker process per core, at most 4 (each test's DuckDB uses every core as well); a worker
# that runs out of tests takes some of another's (worksteal), so the run does not end on one.
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist worksteal

# The quick loop for contributors: every test but those marked slow.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist worksteal -m "not slow"

# Runs every benchmark, then writes the "Latest run" section of docs/benchmarks.md from their output.
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# The whole tree (what .gitignore ignores left out), with the ruff that pyproject.toml pins.
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .

# docs/diagnose.md's Rules and Thresholds tables, written from the findings' @finding declarations.
docs: $(STAMP)
	$(BIN)/python -m nsight_analyze.rules.doc_tables

venv: $(STAMP)

# Re-install whenever the project metadata changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,ncu,dask]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) build dist *.egg-info
