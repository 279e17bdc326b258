# `make demo` and `make test` each create .venv when it is missing, install, and run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/phasetop

screenshots: $(STAMP)
	$(BIN)/python scripts/screenshots.py

test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/fidelity.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
