"""Shared fixtures: one local SparkSession for the whole run and small TPC-H data."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ember import tpch as tpch_data

ROOT = Path(__file__).resolve().parents[1]
TPCH_SCALE = 0.01


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # UDF workers need this venv's pyarrow
    session = (
        SparkSession.builder.master("local[2]")
        .appName("ember-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
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
