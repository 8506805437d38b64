"""ember from a Spark Connect client with no JVM: a virtualenv holding `pyspark-client` and
ember but not `pyspark` (nor py4j; `make test` builds it, .venv/client) captures TPC-H Q3
on the tests' Connect server and saves the lineage, infers it, and `ember run` records
the same job from a script; every output row's backward trace of all three meets the
DuckDB oracle. A grouped map captured there (its function wrapped by the client) meets
the orders' own priorities. The
22 queries in the DataFrame API (whose columns, made by PySpark's functions, are
Connect's only in a client-only process) are captured there too, deferred, and meet the
oracle as the classic session's do.
`python -m ember.connect` prints the settings a server needs."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ember
import ember.connect
from devkit.tpch import QUERIES, TABLES
from ember.cli.runstore import read_run
from tests.conftest import ROOT
from tests.oracle.compare import expected_backward, match_rows
from tests.oracle.tpch_lineage import KEYS, SOURCES
from tests.tpch.test_tpch import SEED, check_captured

CLIENT = ROOT / ".venv" / "client" / "bin" / "python"
N = 3

JOB = """
import importlib.util, sys
for module in ("py4j", "pyspark.core", "pyspark.sql.classic"):
    assert importlib.util.find_spec(module) is None, f"{{module}} is here: not a client-only install"
import json, pathlib
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
import ember

url, data, query, store = sys.argv[1:]
spark = SparkSession.builder.remote(url).getOrCreate()
for table in {tables!r}:
    spark.read.parquet(f"{{data}}/{{table}}.parquet").createOrReplaceTempView(table)
if store == "-":  # under `ember run`, which captures the action
    spark.sql(query).collect()
else:
    ember.capture(spark.sql(query)).save(store)
    inferred = ember.infer(spark.sql(query))  # lazily: each output row traced back here
    traces = [{{s: inferred.backward(oids=[oid]).ids(s).tolist() for s in inferred.sources}}
              for oid in range(inferred.output().num_rows)]
    pq.write_table(inferred.output(), store + ".inferred.parquet")
    pathlib.Path(store + ".inferred.json").write_text(json.dumps(traces))
    import pandas as pd  # a grouped map: the client wraps its function, the server runs it
    counted = spark.table("orders").groupBy("o_orderpriority").applyInPandas(
        lambda pdf: pd.DataFrame({{"p": [pdf.o_orderpriority.iloc[0]], "n": [len(pdf)]}}), "p string, n long")
    ember.capture(counted).save(store + ".map")
"""


def test_a_client_with_pyspark_client_alone_captures_over_connect(
    connect_server: str, tpch: Path, tpch_oracle: Callable[[int], pa.Table], tmp_path: Path
) -> None:
    if not CLIENT.exists():
        pytest.fail("the client-only virtualenv .venv/client is missing: `make test` (or `make client`) builds it")
    job = tmp_path / "job.py"
    job.write_text(JOB.format(tables=list(TABLES)))
    (query,) = QUERIES[N]
    args = [str(job), connect_server, str(tpch), query]
    run = subprocess.run([str(CLIENT), *args, str(tmp_path / "store")], capture_output=True, text=True, cwd=tmp_path,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    recorded = subprocess.run([str(CLIENT.with_name("ember")), "run", "--store", str(tmp_path / "run"), *args, "-"],
                              capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    (entry,) = (p for p in (tmp_path / "run").iterdir() if p.is_dir())
    expected = tpch_oracle(N)
    for store in (tmp_path / "store", entry):
        lin = ember.load(str(store))
        mapping = match_rows(lin.output(), expected, KEYS[N])
        assert len(mapping) == lin.output().num_rows > 0
        for oid, row in mapping.items():
            trace = lin.backward(oids=[oid])
            for source in SOURCES[N]:
                assert np.array_equal(trace.ids(source), expected_backward(expected, [row], source)), (store, oid, source)
    inferred = json.loads((tmp_path / "store.inferred.json").read_text())
    mapping = match_rows(pq.read_table(tmp_path / "store.inferred.parquet"), expected, KEYS[N])
    assert len(mapping) == len(inferred) > 0
    for oid, row in mapping.items():
        for source in SOURCES[N]:
            assert inferred[oid][source] == expected_backward(expected, [row], source).tolist(), ("inferred", oid, source)
    mapped = ember.load(str(tmp_path / "store.map"))
    priorities = pq.read_table(tpch / "orders.parquet", columns=["o_orderpriority"]).column(0).to_pylist()
    assert mapped.output().num_rows == len(set(priorities))
    for oid, (p, n) in enumerate(zip(*mapped.output().select(["p", "n"]).to_pydict().values(), strict=True)):
        assert mapped.backward(oids=[oid]).ids("orders").tolist() == [i for i, v in enumerate(priorities) if v == p]
        assert n == priorities.count(p)


WRITES = """
import sys
from pyspark.sql import SparkSession

url, data, out = sys.argv[1:]
spark = SparkSession.builder.remote(url).getOrCreate()
orders = spark.read.parquet(f"{data}/orders.parquet").where("o_totalprice > 300000")
orders.select("o_orderkey", "o_orderpriority").write.partitionBy("o_orderpriority").mode("append").parquet(out)
print(spark.read.parquet(out).count())
"""


def test_ember_run_captures_a_connect_client_s_write(connect_server: str, tpch: Path, tmp_path: Path) -> None:
    """A Connect writer keeps a plan, not a DataFrame: `ember run` makes the script's
    write through its capture (once: the append leaves one batch of files), and the
    written rows trace back to the orders DuckDB selects."""
    if not CLIENT.exists():
        pytest.fail("the client-only virtualenv .venv/client is missing: `make test` (or `make client`) builds it")
    job, out = tmp_path / "writes.py", tmp_path / "out"
    job.write_text(WRITES)
    run = subprocess.run([str(CLIENT.with_name("ember")), "run", "--store", str(tmp_path / "run"), str(job), connect_server,
                          str(tpch), str(out)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rids = duckdb.sql(f"SELECT file_row_number FROM read_parquet('{tpch}/orders.parquet', file_row_number = true) "
                      "WHERE o_totalprice > 300000 ORDER BY 1").fetchnumpy()["file_row_number"]
    assert run.stdout.split()[-1] == str(rids.size)  # the script's own output: its write made once
    written, counted = read_run(tmp_path / "run").entries
    assert (written.status, written.target, counted.status) == ("eager", str(out), "eager")
    lin = ember.load(str(tmp_path / "run" / written.name))
    assert np.array_equal(lin.backward(oids=range(lin.output().num_rows)).ids("orders"), rids)


DATAFRAMES = """
import sys
from pyspark.sql import SparkSession
import ember
from tests.tpch.queries_dataframe import DF

url, data, out = sys.argv[1:]
spark = SparkSession.builder.remote(url).getOrCreate()
for table in {tables!r}:
    spark.read.parquet(f"{{data}}/{{table}}.parquet").createOrReplaceTempView(table)
for n, query in sorted(DF.items()):
    ember.capture(query(spark), strategy="defer").save(f"{{out}}/q{{n}}")
"""


@pytest.fixture(scope="module")
def client_dataframes(connect_server: str, tpch: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 22 TPC-H queries in the DataFrame API captured (deferred) by the client-only
    virtualenv, where PySpark's functions make Connect's columns: each one's lineage store,
    by query number."""
    if not CLIENT.exists():
        pytest.fail("the client-only virtualenv .venv/client is missing: `make test` (or `make client`) builds it")
    out = tmp_path_factory.mktemp("client-dataframes")
    job = out / "job.py"
    job.write_text(DATAFRAMES.format(tables=list(TABLES)))
    run = subprocess.run([str(CLIENT), str(job), connect_server, str(tpch), str(out)], capture_output=True, text=True,
                         cwd=out, timeout=1200, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-3000:]
    return out


@pytest.mark.parametrize("n", sorted(QUERIES))
def test_tpch_dataframe_api_from_a_client_over_connect(
    client_dataframes: Path,
    tpch_oracle: Callable[[int], pa.Table],
    tpch_plain: Callable[[int], pa.Table],
    table_rows: dict[str, int],
    n: int,
) -> None:
    """The captured output is the classic session's plain output of the query's SQL text."""
    lin = ember.load(str(client_dataframes / f"q{n}"))
    assert lin.mode == "defer"
    check_captured(lin, tpch_plain(n), n, tpch_oracle(n), table_rows, random.Random(SEED + 600 + n))


def test_python_m_ember_connect_prints_the_server_flags() -> None:
    flags = subprocess.run([sys.executable, "-m", "ember.connect"], capture_output=True, text=True,
                           check=True).stdout.split()
    assert flags[::2] == ["--conf"] * len(ember.connect.server_conf())
    assert dict(f.split("=", 1) for f in flags[1::2]) == ember.connect.server_conf()
