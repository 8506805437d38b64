"""Shared fixtures: one local SparkSession for the whole run and small TPC-H data."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ember import tpch as tpch_data

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
