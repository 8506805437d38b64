"""Sources: partitioned Parquet datasets and catalog tables are numbered over all of their
files in path order, whichever partitions a job reads, and their rows are read with the
partition columns Spark reads off the folders. The oracle is DuckDB's own reading of the
folders (`hive_partitioning`)."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.plan.sources import partition_of

_TYPES = "{'p': 'INTEGER', 's': 'VARCHAR', 'd': 'DATE'}"


def test_a_file_partition_is_read_off_its_innermost_folders() -> None:
    uri = "file:/x/p=9/data/p=2/s=a%253A0/d=__HIVE_DEFAULT_PARTITION__/part-0.parquet"
    assert partition_of(uri, ("p", "S", "d")) == ("2", "a:0", None)
    assert partition_of("file:/t/part-0.parquet", ()) == ()
    with pytest.raises(ValueError, match="'q'"):
        partition_of(uri, ("q",))


def _dataset(spark: SparkSession, root: Path) -> DataFrame:
    """Three partition levels (a date, an int, a string with an escaped character or null),
    two files in most partitions."""
    day = datetime.date(2024, 1, 1)
    rows = [(i, i % 5, day + datetime.timedelta(days=i % 2), i % 3, None if i % 4 == 3 else f"a:{i % 2}") for i in range(48)]
    df = spark.createDataFrame(rows, "id long, v long, d date, p int, s string")
    df.repartition(2).write.partitionBy("d", "p", "s").parquet(str(root))
    return spark.read.parquet(str(root))


def _oracle(root: Path, where: str = "true") -> pa.Table:
    """The rows DuckDB reads from the folders, with their rid (files in path order)."""
    return duckdb.sql(
        f"SELECT * EXCLUDE (rid), rid AS ember_rid FROM ("
        f"  SELECT *, row_number() OVER (ORDER BY filename, file_row_number) - 1 AS rid"
        f"  FROM read_parquet('{root}/**/*.parquet', hive_partitioning = true, hive_types = {_TYPES},"
        f"                    filename = true, file_row_number = true))"
        f" WHERE {where} ORDER BY ember_rid"
    ).to_arrow_table().select(["id", "v", "d", "p", "s", "ember_rid"])


def test_partitioned_files_are_numbered_and_read_with_their_partition_columns(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "events"
    df = _dataset(spark, root)
    lin = ember.capture(df.filter("v = 1").select("id", "s"))
    traced = lin.backward(oids=list(range(lin.output().num_rows)))
    expected = _oracle(root, "v = 1")
    assert traced.ids("events").tolist() == expected.column("ember_rid").to_pylist()
    assert traced.rows("events").to_pylist() == expected.to_pylist()

    marked = lin.forward("events", where="s = 'a:1' AND p = 2").ids().tolist()
    output = lin.output().to_pylist()
    wanted = set(_oracle(root, "v = 1 AND s = 'a:1' AND p = 2").column("id").to_pylist())
    assert wanted and sorted(r["ember_oid"] for r in output if r["id"] in wanted) == marked

    saved = tmp_path / "events.lineage"
    lin.save(str(saved))
    assert ember.load(str(saved)).backward(oids=[0]).rows("events").num_rows == 1
    assert ember.load(str(saved)).backward(oids=list(range(len(output)))).rows("events").equals(traced.rows("events"))


def test_a_job_reading_some_partitions_numbers_the_whole_dataset(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "events"
    df = _dataset(spark, root)
    table = f"events_{uuid.uuid4().hex[:8]}"
    df.write.partitionBy("d", "p", "s").option("path", str(tmp_path / "table")).saveAsTable(table)
    try:
        for where in ("v = 1", "p = 2 AND v = 1", "s IS NULL AND v > 2"):
            lin = ember.capture(spark.sql(f"SELECT id FROM {table} WHERE {where}"))
            traced = lin.backward(oids=list(range(lin.output().num_rows)))
            assert traced.sources == [table], where
            expected = _oracle(tmp_path / "table", where)
            assert traced.ids(table).tolist() == expected.column("ember_rid").to_pylist(), where
            assert traced.rows(table).to_pylist() == expected.to_pylist(), where
    finally:
        spark.sql(f"DROP TABLE {table}")


def test_files_are_in_the_order_of_their_paths_not_of_their_escaped_uris(spark: SparkSession, tmp_path: Path) -> None:
    # ' ' (0x20) sorts before '!' (0x21), but its escape '%20' after it
    spaced, marked = tmp_path / "a b", tmp_path / "a!b"
    spark.createDataFrame([(1,), (2,)], "id long").coalesce(1).write.parquet(str(spaced))
    spark.createDataFrame([(3,)], "id long").coalesce(1).write.parquet(str(marked))
    lin = ember.capture(spark.read.parquet(str(marked), str(spaced)))
    traced = lin.backward(oids=list(range(3)))
    (source,) = traced.sources
    assert traced.rows(source).to_pylist() == [{"id": 1, "ember_rid": 0}, {"id": 2, "ember_rid": 1}, {"id": 3, "ember_rid": 2}]


@pytest.mark.parametrize("merged", [False, True])
def test_files_holding_their_columns_otherwise_are_read_by_name(spark: SparkSession, tmp_path: Path, merged: bool) -> None:
    """A dataset's later files may hold its columns in another order, or more of them
    (`mergeSchema` reads those too); Spark reads them by name, and so must every reader
    of ember's (DuckDB's UNION ALL is by position)."""
    root = tmp_path / "evolved"
    root.mkdir()
    pq.write_table(pa.table({"k": [1, 2, 3], "v": [10, 20, 30]}), root / "a.parquet")
    pq.write_table(pa.table({"v": [1, 2, 60], "k": [40, 50, 1], "w": ["x", "y", "z"]}), root / "b.parquet")
    df = spark.read.option("mergeSchema", str(merged).lower()).parquet(str(root))
    columns = "k, v, w" if merged else "k, v"
    oracle = duckdb.sql(
        f"SELECT {columns}, row_number() OVER (ORDER BY filename, file_row_number) - 1 AS ember_rid "
        f"FROM read_parquet('{root}/*.parquet', union_by_name = true, filename = true, file_row_number = true) "
        f"ORDER BY ember_rid"
    ).to_arrow_table().to_pylist()
    # an aggregate under a LIMIT: DuckDB reads its groups' lineage beside the job
    top = ember.capture(df.filter("v > 5").groupBy("k").count().orderBy("k").limit(2))
    for oid, row in enumerate(top.output().to_pylist()):
        want = [r["ember_rid"] for r in oracle if r["k"] == row["k"] and r["v"] > 5]
        assert top.backward(oids=[oid]).ids("evolved").tolist() == want
    whole = ember.capture(df)
    assert whole.backward(oids=list(range(len(oracle)))).rows("evolved").to_pylist() == oracle
    want = sorted(oid for oid, r in enumerate(whole.output().to_pylist()) if r["k"] == 40)
    assert whole.forward("evolved", where="k = 40").ids().tolist() == want
