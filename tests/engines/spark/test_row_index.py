"""`RowIndex.java` numbers a Parquet scan's rows as the files hold them, and its plan reads
only the `_metadata` fields the rid (and the job) use."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from ember.engines.spark import jar
from ember.engines.spark.jvm import JObj, Jvm
from ember.plan.sources import spark_uri

RID_ID = (1 << 40) + 7


def _files(tmp_path: Path) -> list[Path]:
    paths = [tmp_path / "t" / "part-0.parquet", tmp_path / "t" / "part-1.parquet"]
    paths[0].parent.mkdir()
    pq.write_table(pa.table({"v": [10, 11, 12]}), paths[0])
    pq.write_table(pa.table({"v": [20, 21]}), paths[1])
    return paths


def _scan(df: DataFrame) -> JObj:
    """The file scan under `df`'s optimized plan, as ember's plan import gets it."""
    plan = Jvm.optimized(df)
    while plan.getClass().getSimpleName() != "LogicalRelation":
        plan = plan.child()
    return plan


def _numbered(df: DataFrame, paths: list[Path], offsets: list[int]) -> DataFrame:
    jvm = Jvm(df.sparkSession)
    uris = [spark_uri(p.as_uri()) for p in paths] if len(paths) > 1 else []
    plan = jar.helper(jvm, "RowIndex").numbered(_scan(df), uris, offsets, "rid", jvm.expr_id(RID_ID))
    return DataFrame(jar.helper(jvm, "Prepared").dataframe(jvm.jsession, plan), df.sparkSession)


def _read_fields(df: DataFrame) -> str:
    """The columns the executed plan's file scan reads."""
    plan = str(df._jdf.queryExecution().executedPlan().toString())
    return next(line for line in plan.splitlines() if "FileScan" in line).split("[", 1)[1].split("]", 1)[0]


def test_rids_follow_the_files_in_order(spark: SparkSession, tmp_path: Path) -> None:
    paths = _files(tmp_path)
    ours = _numbered(spark.read.parquet(str(paths[0].parent)), paths, [0, 3])
    expected = {(v, i) for i, v in enumerate(v for p in paths for v in pq.read_table(p).column("v").to_pylist())}
    assert {(r.v, r.rid) for r in ours.collect()} == expected


def test_only_the_fields_the_rid_needs_are_read(spark: SparkSession, tmp_path: Path) -> None:
    paths = _files(tmp_path)
    one = _numbered(spark.read.parquet(str(paths[1])), paths[1:], [])
    assert sorted((r.v, r.rid) for r in one.collect()) == [(20, 0), (21, 1)]
    read = _read_fields(one)
    assert "row_index" in read and "file_path" not in read and "file_size" not in read
    two = _numbered(spark.read.parquet(str(paths[0].parent)), paths, [0, 3])
    two.collect()
    read = _read_fields(two)
    assert "file_path" in read and "file_name" not in read and "file_size" not in read


def test_a_job_reading_metadata_keeps_its_fields(spark: SparkSession, tmp_path: Path) -> None:
    paths = _files(tmp_path)
    df = spark.read.parquet(str(paths[1])).select("v", "_metadata.file_name")  # its scan outputs `_metadata`
    ours = _numbered(df, paths[1:], [])
    rows = ours.selectExpr("v", "_metadata.file_name AS name", "rid").collect()
    assert sorted((r.v, r.name, r.rid) for r in rows) == [(20, paths[1].name, 0), (21, paths[1].name, 1)]
