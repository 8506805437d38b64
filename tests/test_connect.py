"""ember from a Spark Connect client with no JVM: a virtualenv holding `pyspark-client` and
ember but not `pyspark` (nor py4j; `make test` builds it, .venv/client) captures TPC-H Q3
on the tests' Connect server and saves the lineage; its every output row's backward trace
meets the DuckDB oracle. `ember.connect`'s settings are what a server needs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ember
import ember.connect
from devkit.tpch import QUERIES, TABLES
from tests.conftest import ROOT
from tests.oracle.compare import expected_backward, match_rows
from tests.oracle.tpch_lineage import KEYS, SOURCES

CLIENT = ROOT / ".venv" / "client" / "bin" / "python"
N = 3

JOB = """
import importlib.util, sys
for module in ("py4j", "pyspark.core", "pyspark.sql.classic"):
    assert importlib.util.find_spec(module) is None, f"{{module}} is here: not a client-only install"
from pyspark.sql import SparkSession
import ember

url, data, query, store = sys.argv[1:]
spark = SparkSession.builder.remote(url).getOrCreate()
for table in {tables!r}:
    spark.read.parquet(f"{{data}}/{{table}}.parquet").createOrReplaceTempView(table)
ember.capture(spark.sql(query)).save(store)
"""


def test_a_client_with_pyspark_client_alone_captures_over_connect(
    connect_server: str, tpch: Path, tpch_oracle: Callable[[int], pa.Table], tmp_path: Path
) -> None:
    if not CLIENT.exists():
        pytest.fail("the client-only virtualenv .venv/client is missing: `make test` (or `make client`) builds it")
    job = tmp_path / "job.py"
    job.write_text(JOB.format(tables=list(TABLES)))
    (query,) = QUERIES[N]
    store = tmp_path / "store"
    run = subprocess.run([str(CLIENT), str(job), connect_server, str(tpch), query, str(store)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lin = ember.load(str(store))
    expected = tpch_oracle(N)
    mapping = match_rows(lin.output(), expected, KEYS[N])
    assert len(mapping) == lin.output().num_rows > 0
    for oid, row in mapping.items():
        trace = lin.backward(oids=[oid])
        for source in SOURCES[N]:
            assert np.array_equal(trace.ids(source), expected_backward(expected, [row], source)), (oid, source)


def test_python_m_ember_connect_prints_the_server_flags() -> None:
    flags = subprocess.run([sys.executable, "-m", "ember.connect"], capture_output=True, text=True,
                           check=True).stdout.split()
    assert flags[::2] == ["--conf"] * len(ember.connect.server_conf())
    assert dict(f.split("=", 1) for f in flags[1::2]) == ember.connect.server_conf()
