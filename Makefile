# Two entry points a new user needs: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
SF ?= 0.01
DATA := data/tpch/sf$(SF)

.PHONY: demo test lint setup data check-java clean chromium ui

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

test: setup data lint chromium
	EMBER_TPCH=$(abspath $(DATA)) $(BIN)/python -m pytest -q

# The web page's browser tests drive Debian's Chromium (a test tool's own browser download
# cannot work here): installed with apt-get, as root, only when it is missing.
chromium:
	@test -x /usr/bin/chromium || { \
	  [ "$$(id -u)" = 0 ] || { echo "make chromium: /usr/bin/chromium is missing; as root: apt-get install -y chromium" >&2; exit 1; }; \
	  echo "installing Debian's chromium for the browser tests"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
	    || { echo "make chromium: apt-get could not install chromium" >&2; exit 1; }; }

# The page's bundle in ember/ui/static is committed (pip installs work without Node);
# rebuild it after changing frontend/ (a test compares its recorded source fingerprint).
ui:
	cd frontend && npm ci --no-audit --no-fund && npm run check && npm run build

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache .hypothesis
