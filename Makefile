# The README's two commands: `make demo` and `make test`. Each sets up .venv when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PREDOPS_SHARED_DATA ?= $(abspath ../shared/data)

.PHONY: setup system-deps demo test lint typecheck layers unit clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

system-deps:
	bash scripts/system-deps.sh

demo: $(STAMP)
	$(BIN)/predops demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	rm -rf .typecheck && mkdir -p .typecheck/predops
	for d in core features models allocator policy pipelines serving; do ln -s ../../$$d .typecheck/predops/$$d; done
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP) system-deps
	$(BIN)/python -m pytest -q

test: lint typecheck layers unit

clean:
	rm -rf $(VENV) .typecheck workspace .pytest_cache .mypy_cache .ruff_cache
