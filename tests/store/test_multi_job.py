"""Three jobs linked by the Parquet files between them (clean → join → aggregate).

The oracle is DuckDB over the same files: each intermediate row is matched to its
TPC-H rows by the line key (l_orderkey, l_linenumber) it carries.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import ember


@pytest.fixture(scope="module")
def jobs(spark: SparkSession, tpch: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ember.Lineage]]:
    work = tmp_path_factory.mktemp("jobs")
    lineitem = spark.read.parquet(str(tpch / "lineitem.parquet"))
    clean = lineitem.filter("l_quantity > 5 AND l_discount < 0.08").select(
        "l_orderkey", "l_linenumber", (F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue")
    )
    lin_clean = ember.capture(clean, write_to=str(work / "clean"))  # shorthand of write=lambda w: w.parquet(...)
    orders = spark.read.parquet(str(tpch / "orders.parquet"))
    joined = spark.read.parquet(str(work / "clean")).join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
    joined = joined.select("l_orderkey", "l_linenumber", "revenue", "o_orderpriority")
    lin_join = ember.capture(joined, write=lambda w: w.parquet(str(work / "joined")))
    final = spark.read.parquet(str(work / "joined")).groupBy("o_orderpriority").agg(F.sum("revenue").alias("revenue"))
    lin_final = ember.capture(final)
    return work, [lin_clean, lin_join, lin_final]


def pq_rows(path: str) -> int:
    return int(pq.ParquetFile(path).metadata.num_rows)


def oracle(tpch: Path, work: Path, priority: str) -> dict[str, list[int]]:
    con = duckdb.connect()

    def read(path: Path) -> str:
        return f"read_parquet('{path}', file_row_number = true)"

    def rows(folder: Path) -> str:
        """A folder's Parquet files in path order, each row with its ordinal (Spark's rid)."""
        files = sorted(str(p) for p in folder.glob("*.parquet"))
        parts = " UNION ALL ".join(
            f"SELECT * REPLACE (file_row_number + {sum(pq_rows(f) for f in files[:i])} AS file_row_number) FROM {read(Path(f))}"
            for i, f in enumerate(files)
        )
        return f"({parts})"

    con.execute(f"CREATE VIEW j AS SELECT * FROM {rows(work / 'joined')}")
    con.execute(f"CREATE VIEW c AS SELECT * FROM {rows(work / 'clean')}")
    con.execute(f"CREATE VIEW l AS SELECT * FROM {read(tpch / 'lineitem.parquet')}")
    con.execute(f"CREATE VIEW o AS SELECT * FROM {read(tpch / 'orders.parquet')}")
    con.execute("CREATE TABLE g AS SELECT * FROM j WHERE o_orderpriority = ?", [priority])
    queries = {
        "joined": "SELECT file_row_number FROM g",
        "clean": "SELECT c.file_row_number FROM c SEMI JOIN g USING (l_orderkey, l_linenumber)",
        "lineitem": "SELECT l.file_row_number FROM l SEMI JOIN g USING (l_orderkey, l_linenumber)",
        "orders": "SELECT file_row_number FROM o WHERE o_orderkey IN (SELECT l_orderkey FROM g)",
    }
    out = {name: sorted(r[0] for r in con.execute(q).fetchall()) for name, q in queries.items()}
    con.close()
    return out


def test_backward_through_two_upstream_jobs(jobs: tuple[Path, list[ember.Lineage]], tpch: Path) -> None:
    work, (lin_clean, lin_join, lin_final) = jobs
    assert lin_final.sources == ["joined"]
    priorities = lin_final.output().column("o_orderpriority").to_pylist()
    for oid, priority in enumerate(priorities):
        trace = lin_final.backward(oids=[oid])  # found in this process: no through= needed
        want = oracle(tpch, work, priority)
        assert trace.sources == sorted(want)
        for name, rids in want.items():
            assert trace.ids(name).tolist() == rids, (priority, name)
        assert lin_final.backward(oids=[oid], through=[lin_join, lin_clean]).ids("lineitem").tolist() == want["lineitem"]


def test_forward_from_a_first_job_source(jobs: tuple[Path, list[ember.Lineage]], tpch: Path) -> None:
    work, (*_, lin_final) = jobs
    priorities = lin_final.output().column("o_orderpriority").to_pylist()
    lineage = {p: set(oracle(tpch, work, p)["lineitem"]) for p in priorities}
    for rid in [0, 1, 2, 3, 5, 8, 13, 21, 34, 55]:
        got = lin_final.forward("lineitem", ids=[rid]).ids().tolist()
        assert got == [oid for oid, p in enumerate(priorities) if rid in lineage[p]], rid


def test_links_survive_save_and_load(jobs: tuple[Path, list[ember.Lineage]], tpch: Path, tmp_path: Path) -> None:
    work, lins = jobs
    for i, lin in enumerate(lins):
        lin.save(str(tmp_path / f"job{i}"))
    clean, join, final = (ember.load(str(tmp_path / f"job{i}")) for i in range(3))
    priority = final.output().column("o_orderpriority")[0].as_py()
    trace = final.backward(oids=[0], through=[join, clean])
    assert trace.ids("lineitem").tolist() == oracle(tpch, work, priority)["lineitem"]
    catalog = ember.catalog(tmp_path)
    assert catalog.stores == [str(tmp_path / "job0"), str(tmp_path / "job1")]  # the two that wrote files
    trace = final.backward(oids=[0], through=catalog)
    assert trace.ids("lineitem").tolist() == oracle(tpch, work, priority)["lineitem"]


def test_write_to_refuses_a_non_empty_folder(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    with pytest.raises(ember.EmberError, match="not empty"):
        ember.capture(spark.range(3), write_to=str(tmp_path))
    with pytest.raises(ember.EmberError, match="Parquet only"):
        ember.capture(spark.range(3), write_to=str(tmp_path / "new"), format="csv")
