"""The page's server, through Starlette's TestClient: views, brush tallies and details
pages checked against DuckDB over the same Parquet file."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import SparkSession
from starlette.applications import Starlette
from starlette.testclient import TestClient

import ember
from ember.errors import EmberError
from ember.ui import build_app, build_view
from ember.ui.app import STATIC
from ember.ui.catalog import read_config
from tests.ui.conftest import authorized, group_key, tally

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client(ui_app: Starlette) -> TestClient:
    return authorized(ui_app)


@pytest.fixture(scope="module")
def views(client: TestClient) -> dict[str, dict]:
    return {v["id"]: v for v in client.get("/api/views").json()["views"]}


def test_views_come_from_entries_and_views_toml(views: dict[str, dict], duck: duckdb.DuckDBPyConnection) -> None:
    assert set(views) == {"ship_mode", "flags", "discount", "ship_year"}
    assert views["flags"]["kind"] == "heat" and views["flags"]["keys"] == ["l_returnflag", "l_linestatus"]
    assert views["ship_mode"]["keys"] == ["l_shipmode"]  # "n" is a measure, not a key
    rows = duck.execute("SELECT count(*) FROM li").fetchone()
    for view in views.values():
        assert sum(view["count"]) == rows[0]


@pytest.mark.parametrize(
    ("brushed", "pick"),
    [("ship_mode", [0]), ("flags", [1, 3]), ("discount", list(range(1, 11))), ("ship_year", [0, 2, 3, 4, 5])],
)
def test_brush_tallies_equal_duckdb(
    client: TestClient, views: dict[str, dict], duck: duckdb.DuckDBPyConnection, brushed: str, pick: list[int]
) -> None:
    """Small brushes gather the brushed rows; large ones (discount, ship year) subtract the rest."""
    result = client.post("/api/brush", json={"view": brushed, "groups": pick}).json()
    values = [group_key(brushed, views[brushed]["labels"][g]) for g in pick]
    assert result["rows"] == sum(tally(duck, brushed, values, brushed).values())
    for other, view in views.items():
        expected = tally(duck, brushed, values, other)
        got = {group_key(other, labels): n for labels, n in zip(view["labels"], result["views"][other]["count"], strict=True)}
        assert {k: n for k, n in got.items() if n} == expected, other


def test_brush_sums_the_declared_measure(client: TestClient, views: dict[str, dict], duck: duckdb.DuckDBPyConnection) -> None:
    result = client.post("/api/brush", json={"view": "flags", "groups": [0]}).json()
    flag = views["flags"]["labels"][0]
    expected = dict(
        duck.execute(
            "SELECT l_discount::DOUBLE, sum(l_quantity)::DOUBLE FROM li WHERE l_returnflag = ? AND l_linestatus = ? GROUP BY 1",
            flag,
        ).fetchall()
    )
    sums = dict(zip((labels[0] for labels in views["discount"]["labels"]), result["views"]["discount"]["sum"], strict=True))
    assert sums == pytest.approx(expected)
    assert sum(views["discount"]["sum"]) == pytest.approx(duck.execute("SELECT sum(l_quantity)::DOUBLE FROM li").fetchone()[0])


def test_details_pages_the_brushed_rows_in_rid_order(
    client: TestClient, views: dict[str, dict], duck: duckdb.DuckDBPyConnection
) -> None:
    mode = views["ship_mode"]["labels"][2][0]
    rids = [r for (r,) in duck.execute("SELECT ember_rid FROM li WHERE l_shipmode = ? ORDER BY 1", [mode]).fetchall()]
    page = client.post("/api/rows", json={"view": "ship_mode", "groups": [2], "offset": 30, "limit": 20}).json()
    assert page["total"] == len(rids) and page["offset"] == 30
    at = page["columns"].index("ember_rid")
    assert [row[at] for row in page["rows"]] == rids[30:50]
    assert {row[page["columns"].index("l_shipmode")] for row in page["rows"]} == {mode}
    tail = client.post("/api/rows", json={"view": "ship_mode", "groups": [2], "offset": len(rids) - 3}).json()
    assert len(tail["rows"]) == 3


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/api/brush", {"view": "nope", "groups": [0]}, "unknown view"),
        ("/api/brush", {"view": "flags", "groups": [99]}, "groups 0 to 3"),
        ("/api/brush", {"view": "flags", "groups": ["a"]}, "list of integers"),
        ("/api/brush", [1], "JSON object"),
        ("/api/rows", {"view": "flags", "groups": [0], "offset": -1}, "negative"),
    ],
)
def test_bad_requests_get_a_400_with_the_reason(client: TestClient, path: str, body: object, message: str) -> None:
    response = client.post(path, json=body)
    assert response.status_code == 400 and message in response.json()["error"]
    assert client.post(path, content=b"{not json").status_code == 400


def test_the_page_and_its_bundle_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert client.get("/static/app.js").headers["content-type"].startswith(("text/javascript", "application/javascript"))
    assert "http" not in client.get("/static/app.css").text  # nothing fetched from a network


def test_committed_bundle_is_built_from_the_current_sources() -> None:
    """`make ui` records a fingerprint of frontend/; a change there needs a rebuild."""
    recorded = json.loads((STATIC / "build.json").read_text())
    frontend = ROOT / "frontend"
    sources = sorted(["build.mjs", "index.html", "package-lock.json", "package.json", "tsconfig.json"] + [f"src/{p.name}" for p in (frontend / "src").iterdir()])
    assert recorded["sources"] == sources, "frontend files changed: run `make ui`"
    digest = hashlib.sha256()
    for name in sources:
        digest.update(name.encode() + b"\0" + (frontend / name).read_bytes() + b"\0")
    assert digest.hexdigest() == recorded["sha256"], "the bundle in ember/ui/static is stale: run `make ui`"


def test_overlapping_groups_are_not_a_view(spark: SparkSession) -> None:
    df = spark.createDataFrame([(k % 2, k) for k in range(6)], "g int, v int")
    lin = ember.capture(ember.source(df, "tiny").rollup("g").count())
    with pytest.raises(EmberError, match=r"share rows of 'tiny'"):
        build_view("r", "rollup", lin)


def test_a_malformed_views_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "views.toml").write_text("[table]\nname = 'lineitem'\n")
    with pytest.raises(EmberError, match="not a views file"):
        read_config(tmp_path / "views.toml")


def test_a_view_added_on_the_page_is_captured_and_kept(
    ui_store: Path, spark: SparkSession, duck: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    folder = tmp_path / "store"
    shutil.copytree(ui_store, folder)  # the captured views come along: only the new one is captured
    client = authorized(build_app(folder, spark))
    added = client.post("/api/views", json={"name": "ship instruct", "group_by": ["l_shipinstruct"], "sum": None})
    assert added.status_code == 200, added.text
    assert added.json()["id"] == "ship_instruct"
    listed = {v["id"]: v for v in client.get("/api/views").json()["views"]}
    assert "ship_instruct" in listed and listed["ship_instruct"]["kind"] == "bar"
    result = client.post("/api/brush", json={"view": "ship_instruct", "groups": [0]}).json()
    value = group_key("ship_instruct", listed["ship_instruct"]["labels"][0])
    shown = {group_key("flags", labels): n for labels, n in zip(listed["flags"]["labels"], result["views"]["flags"]["count"], strict=True)}
    assert {k: n for k, n in shown.items() if n} == tally(duck, "ship_instruct", [value], "flags")
    assert [v.name for v in read_config(folder / "views.toml")[1]][-1] == "ship instruct"
    again = client.post("/api/views", json={"name": "Ship Instruct", "group_by": ["l_shipinstruct"]})
    assert again.status_code == 400 and "already" in again.json()["error"]
    bad = client.post("/api/views", json={"name": "typo", "group_by": ["l_shipinstrukt"]})
    assert bad.status_code == 400 and "no column 'l_shipinstrukt'" in bad.json()["error"]
