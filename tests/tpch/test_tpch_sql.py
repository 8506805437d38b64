"""All 22 TPC-H queries in Spark SQL: ember's lineage equals the DuckDB oracle's, both ways."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember import tpch
from tests.oracle.tpch_compare import LIMITED, check_against_oracle, table_sizes
from tests.oracle.tpch_oracle import KEYS, oracle


def _same_rows(lin: ember.Lineage, df: DataFrame) -> None:
    out = lin.output()
    plain = df.toArrow()
    got = sorted(map(repr, out.drop_columns(["ember_oid"]).to_pylist()))
    assert got == sorted(map(repr, plain.to_pylist())), "capture changed the job's result"


@pytest.mark.parametrize("n", range(1, 23))
def test_tpch_sql_lineage_equals_oracle(spark: SparkSession, tpch: Path, duck: duckdb.DuckDBPyConnection, n: int) -> None:
    df = tpch_query(spark, n)
    lin = ember.capture(df)
    if n not in LIMITED:
        _same_rows(lin, df)
    check_against_oracle(lin, oracle(duck, n), KEYS[n], n in LIMITED, table_sizes(duck))


def tpch_query(spark: SparkSession, n: int) -> DataFrame:
    return tpch.query(spark, n)
