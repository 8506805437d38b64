"""Keyed sources: a JDBC table (a real PostgreSQL server) and a Python data source, whose
rows have no stable order, identified by the key named with `ember.source(df, name, key=)`.

Oracles: the rows read straight from PostgreSQL (psycopg) or from the data source's own
generator, joined and grouped by pandas; never ember's output."""

from __future__ import annotations

import random
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import ember
from devkit.postgres import Postgres, available
from ember.engines.spark import plan_import
from ember.errors import EmberError, IdOutOfRangeError, UnsupportedOperatorError

# --- a Python data source ------------------------------------------------------------

# Spark's Python workers cannot import the tests' modules: the data source goes to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def visits(n: int) -> list[tuple[str, int, int]]:
    """The data source's rows: (site, n, minutes), keyed by (site, n)."""
    return [(f"s{i % 3}", i // 3, (i * 37) % 50) for i in range(n)]


class _Reader(DataSourceReader):
    def __init__(self, n: int) -> None:
        self.n = n

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0), InputPartition(1)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        rows = visits(self.n)[partition.value :: 2]
        random.shuffle(rows)  # no stable order: each read gives its rows in another
        yield from rows


class Visits(DataSource):
    @classmethod
    def name(cls) -> str:
        return "ember_test_visits"

    def schema(self) -> str:
        return "site string, n int, minutes int"

    def reader(self, schema: Any) -> DataSourceReader:
        return _Reader(int(self.options.get("rows", "12")))


@pytest.fixture(scope="module")
def visits_df(spark: SparkSession) -> DataFrame:
    spark.dataSource.register(Visits)
    return spark.read.format("ember_test_visits").option("rows", "30").load()


def test_python_data_source_without_a_key_is_refused_saying_how_to_declare_one(spark: SparkSession) -> None:
    spark.dataSource.register(Visits)
    df = spark.read.format("ember_test_visits").option("rows", "7").load()
    with pytest.raises(UnsupportedOperatorError, match=r"no stable row order.*ember\.source\(df, .*key="):
        ember.capture(df.groupBy("site").count())


def test_python_data_source_traced_by_a_key_of_two_columns(visits_df: DataFrame) -> None:
    ember.source(visits_df, "visits", key=["site", "n"])
    lin = ember.capture(visits_df.filter("minutes >= 10").groupBy("site").agg({"minutes": "sum"}))
    raw = pd.DataFrame(visits(30), columns=["site", "n", "minutes"])
    kept = raw[raw.minutes >= 10]
    out = lin.output().to_pandas()
    for oid, site in zip(out.ember_oid, out.site, strict=True):
        t = lin.backward(oids=[oid])
        want = kept[kept.site == site].sort_values(["site", "n"])
        assert t.keys("visits").to_pydict() == {"site": list(want.site), "n": list(want.n)}
        rows = t.rows("visits").to_pandas()
        assert sorted(zip(rows.site, rows.n, rows.minutes, strict=True)) == sorted(zip(want.site, want.n, want.minutes, strict=True))
    with pytest.raises(EmberError, match=r"key \(site, n\).*t\.keys\('visits'\)"):
        lin.backward(oids=[0]).ids("visits")
    # forward by key: the output row of the key's site, if the row passed the filter
    chosen = kept.iloc[0]
    reached = lin.forward("visits", keys=[(chosen.site, int(chosen.n))]).rows().to_pylist()
    assert [r["site"] for r in reached] == [chosen.site]
    dropped = raw[raw.minutes < 10].iloc[0]
    assert lin.forward("visits", keys={"site": [dropped.site], "n": [int(dropped.n)]}).ids().size == 0
    assert set(lin.forward("visits", where="minutes >= 45").rows().column("site").to_pylist()) == set(raw[raw.minutes >= 45].site)
    with pytest.raises(IdOutOfRangeError, match="no row with the key"):
        lin.forward("visits", keys=[("s9", 0)])
    with pytest.raises(EmberError, match="keys="):
        lin.forward("visits", ids=[0])


def test_python_data_source_lazy_and_auto(visits_df: DataFrame) -> None:
    """`ember.infer` re-runs restricted to the keys' rids; `auto` injects (a second read of
    a keyed source may differ), and `defer` is refused for the same reason."""
    ember.source(visits_df, "visits", key=["site", "n"])
    job = visits_df.filter("minutes < 20").groupBy("site").count()
    raw = pd.DataFrame(visits(30), columns=["site", "n", "minutes"])
    lazy = ember.infer(job)
    out = lazy.output().to_pandas()
    for oid, site in zip(out.ember_oid, out.site, strict=True):
        want = raw[(raw.site == site) & (raw.minutes < 20)].sort_values("n")
        assert lazy.backward(oids=[oid]).keys("visits").column("n").to_pylist() == list(want.n)
    ranked = visits_df.selectExpr("site", "rank() OVER (PARTITION BY site ORDER BY minutes) AS r")  # over files: defer
    assert ember.capture(ranked).strategy == "inject: a second run could give other rows (sampling, a random value, the clock, a table read by key)"
    with pytest.raises(EmberError, match="table read by key"):
        ember.capture(job, strategy="defer")


def test_a_key_that_does_not_identify_rows_is_refused(visits_df: DataFrame, spark: SparkSession) -> None:
    df = spark.read.format("ember_test_visits").option("rows", "9").load()
    ember.source(df, "visits9", key=["site"])
    with pytest.raises(UnsupportedOperatorError, match="does not identify its rows"):
        ember.capture(df.select("minutes"))
    with pytest.raises(EmberError, match="no column 'id'"):
        ember.source(df, "visits9", key=["id"])


def test_a_key_is_for_tables_and_files(spark: SparkSession) -> None:
    with pytest.raises(EmberError, match="numbers in-memory rows and ranges by position"):
        ember.source(spark.range(3), "r", key=["id"])


def test_files_keyed_by_metadata_fields(spark: SparkSession, tmp_path: Path) -> None:
    """Files identified by fields of `_metadata` (how a table format's own row ids, such as
    Delta's `_metadata.row_id`, plug in): here each row's file name and row index."""
    folder = tmp_path / "events"
    folder.mkdir()
    parts = [pa.table({"user": [f"u{(i * 5 + j) % 4}" for j in range(6)], "v": [i * 10 + j for j in range(6)]}) for i in range(3)]
    for i, part in enumerate(parts):
        pq.write_table(part, folder / f"part-{i}.parquet")
    df = spark.read.parquet(str(folder))
    ember.source(df, "events", key=["_metadata.file_name", "_metadata.row_index"])
    lin = ember.capture(df.where("v % 3 <> 0").groupBy("user").agg({"v": "sum"}))
    truth = pd.concat([p.to_pandas().assign(file=f"part-{i}.parquet", row=range(6)) for i, p in enumerate(parts)])
    kept = truth[truth.v % 3 != 0]
    for oid, user in zip(lin.output().column("ember_oid").to_pylist(), lin.output().column("user").to_pylist(), strict=True):
        keys = lin.backward(oids=[oid]).keys("events").to_pydict()
        want = kept[kept.user == user].sort_values(["file", "row"])
        assert keys == {"_metadata.file_name": list(want.file), "_metadata.row_index": list(want.row)}
    first = kept.iloc[0]
    reached = lin.forward("events", keys=[(first.file, int(first.row))]).rows().column("user").to_pylist()
    assert reached == [first.user]


def test_a_file_keyed_by_a_column_is_traced_after_it_is_rewritten(spark: SparkSession, tmp_path: Path) -> None:
    """Keyed rows outlive a rewrite of their file in another order (a compaction): rows
    are fetched by key, where rids by position would be stale."""
    path = tmp_path / "accounts.parquet"
    accounts = pd.DataFrame({"id": [4, 1, 3, 2], "owner": ["d", "a", "c", "b"], "balance": [40, 10, 30, 20]})
    pq.write_table(pa.Table.from_pandas(accounts, preserve_index=False), path)
    df = spark.read.parquet(str(path))
    ember.source(df, "accounts", key=["id"])
    lin = ember.capture(df.where("balance > 15").selectExpr("owner"))
    pq.write_table(pa.Table.from_pandas(accounts.sort_values("id"), preserve_index=False), path)  # rewritten
    t = lin.backward(where="owner = 'c'")
    assert t.keys("accounts").column("id").to_pylist() == [3]
    assert t.rows("accounts").select(["id", "owner", "balance"]).to_pylist() == [{"id": 3, "owner": "c", "balance": 30}]


# --- a JDBC table in PostgreSQL -----------------------------------------------------------


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    reason = available()
    if reason:
        pytest.fail(reason)  # make test installs both (make postgres)
    with Postgres(tmp_path_factory.mktemp("postgres")) as server:
        with server.connect() as con:
            con.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, nation text)")
            rows = [(i, f"c{i}", ["fr", "de", "jp", "br"][i % 4]) for i in range(1, 51)]  # 46 to 50 have no orders
            random.Random(7).shuffle(rows)  # the table's physical order is not the keys'
            with con.cursor() as cur:
                cur.executemany("INSERT INTO customers VALUES (%s, %s, %s)", rows)
            con.execute("UPDATE customers SET name = name || '!' WHERE id % 5 = 0")  # moves rows in the heap
        yield server


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("orders") / "orders.parquet"
    pq.write_table(pa.table({"cust": [(i * 7) % 45 + 1 for i in range(60)], "amount": [i % 13 + 1 for i in range(60)]}), path)
    return path


def _customers(pg: Postgres) -> pd.DataFrame:
    with pg.connect() as con:
        got = con.execute("SELECT id, name, nation FROM customers").fetchall()
    return pd.DataFrame(got, columns=["id", "name", "nation"])


def test_jdbc_table_joined_with_parquet_vs_postgres(spark: SparkSession, pg: Postgres, orders: Path) -> None:
    customers = spark.read.format("jdbc").options(**pg.jdbc_options(), dbtable="customers").load()
    ember.source(customers, "customers", key=["id"])
    spark.read.parquet(str(orders)).createOrReplaceTempView("keyed_orders")
    customers.createOrReplaceTempView("keyed_customers")
    lin = ember.capture(spark.sql(
        "SELECT c.nation, sum(o.amount) AS total FROM keyed_customers c JOIN keyed_orders o ON o.cust = c.id "
        "WHERE c.name NOT LIKE '%!' GROUP BY c.nation"
    ))
    truth = _customers(pg)
    order_rows = pq.read_table(orders).to_pandas().reset_index(names="rid")
    joined = order_rows.merge(truth[~truth.name.str.endswith("!")], left_on="cust", right_on="id")
    out = lin.output().to_pandas()
    assert sorted(zip(out.nation, out.total, strict=True)) == sorted(joined.groupby("nation").amount.sum().items())
    for oid, nation in zip(out.ember_oid, out.nation, strict=True):
        t = lin.backward(oids=[oid])
        mine = joined[joined.nation == nation]
        assert t.keys("customers").column("id").to_pylist() == sorted(set(mine.id))
        assert t.ids("keyed_orders").tolist() == sorted(mine.rid)
        fetched = t.rows("customers").to_pandas()
        want = truth[truth.id.isin(mine.id)].sort_values("id")
        assert list(zip(fetched.id, fetched.name, fetched.nation, strict=True)) == list(zip(want.id, want.name, want.nation, strict=True))
    some = int(joined.id.iloc[0])
    reached = lin.forward("customers", keys=[some]).rows().column("nation").to_pylist()
    assert reached == [truth.set_index("id").nation[some]]
    # a customer with no orders, and one the filter drops, reach nothing
    idle = sorted(set(truth.id) - set(order_rows.cust))[0]
    assert lin.forward("customers", keys=[idle]).ids().size == 0
    assert lin.forward("customers", keys=[5]).ids().size == 0


def test_jdbc_lineage_saved_keeps_keys_not_credentials(
    spark: SparkSession, pg: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saved store holds the keys and no credentials; loaded, it reads rows through the
    source declared again in the session, and without one says how to declare it."""
    customers = spark.read.format("jdbc").options(**pg.jdbc_options(), dbtable="customers").load()
    ember.source(customers, "customers", key=["id"])
    lin = ember.capture(customers.filter("nation = 'jp'").select("name"))
    lin.save(str(tmp_path / "jp.lineage"))
    stored = (tmp_path / "jp.lineage" / "manifest.json").read_text()
    assert pg.password not in stored and pg.user not in stored
    loaded = ember.load(str(tmp_path / "jp.lineage"), spark)
    truth = _customers(pg)
    jp = truth[truth.nation == "jp"].sort_values("id")
    everything = loaded.backward(where="true")
    assert everything.keys("customers").column("id").to_pylist() == list(jp.id)
    assert everything.rows("customers").column("name").to_pylist() == list(jp.name)  # the session declares customers
    monkeypatch.setattr(plan_import, "_KEYED_RELATIONS", weakref.WeakKeyDictionary())  # a session that does not
    fresh = ember.load(str(tmp_path / "jp.lineage"), spark)
    assert fresh.backward(oids=[0]).keys("customers").num_rows == 1
    with pytest.raises(EmberError, match=r"declare it again in this session, ember\.source\(df, 'customers', key=\['id'\]\)"):
        fresh.backward(oids=[0]).rows("customers")


def test_jdbc_table_without_a_key_is_refused(spark: SparkSession, pg: Postgres) -> None:
    # a query, not the table other tests key: a key belongs to one source (table and options)
    names = spark.read.format("jdbc").options(**pg.jdbc_options(), query="SELECT id, name FROM customers").load()
    with pytest.raises(UnsupportedOperatorError, match=r"JDBC table .*SELECT id, name FROM customers.*: it has no stable row order.*key="):
        ember.capture(names.select("name"))


def test_jdbc_to_parquet_to_report_traced_to_database_keys(spark: SparkSession, pg: Postgres, tmp_path: Path) -> None:
    """A pipeline whose raw data is a database table: job 1 writes the customers it keeps,
    partitioned by nation; job 2 reports over those files. The report's rows trace back,
    through the written files, to the table's keys, and a key forward to the report."""
    customers = spark.read.format("jdbc").options(**pg.jdbc_options(), dbtable="customers").load()
    ember.source(customers, "customers", key=["id"])
    folder = tmp_path / "kept"
    stage = ember.capture(
        customers.where("id % 3 <> 0").selectExpr("id", "nation", "length(name) AS size"),
        write=lambda w: w.partitionBy("nation").mode("overwrite").parquet(str(folder)),
    )
    spark.read.parquet(str(folder)).createOrReplaceTempView("kept_customers")
    report = ember.capture(spark.sql("SELECT nation, sum(size) AS total FROM kept_customers GROUP BY nation ORDER BY nation"))
    truth = _customers(pg)
    kept = truth[truth.id % 3 != 0]
    out = report.output().to_pandas()
    for oid, nation in zip(out.ember_oid, out.nation, strict=True):
        t = report.backward(oids=[oid], through=[stage])
        assert t.keys("customers").column("id").to_pylist() == sorted(kept[kept.nation == nation].id)
    key = int(kept.id.iloc[0])
    nation = kept.set_index("id").nation[key]
    assert report.forward("customers", keys=[key], through=[stage]).rows().column("nation").to_pylist() == [nation]
    assert report.forward("customers", keys=[3], through=[stage]).ids().size == 0  # job 1 dropped it
