# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help venv demo test lint format bench clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[all]"
	touch $(STAMP)

venv: $(STAMP) ## create/refresh the local virtualenv from constraints.txt

demo: $(STAMP) ## run the embedded demo (two local brokers, Spark local, Delta on disk)
	$(BIN)/mirror validate examples/mm2.properties
	$(BIN)/mirror demo

lint: $(STAMP) ## ruff lint + format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP) ## apply ruff formatting and fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint ## lint, then the full test suite (unit, integration, notebooks)
	$(BIN)/pytest

bench: $(STAMP) ## run the benchmarks in bench/ (not part of the tests)
	$(BIN)/python bench/replication.py

clean: ## remove the virtualenv and local state
	rm -rf $(VENV) mirror-state .pytest_cache .ruff_cache
