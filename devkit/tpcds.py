"""TPC-DS for the tests and the benchmarks: the tables and the 99 queries `make tpcds` writes.

The data and the query texts both come from DuckDB's `tpcds` extension (dsdgen and its
qualification parameters; `scripts/tpcds_generate.py`), one Parquet file per table, so a
row's `file_row_number` is its `ember_rid`. Query 14, 23, 24 and 39 are the first of
their two parts ("a"), as the extension ships them. Its texts are DuckDB SQL; the one
spelling Spark reads differently, a double-quoted identifier, is rewritten.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]


def folder(scale: float) -> Path:
    """Where `make tpcds TPCDS_SF=<scale>` writes."""
    return ROOT / "data" / "tpcds" / f"sf{scale:g}"


def ensure_data(path: Path, scale: float) -> None:
    """Generates the data with `make tpcds` unless `path` already holds it."""
    if (path / "queries").is_dir():
        return
    if path != folder(scale):
        raise FileNotFoundError(f"{path} holds no TPC-DS data: `make tpcds TPCDS_SF={scale:g}` writes {folder(scale)}")
    subprocess.run(["make", "-C", str(ROOT), "tpcds", f"TPCDS_SF={scale:g}"], check=True, stdout=subprocess.DEVNULL)


def tables(path: Path) -> list[str]:
    return sorted(p.stem for p in path.glob("*.parquet"))


def register(spark: SparkSession, path: Path) -> None:
    """The 24 tables as temp views named after them."""
    for table in tables(path):
        spark.read.parquet(str(path / f"{table}.parquet")).createOrReplaceTempView(table)


def duckdb_queries(path: Path) -> dict[int, str]:
    """Query number → its text as the generator wrote it (DuckDB SQL)."""
    return {int(p.stem[1:]): p.read_text() for p in sorted((path / "queries").glob("q*.sql"))}


def queries(path: Path) -> dict[int, str]:
    """Query number → its text in Spark SQL."""
    return {n: spark_sql(text) for n, text in duckdb_queries(path).items()}


def spark_sql(text: str) -> str:
    """DuckDB's double-quoted identifiers (`AS "order count"`) back-quoted, as Spark reads
    a double-quoted name as a string; the statement's semicolon dropped."""
    return re.sub(r'"([^"`]+)"', r"`\1`", text).strip().rstrip(";")
