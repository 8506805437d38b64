"""A small store for the web page's tests: two group-by entries saved with `lin.save`
and two views declared in views.toml, all over TPC-H lineitem at the tests' scale."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyspark.sql import SparkSession
from starlette.applications import Starlette
from starlette.testclient import TestClient

import ember
from ember.ui import build_app

ENTRIES = {
    "ship_mode": "SELECT l_shipmode, count(*) AS n FROM lineitem GROUP BY l_shipmode ORDER BY l_shipmode",
    "flags": "SELECT l_returnflag, l_linestatus, count(*) FROM lineitem GROUP BY 1, 2 ORDER BY 1, 2",
}
VIEWS_TOML = """
[table]
name = "lineitem"
path = "{path}"

[[view]]
name = "discount"
group_by = ["l_discount"]
sum = "l_quantity"

[[view]]
name = "ship year"
group_by = ["year(l_shipdate) AS ship_year"]
"""
# How each view's groups are written in SQL over the source file (the independent side).
GROUPS = {
    "ship_mode": "l_shipmode",
    "flags": "l_returnflag || '/' || l_linestatus",
    "discount": "l_discount::DOUBLE",
    "ship_year": "year(l_shipdate)",
    "ship_instruct": "l_shipinstruct",
}


@pytest.fixture(scope="session")
def ui_store(spark: SparkSession, tpch: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ui-store")
    for name, sql in ENTRIES.items():
        ember.capture(spark.sql(sql)).save(str(root / name))
    (root / "views.toml").write_text(VIEWS_TOML.format(path=tpch / "lineitem.parquet"))
    return root


@pytest.fixture(scope="session")
def ui_app(ui_store: Path, spark: SparkSession) -> Starlette:
    return build_app(ui_store, spark)  # with a random token, in app.state.token


def authorized(app: Starlette, **options: Any) -> TestClient:
    """A client sending the app's token, as the page does."""
    return TestClient(app, headers={"Authorization": f"Bearer {app.state.token}"}, **options)


@pytest.fixture(scope="session")
def duck(tpch: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """lineitem with each row's ember_rid (its row number in the file), for DuckDB."""
    con = duckdb.connect()
    con.execute(
        "CREATE VIEW li AS SELECT *, file_row_number AS ember_rid "
        f"FROM read_parquet('{tpch / 'lineitem.parquet'}', file_row_number = true)"
    )
    yield con
    con.close()


def tally(duck: duckdb.DuckDBPyConnection, brushed: str, values: list[str], other: str) -> dict[str, int]:
    """Rows per group of view `other` among the rows whose `brushed` group is in `values`."""
    rows = duck.execute(
        f"SELECT CAST({GROUPS[other]} AS VARCHAR), count(*) FROM li "
        f"WHERE CAST({GROUPS[brushed]} AS VARCHAR) IN (SELECT unnest(?)) GROUP BY 1",
        [values],
    ).fetchall()
    return {k: n for k, n in rows}


def group_key(view: str, labels: list[object]) -> str:
    """A view's group label as the independent SQL above writes it."""
    if view == "flags":
        return f"{labels[0]}/{labels[1]}"
    return str(float(labels[0]) if view == "discount" else labels[0])
