"""TPC-H queries written with the DataFrame API: the same oracle as the SQL versions."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from pyspark.sql import SparkSession

import ember
from tests.oracle.tpch_compare import LIMITED, check_against_oracle, table_sizes
from tests.oracle.tpch_oracle import KEYS, oracle
from tests.tpch.queries_df import DF


@pytest.mark.parametrize("n", sorted(DF))
def test_tpch_dataframe_lineage_equals_oracle(
    spark: SparkSession, tpch: Path, duck: duckdb.DuckDBPyConnection, n: int
) -> None:
    lin = ember.capture(DF[n](spark))
    check_against_oracle(lin, oracle(duck, n), KEYS[n], n in LIMITED, table_sizes(duck))
