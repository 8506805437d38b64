"""Lineage-consuming queries (DuckDB over traced rows) and their chained lineage, against
DuckDB run directly on the source file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import ember


@pytest.fixture(scope="module")
def sales(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("consume") / "sales.parquet"
    n = 400
    pq.write_table(
        pa.table({
            "region": np.array(["east", "west", "north"])[np.arange(n) % 3],
            "month": (np.arange(n) * 7) % 12 + 1,
            "amount": (np.arange(n) * 31) % 17,
        }),
        path,
        row_group_size=50,
    )
    return path


def rids(path: Path, where: str) -> list[int]:
    sql = f"SELECT file_row_number FROM read_parquet('{path}', file_row_number = true) WHERE {where} ORDER BY 1"
    return [r[0] for r in duckdb.sql(sql).fetchall()]


def test_drill_down_chains(spark: SparkSession, sales: Path) -> None:
    lin = ember.capture(spark.read.parquet(str(sales)).groupBy("region").sum("amount").orderBy("region"))
    region = lin.output().column("region")[0].as_py()
    by_month = lin.backward(oids=[0]).query(
        "SELECT month, sum(amount) AS total, count(*) AS n FROM sales GROUP BY month ORDER BY month"
    )
    want = duckdb.sql(
        f"SELECT month, sum(amount) AS total, count(*) AS n FROM read_parquet('{sales}') "
        f"WHERE region = '{region}' GROUP BY month ORDER BY month"
    ).fetchall()
    assert [tuple(r.values()) for r in by_month.output().drop_columns(["ember_oid"]).to_pylist()] == want
    for oid, (month, _, _) in enumerate(want):
        trace = by_month.backward(oids=[oid])
        assert trace.ids("sales").tolist() == rids(sales, f"region = '{region}' AND month = {month}")
    month = want[2][0]
    big = by_month.backward(oids=[2]).query("SELECT amount FROM sales WHERE amount > 10")
    expected = rids(sales, f"region = '{region}' AND month = {month} AND amount > 10")
    assert [big.backward(oids=[i]).ids("sales").tolist() for i in range(big.output().num_rows)] == [
        [r] for r in expected
    ]
    assert big.forward("sales", ids=expected[:1]).ids().tolist() == [0]


def test_global_aggregate_and_bad_queries(spark: SparkSession, sales: Path) -> None:
    lin = ember.capture(spark.read.parquet(str(sales)).filter("month = 1"))
    total = lin.backward(oids=[0, 1, 2]).query("SELECT count(*) AS n FROM sales")
    assert total.output().column("n").to_pylist() == [3]
    assert total.backward(oids=[0]).ids("sales").size == 3
    trace = lin.backward(oids=[0])
    with pytest.raises(ember.InvalidPredicateError, match="one traced source"):
        trace.query("SELECT 1 FROM other")
    with pytest.raises(ember.InvalidPredicateError, match="parse"):
        trace.query("SELEC nonsense")
    with pytest.raises(ember.InvalidPredicateError):
        trace.query("SELECT no_such_column FROM sales")
