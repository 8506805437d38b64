"""The jobs of `test_metastore.py`, in a process of their own: a Hive-enabled session (its
Derby metastore and warehouse in a temp folder) cannot share a JVM with the tests' classic
session. Builds the tables, captures each case's job, traces every output row backward
and every source row forward, and writes what ember answered to `<folder>/answers.json`
for the test to check against DuckDB and pandas over the tables' files.

    python -m tests.engines.spark.metastore_job FOLDER classic|connect
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

import ember
from devkit import connect
from devkit.hive import hive_spark, settings
from ember.errors import UnsupportedOperatorError
from ember.plan.sources import local_path

PARTS = ("2024-01-01", "2024-01-02", "a:b")  # `a:b`'s folder is escaped (a%3Ab)
ORDERS = [
    # oid, cid, amt (exact in binary: sums agree to the bit), note (some null), dt (some null)
    (i, i % 8, i * 0.25 + 1, None if i % 6 == 0 else f"n{i % 4}", None if i % 11 == 0 else PARTS[i % 3])
    for i in range(48)
]
CUSTOMERS = [(i, None if i == 3 else f"c{i}", "east" if i % 2 else "west") for i in range(7)]  # cid 7 matches none
ORDER_COLUMNS = "oid int, cid int, amt double, note string, dt string"

# name → the job, over the tables below; each orders its output fully, so oids are fixed
CASES: dict[str, str] = {
    "managed": "SELECT oid, amt FROM orders_m WHERE amt > 6 ORDER BY oid",
    "external": "spark.table",  # built with the DataFrame API in `job`
    "partitioned": "SELECT dt, count(*) AS n, sum(amt) AS total FROM orders_t GROUP BY dt ORDER BY dt NULLS FIRST",
    "pruned": "SELECT oid, note, dt FROM orders_t WHERE dt = 'a:b' ORDER BY oid",
    "orc": "SELECT cid, max(amt) AS top FROM orders_o GROUP BY cid ORDER BY cid",
    "serde": "SELECT oid, cid FROM orders_s WHERE oid % 4 = 1 ORDER BY oid",
    "self-join": (  # one source, its sides pruned otherwise: one partition, all of them
        "SELECT a.oid, b.oid AS other FROM orders_t a JOIN orders_t b ON a.cid = b.cid "
        "WHERE a.dt = 'a:b' AND b.oid < 6 ORDER BY a.oid, b.oid"
    ),
    "join": (
        "SELECT c.region, count(*) AS n, sum(o.amt) AS total FROM orders_t o JOIN customers_t c ON o.cid = c.id "
        "WHERE o.amt > 3 GROUP BY c.region ORDER BY c.region"
    ),
}


# name → (the job, its write: `capture(write=...)` into a table, Parquet and Hive text)
WRITES: dict[str, tuple[str, Callable[[Any], object]]] = {
    "saveAsTable": ("SELECT oid, cid, amt FROM orders_m WHERE amt > 6", lambda w: w.format("parquet").saveAsTable("written_p")),
    "insertInto": ("SELECT oid, cid, amt, note, dt FROM orders_m WHERE oid % 3 = 0", lambda w: w.insertInto("written_t")),
}


def tables(spark: SparkSession, folder: Path) -> None:
    """Every kind of table the cases read: managed and external, Parquet, ORC and Hive text
    (`|`-delimited and partitioned; default `\\u0001`-delimited with `\\N` nulls)."""
    spark.createDataFrame(ORDERS, ORDER_COLUMNS).repartition(2).createOrReplaceTempView("orders")
    spark.sql("CREATE TABLE orders_m USING parquet AS SELECT * FROM orders")
    external = folder / "external"
    external.mkdir()
    schema = pa.schema([("oid", pa.int32()), ("cid", pa.int32()), ("amt", pa.float64()), ("note", pa.string()), ("dt", pa.string())])
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in ORDERS], schema=schema)
    pq.write_table(table.slice(0, 20), external / "part-0.parquet")
    pq.write_table(table.slice(20), external / "part-1.parquet")
    spark.sql(f"CREATE EXTERNAL TABLE orders_x ({ORDER_COLUMNS}) STORED AS PARQUET LOCATION '{external}'")
    spark.sql(
        "CREATE TABLE orders_t (oid int, cid int, amt double, note string) PARTITIONED BY (dt string) "
        "ROW FORMAT DELIMITED FIELDS TERMINATED BY '|' STORED AS TEXTFILE"
    )
    spark.sql("SET hive.exec.dynamic.partition.mode=nonstrict")
    spark.sql("INSERT INTO orders_t PARTITION (dt) SELECT oid, cid, amt, note, dt FROM orders")
    spark.createDataFrame(CUSTOMERS, "id int, name string, region string").repartition(2).createOrReplaceTempView("customers")
    spark.sql("CREATE TABLE customers_t STORED AS TEXTFILE AS SELECT * FROM customers")
    spark.sql("CREATE TABLE orders_o STORED AS ORC AS SELECT * FROM orders")
    spark.sql("CREATE TABLE orders_s STORED AS PARQUET AS SELECT * FROM orders")
    spark.sql(
        "CREATE TABLE written_t (oid int, cid int, amt double, note string) PARTITIONED BY (dt string) "
        "ROW FORMAT DELIMITED FIELDS TERMINATED BY '|' STORED AS TEXTFILE"
    )
    spark.sql("CREATE TABLE nested_t (k int) STORED AS TEXTFILE")
    spark.sql("INSERT INTO nested_t VALUES (1), (2)")


def job(spark: SparkSession, case: str) -> DataFrame:
    if case == "external":
        return spark.table("orders_x").filter("note IS NOT NULL").select("oid", "note").orderBy("oid")
    return spark.sql(CASES[case])


def answers(lin: Any) -> dict[str, Any]:
    """ember's answers for every row: the output, each oid's backward lineage per source,
    each source row's forward lineage (a source is its table, which holds the rows of
    ORDERS or CUSTOMERS), and the source rows the whole output reached."""
    out = lin.output()
    oids = list(range(out.num_rows))
    whole = lin.backward(oids=oids)
    backward = []
    for oid in oids:
        t = lin.backward(oids=[oid])
        backward.append({s: t.ids(s).tolist() for s in t.sources})
    forward = {
        s: {str(rid): lin.forward(s, ids=[rid]).ids().tolist() for rid in range(len(CUSTOMERS if s == "customers_t" else ORDERS))}
        for s in whole.sources
    }
    return {
        "output": out.drop_columns(["ember_oid"]).to_pylist(),
        "backward": backward,
        "forward": forward,
        "rows": {s: whole.rows(s).to_pylist() for s in whole.sources},
    }


def main(folder: Path, session: str) -> None:
    """Runs the cases on a classic Hive session, or ("connect") from a Connect client of a
    Hive-enabled server started here."""
    if session == "connect":
        from pyspark.sql.connect.session import SparkSession as RemoteSession

        with connect.server(folder / "server.log", **settings(folder / "hive")) as url:
            run(RemoteSession.builder.remote(url).getOrCreate(), folder)  # type: ignore[arg-type]  # a Connect session
    else:
        run(hive_spark(folder / "hive"), folder)


def run(spark: SparkSession, folder: Path) -> None:
    tables(spark, folder)
    found: dict[str, Any] = {}
    for case in CASES:
        convert = "false" if case == "serde" else "true"  # `serde`: Spark reads the table with Hive's Parquet serde
        spark.conf.set("spark.sql.hive.convertMetastoreParquet", convert)
        lin = ember.capture(job(spark, case))
        found[case] = answers(lin)
        if case == "partitioned":  # a saved store reads the table's rows again through the metastore
            lin.save(str(folder / "saved"))
            loaded = ember.load(str(folder / "saved"), spark)
            found["loaded"] = {s: loaded.backward(oids=[0, 1]).rows(s).to_pylist() for s in ("orders_t",)}
    spark.conf.set("spark.sql.hive.convertMetastoreParquet", "true")
    for case, (sql, write) in WRITES.items():
        lin = ember.capture(spark.sql(sql), write=write)
        found[case] = {
            "files": [[str(local_path(f.uri).relative_to(folder)), f.offset, f.rows] for f in lin.written],
            "backward": [lin.backward(oids=[oid]).ids("orders_m").tolist() for oid in range(lin.output().num_rows)],
        }
    later = ember.capture(spark.sql("SELECT count(*) FROM written_t"))  # reads the Hive text files written above
    found["downstream"] = later.backward(oids=[0]).ids("orders_m").tolist()
    location = folder / "hive" / "warehouse" / "nested_t"
    (location / "more").mkdir()
    shutil.copy(next(p for p in location.iterdir() if p.is_file() and not p.name.startswith((".", "_"))), location / "more")
    try:
        ember.capture(spark.sql("SELECT k FROM nested_t"))
        found["refused"] = None
    except UnsupportedOperatorError as e:
        found["refused"] = str(e)
    (folder / "answers.json").write_text(json.dumps(found))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
