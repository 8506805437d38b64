"""Entries over joins on the page: one view per source the groups partition, linked
through the entry's shared groups and through shared sources; a source whose rows the
groups share is listed as left out, with why. Checked against pandas over the same rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import SparkSession
from starlette.testclient import TestClient

import ember
from ember.ui import build_app
from ember.ui.views import Crossfilter, View
from tests.ui.conftest import authorized

ORDERS = pd.DataFrame(
    {"o_id": range(12), "cust": [0, 1, 2, 3, 0, 1, 2, 3, 0, 2, 4, 4], "day": [1, 1, 1, 2, 2, 2, 3, 3, 3, 1, 2, 3]}
)
CUSTOMERS = pd.DataFrame(
    {"c_id": range(6), "segment": ["retail", "retail", "auto", "auto", "home", "home"], "country": ["fr", "de", "fr", "fr", "de", "it"]}
)
ENTRIES = {
    "by_segment": "SELECT segment, count(*) AS n FROM orders JOIN customers ON cust = c_id GROUP BY segment ORDER BY segment",
    "by_day": "SELECT day, count(*) AS n FROM orders JOIN customers ON cust = c_id GROUP BY day ORDER BY day",
    "by_country": "SELECT country, count(*) AS n FROM customers GROUP BY country ORDER BY country",
}


@pytest.fixture(scope="module")
def client(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    root = tmp_path_factory.mktemp("ui-joins")
    spark.createDataFrame(ORDERS).createOrReplaceTempView("orders")
    spark.createDataFrame(CUSTOMERS).createOrReplaceTempView("customers")
    for name, sql in ENTRIES.items():
        ember.capture(spark.sql(sql)).save(str(root / name))
    return authorized(build_app(Path(root), spark))


def test_a_join_entry_is_a_view_per_source_its_groups_partition(client: TestClient) -> None:
    listed = client.get("/api/views").json()
    names = sorted(v["name"] for v in listed["views"])
    assert names == ["by_country", "by_day · orders", "by_segment · customers", "by_segment · orders"]
    assert [x["name"] for x in listed["left_out"]] == ["by_day · customers"]  # a customer orders on several days
    assert "share rows of 'customers'" in listed["left_out"][0]["why"]


def test_a_brush_reaches_the_entrys_other_sources_and_their_views(client: TestClient) -> None:
    views = {v["name"]: v for v in client.get("/api/views").json()["views"]}
    segment = views["by_segment · orders"]
    retail = segment["labels"].index(["retail"])
    result = client.post("/api/brush", json={"view": segment["id"], "groups": [retail]}).json()

    joined = ORDERS.merge(CUSTOMERS, left_on="cust", right_on="c_id")
    brushed = joined[joined.segment == "retail"]
    buyers = CUSTOMERS[CUSTOMERS.c_id.isin(brushed.cust)]

    def counts(view: str, column: str, rows: pd.DataFrame) -> list[int]:
        labels = [label[0] for label in views[view]["labels"]]
        return [int((rows[column] == label).sum()) for label in labels]

    tallies = {name: result["views"][v["id"]]["count"] for name, v in views.items()}
    assert result["rows"] == len(brushed)
    assert tallies["by_segment · orders"] == counts("by_segment · orders", "segment", brushed)
    assert tallies["by_day · orders"] == counts("by_day · orders", "day", brushed)  # through the orders source
    assert tallies["by_segment · customers"] == counts("by_segment · customers", "segment", buyers)  # same groups
    assert tallies["by_country"] == counts("by_country", "country", buyers)  # then through the customers source
    assert sum(tallies["by_country"]) == 2  # customers 0 and 1: a test that could not tell the paths apart fails


def test_an_entry_none_of_whose_sources_is_partitioned_is_listed_with_why(
    client: TestClient, spark: SparkSession, tmp_path: Path
) -> None:
    """(`client` registers the tables.)"""
    ember.capture(spark.sql("SELECT day, count(*) AS n FROM orders GROUP BY ROLLUP(day)")).save(str(tmp_path / "rollup"))
    ember.capture(spark.sql(ENTRIES["by_country"])).save(str(tmp_path / "by_country"))
    listed = authorized(build_app(tmp_path, spark)).get("/api/views").json()
    assert [v["name"] for v in listed["views"]] == ["by_country"]
    assert [x["name"] for x in listed["left_out"]] == ["rollup"]
    assert "share rows of 'orders'" in listed["left_out"][0]["why"]


def test_siblings_are_brushed_through_their_shared_groups() -> None:
    """Without Spark: views a (source x) and b (source y) of one entry, c over y alone."""
    a = View("a", "e · x", None, "x", ["g"], [[0], [1]], np.array([0, 1, 2, 3]), np.array([0, 2, 4]), entry="e")  # type: ignore[arg-type]
    b = View("b", "e · y", None, "y", ["g"], [[0], [1]], np.array([5, 0]), np.array([0, 1, 2]), entry="e")  # type: ignore[arg-type]
    c = View("c", "c", None, "y", ["h"], [[0], [1]], np.array([0, 1, 5]), np.array([0, 2, 3]))  # type: ignore[arg-type]
    board = Crossfilter([a, b, c])
    one = board.brush("a", [1])["views"]
    assert (one["a"]["count"], one["b"]["count"], one["c"]["count"]) == ([0, 2], [0, 1], [1, 0])
    both = board.brush("a", [0, 1])["views"]  # most of a's rows: tallied from the rows left out
    assert (both["a"]["count"], both["b"]["count"], both["c"]["count"]) == ([2, 2], [1, 1], [1, 1])
    assert board.brush("c", [1])["views"].keys() == {"b", "c"}  # c has no entry: no siblings, linked by y
