# Two entry points a new user needs: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
SF ?= 0.01
DATA := data/tpch/sf$(SF)

.PHONY: demo test lint setup data check-java clean

check-java:
	@scripts/check_java.sh

$(BIN)/.stamp: pyproject.toml | check-java
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

setup: check-java $(BIN)/.stamp

$(DATA)/lineitem.parquet: | $(BIN)/.stamp
	$(BIN)/python -m ember.demo --generate-only --scale $(SF) --data $(DATA)

data: $(DATA)/lineitem.parquet

demo: setup data
	$(BIN)/python -m ember.demo --scale $(SF) --data $(DATA)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

test: setup data lint
	EMBER_TPCH=$(abspath $(DATA)) $(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache .hypothesis
