"""Shared fixtures: one local SparkSession for the whole run and small TPC-H data."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from devkit import tpch as tpch_data
from tests.oracle.tpch_lineage import oracle

ROOT = Path(__file__).resolve().parents[1]
TPCH_SCALE = 0.01


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = tpch_data.local_spark(
        "ember-tests",
        **{
            "spark.default.parallelism": "4",
            "spark.driver.memory": "4g",
            "spark.sql.session.timeZone": "UTC",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def tpch_dir() -> Path:
    """TPC-H Parquet at a small scale, one file per table (generated once, cached under data/)."""
    path = Path(os.environ.get("EMBER_TPCH", ROOT / "data" / "tpch" / f"sf{TPCH_SCALE}"))
    tpch_data.ensure_data(path, TPCH_SCALE)
    return path


@pytest.fixture(scope="session")
def tpch(spark: SparkSession, tpch_dir: Path) -> Path:
    """Registers the eight TPC-H tables as temp views named after the tables."""
    tpch_data.register(spark, tpch_dir)
    return tpch_dir


@pytest.fixture(scope="session")
def lineage_duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    yield con
    con.close()


@pytest.fixture(scope="session")
def tpch_oracle(lineage_duck: duckdb.DuckDBPyConnection, tpch: Path) -> Callable[[int], pa.Table]:
    """Query number → the oracle's table (computed once per session)."""
    cache: dict[int, pa.Table] = {}

    def get(n: int) -> pa.Table:
        if n not in cache:
            cache[n] = oracle(lineage_duck, tpch, n)
        return cache[n]

    return get


@pytest.fixture(scope="session")
def table_rows(tpch: Path) -> dict[str, int]:
    return {
        t: pq.ParquetFile(tpch / f"{t}.parquet").metadata.num_rows
        for t in ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")
    }
