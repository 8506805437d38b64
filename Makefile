# Two entry points a new user needs: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
SF ?= 0.01
DATA := data/tpch/sf$(SF)
TPCDS_SF ?= 0.01
TPCDS := data/tpcds/sf$(TPCDS_SF)
TPCDS_GEN := $(VENV)/tpcds

.PHONY: demo test test-fast test-spark40 lint setup data tpcds check-java clean chromium postgres ui jar client

check-java:
	@scripts/check_java.sh

$(BIN)/.stamp: pyproject.toml | check-java
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

setup: check-java $(BIN)/.stamp

$(DATA)/lineitem.parquet: | $(BIN)/.stamp
	$(BIN)/python -m devkit.demo --generate-only --scale $(SF) --data $(DATA)

data: $(DATA)/lineitem.parquet

# TPC-DS comes from DuckDB's tpcds extension, which PyPI ships only for DuckDB 1.5.5:
# the generator gets a virtualenv of its own beside ember's (which has a newer DuckDB).
$(TPCDS_GEN)/.stamp: | $(BIN)/.stamp
	$(PYTHON) -m venv $(TPCDS_GEN)
	$(TPCDS_GEN)/bin/pip install -q duckdb==1.5.5 duckdb-extension-tpcds==1.5.5 duckdb-extensions==1.5.5
	@touch $@

$(TPCDS)/queries: | $(TPCDS_GEN)/.stamp
	$(TPCDS_GEN)/bin/python scripts/tpcds_generate.py $(TPCDS_SF) $(TPCDS)

tpcds: $(TPCDS)/queries

demo: setup data
	$(BIN)/python -m devkit.demo --scale $(SF) --data $(DATA)

# ember's Java helpers ship prebuilt in the package (users need no JDK); rebuild the jar after
# changing jvm/src (a test compares its recorded source fingerprint). Needs a JDK's javac.
jar: setup
	$(BIN)/python scripts/build_jar.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

test: setup data tpcds lint chromium postgres client
	EMBER_TPCH=$(abspath $(DATA)) EMBER_TPCDS=$(abspath $(TPCDS)) $(BIN)/python -m pytest -q
	$(MAKE) test-spark40

# ember supports Spark 4.0 to 4.3 with one jar (jvm/shims): .venv has the newest, and the
# oldest gets a virtualenv of its own (beside the TPC-DS generator's), where the jar's tests
# and the operator and TPC-H suites run again (`make test` runs them after the main suite).
SPARK40 := $(VENV)/spark40

$(SPARK40)/.stamp: pyproject.toml | check-java
	$(PYTHON) -m venv $(SPARK40)
	$(SPARK40)/bin/pip install -q --upgrade pip
	$(SPARK40)/bin/pip install -q -e '.[dev]' pyspark==4.0.1
	@touch $@

# The TPC-H suite's 44 queries run there; its read-at-trace and re-parameterized cases, which
# exercise ember's own rules rather than the boundary to Spark, run on the newest only.
test-spark40: $(SPARK40)/.stamp data
	EMBER_TPCH=$(abspath $(DATA)) $(SPARK40)/bin/python -m pytest -q tests/engines/spark/test_jar.py tests/engines/spark/test_plan_in.py tests/capture/test_operators.py tests/capture/test_keyed.py tests/tpch/test_tpch.py -k "not read_at_trace and not sql_variant"

# A Spark Connect client with no JVM: ember with its `client` extra (`pyspark-client`: PySpark
# without the JVM's jars or py4j), in a virtualenv of its own. tests/test_connect.py runs a
# capture from it against the tests' Connect server.
CLIENT := $(VENV)/client

$(CLIENT)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(CLIENT)
	$(CLIENT)/bin/pip install -q --upgrade pip
	$(CLIENT)/bin/pip install -q -e '.[client]'
	@touch $@

client: $(CLIENT)/.stamp

# The fast tier, while editing (about a minute; `make test` runs everything): each test that
# starts no JVM and needs neither Chromium nor TPC-DS (tests/conftest.py marks the others
# `jvm`), and ember's doctests, with Hypothesis's `dev` profile unless HYPOTHESIS_PROFILE or
# CI=true says otherwise. Its `java` refuses to start: a test that starts a JVM unmarked fails.
NOJAVA := $(VENV)/nojava

$(NOJAVA)/java:
	@mkdir -p $(NOJAVA)
	@printf '#!/bin/sh\necho "make test-fast: no JVM in the fast tier ($$0 $$*): mark the test jvm (tests/conftest.py)" >&2\nexit 1\n' > $@
	@chmod +x $@
	@ln -sf java $(NOJAVA)/javac

test-fast: setup postgres $(NOJAVA)/java
	JAVA_HOME= PATH="$(abspath $(NOJAVA)):$$PATH" $(BIN)/python -m pytest -q -m "not jvm" --doctest-modules tests ember

# The web page's browser tests drive Debian's Chromium (a test tool's own browser download
# cannot work here): installed with apt-get, as root, only when it is missing.
chromium:
	@test -x /usr/bin/chromium || { \
	  [ "$$(id -u)" = 0 ] || { echo "make chromium: /usr/bin/chromium is missing; as root: apt-get install -y chromium" >&2; exit 1; }; \
	  echo "installing Debian's chromium for the browser tests"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
	    || { echo "make chromium: apt-get could not install chromium" >&2; exit 1; }; }

# The JDBC tests' throwaway PostgreSQL server (devkit/postgres.py) runs Debian's binaries, and
# Spark reads it with Debian's JDBC driver: each installed with apt-get, as root, when missing.
postgres:
	@missing=; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing=postgresql; \
	test -f /usr/share/java/postgresql.jar || missing="$${missing:+$$missing }libpostgresql-jdbc-java"; \
	[ -z "$$missing" ] || { \
	  [ "$$(id -u)" = 0 ] || { echo "make postgres: PostgreSQL's server or JDBC driver is missing; as root: apt-get install -y $$missing" >&2; exit 1; }; \
	  echo "installing Debian's $$missing for the JDBC tests"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q $$missing >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; } \
	    || { echo "make postgres: apt-get could not install $$missing" >&2; exit 1; }; }

# The page's bundle in ember/ui/static is committed (pip installs work without Node);
# rebuild it after changing frontend/ (a test compares its recorded source fingerprint).
ui:
	cd frontend && npm ci --no-audit --no-fund && npm run check && npm run build

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache .hypothesis
