"""Traces after capture are answered in-process: no Spark job, rows read from the files."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

import ember


def test_traces_and_rows_run_no_spark_job(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "sales.parquet"
    pq.write_table(pa.table({"shop": ["a", "b", "a", "c", "a"], "amount": [5, 7, 1, 2, 9]}), path, row_group_size=2)
    df = spark.read.parquet(str(path))
    lin = ember.capture(df.groupBy("shop").sum("amount").orderBy("shop"))
    group = "ember-traces"
    spark.sparkContext.setJobGroup(group, "must stay empty")
    try:
        trace = lin.backward(where="shop = 'a'")
        rows = trace.rows("sales")
        reached = lin.forward("sales", where="amount > 6").ids()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []
    assert trace.ids("sales").tolist() == [0, 2, 4]
    assert rows.column("amount").to_pylist() == [5, 1, 9]  # across three row groups
    assert rows.column("ember_rid").to_pylist() == [0, 2, 4]
    assert reached.tolist() == [0, 1]
    assert trace.exact and lin.sources == ["sales"] and trace.sources == ["sales"]
