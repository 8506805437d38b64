"""What the page's server refuses (docs/guide/security.md), each through its HTTP API:
no or a wrong token (401), a foreign Host (403), a cross-origin POST (403), a body over
64 KiB (413), a view whose group-by is not columns and allowlisted functions (400, and
views.toml left as it was), a views.toml holding one (refused at start, nothing run);
and how `ember ui` starts (its token in the printed address, 127.0.0.1 by default).

Most of these need no JVM: the app is built over a two-group board and a views.toml
whose table is a small Parquet file, with a Spark session that fails the test if used.
"""

from __future__ import annotations

import asyncio
import datetime
import shutil
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from starlette.applications import Starlette
from starlette.testclient import TestClient

import ember.ui
from ember.cli import main
from ember.errors import EmberError
from ember.ui import build_app, make_app
from ember.ui.app import STATIC, running
from ember.ui.catalog import Declared, declare
from ember.ui.expressions import FUNCTIONS, check
from ember.ui.guard import BODY_LIMIT
from ember.ui.views import Crossfilter, View
from tests.ui.conftest import authorized

TOKEN = "a-token-for-the-tests"
COLUMNS = ["a", "d", "s", "odd name"]


class NoSpark:
    """Stands for the Spark session where nothing may run: any use fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"Spark was used ({name}) for a view that should have been refused")


def tiny_board() -> Crossfilter:
    """One view of two groups over six rows: enough for the refusals, no Spark."""
    view = View("parity", "parity", None, "t", ["p"], [[0], [1]], np.array([0, 2, 4, 1, 3, 5]), np.array([0, 3, 6]))  # type: ignore[arg-type]
    return Crossfilter([view])


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    table = pa.table(
        {
            "a": [1, 2, 3],
            "d": [datetime.date(2024, 1, 5), datetime.date(2024, 2, 5), datetime.date(2025, 1, 5)],
            "s": ["x", "y", "z"],
            "odd name": [1.5, 2.5, 3.5],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    (tmp_path / "views.toml").write_text('[table]\nname = "t"\npath = "t.parquet"\n')
    return tmp_path


@pytest.fixture
def app(folder: Path) -> Starlette:
    return make_app(tiny_board(), partial(declare, folder, spark=NoSpark()), token=TOKEN)


@pytest.fixture
def client(app: Starlette) -> TestClient:
    return TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})


BRUSH = {"view": "parity", "groups": [0]}


# --- the token ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer ", "Bearer ünïcode".encode()],
)
def test_the_api_without_the_right_token_is_401(app: Starlette, authorization: str | bytes | None) -> None:
    client = TestClient(app, headers={"Authorization": authorization} if authorization is not None else {})
    for response in (client.get("/api/views"), client.post("/api/brush", json=BRUSH), client.post("/api/views", json={})):
        assert response.status_code == 401, response.text
        assert "token" in response.json()["error"] and response.headers["www-authenticate"] == "Bearer"


def test_the_right_token_is_answered(client: TestClient) -> None:
    assert client.get("/api/views").json()["views"][0]["id"] == "parity"
    assert client.post("/api/brush", json=BRUSH).json()["views"]["parity"]["count"] == [3, 0]
    assert TestClient(client.app).get("/api/views", headers={"authorization": f"bearer {TOKEN}"}).status_code == 200


def test_the_page_and_its_bundle_need_no_token(app: Starlette) -> None:
    """The page holds no data: it reads the token from its address and sends it."""
    client = TestClient(app)
    assert client.get("/").status_code == 200 and client.get("/static/app.js").status_code == 200
    assert client.get("/").headers["x-frame-options"] == "DENY"
    assert client.get("/").headers["referrer-policy"] == "no-referrer"  # the address holds the token


def test_a_random_token_by_default_and_none_only_when_asked(folder: Path) -> None:
    first, second = make_app(tiny_board()), make_app(tiny_board())
    assert len(first.state.token) >= 40 and first.state.token != second.state.token
    assert TestClient(first).get("/api/views").status_code == 401
    open_app = make_app(tiny_board(), no_token=True)
    assert open_app.state.token is None and TestClient(open_app).get("/api/views").status_code == 200
    with pytest.raises(EmberError, match="not both"):
        make_app(tiny_board(), token="x", no_token=True)


# --- Host and Origin ---------------------------------------------------------------


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "localhost:8080", "127.0.0.1:1", "localhost.evil.example", "[::2]", "", "a:b:c"])
def test_a_foreign_host_is_refused(client: TestClient, host: str) -> None:
    """DNS rebinding: a page at evil.example resolved to 127.0.0.1 sends Host: evil.example."""
    for response in (client.get("/api/views", headers={"host": host}), client.get("/", headers={"host": host})):
        assert response.status_code == 403 and "Host" in response.json()["error"]


@pytest.mark.parametrize("host", ["testserver", "localhost", "LOCALHOST:80", "127.0.0.1:80", "[::1]:80", "[::1]"])
def test_the_servers_own_and_loopback_hosts_are_answered(client: TestClient, host: str) -> None:
    assert client.get("/api/views", headers={"host": host}).status_code == 200


def test_a_real_server_checks_host_against_the_address_it_listens_on(app: Starlette) -> None:
    with running(app) as url:
        port = int(url.split(":")[2].split("/")[0])
        base = f"http://127.0.0.1:{port}"
        auth = {"authorization": f"Bearer {TOKEN}"}
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            assert httpx.get(f"{base}/api/views", headers={**auth, "host": host}).status_code == 200, host
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}"):
            assert httpx.get(f"{base}/api/views", headers={**auth, "host": host}).status_code == 403, host
            assert httpx.get(f"{base}/", headers={"host": host}).status_code == 403, host


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://localhost:8765", "https://testserver", "http://testserver.evil.example"])
def test_a_cross_origin_post_is_refused_even_with_the_token(client: TestClient, folder: Path, origin: str) -> None:
    """A form or a `text/plain` fetch from another site needs no CORS preflight."""
    before = (folder / "views.toml").read_bytes()
    headers = {"origin": origin, "content-type": "text/plain"}
    refused = client.post("/api/views", content=b'{"name": "v", "group_by": ["a"]}', headers=headers)
    assert refused.status_code == 403 and "cross-origin" in refused.json()["error"]
    assert client.post("/api/brush", content=b'{"view": "parity", "groups": [0]}', headers=headers).status_code == 403
    assert (folder / "views.toml").read_bytes() == before


def test_a_post_from_the_pages_own_origin_or_with_no_origin_is_answered(client: TestClient) -> None:
    assert client.post("/api/brush", json=BRUSH, headers={"origin": "http://testserver"}).status_code == 200
    assert client.post("/api/brush", json=BRUSH).status_code == 200


# --- body size ----------------------------------------------------------------------


def test_a_body_over_64_kib_is_413(client: TestClient) -> None:
    big = b'{"view": "parity", "groups": [' + b"0, " * (BODY_LIMIT // 3) + b"0]}"
    assert len(big) > BODY_LIMIT
    assert client.post("/api/brush", content=big, headers={"content-type": "application/json"}).status_code == 413
    chunked = client.post("/api/brush", content=iter([big[:40_000], big[40_000:]]))  # no Content-Length
    assert chunked.status_code == 413
    small = b'{"view": "parity", "groups": [' + b"0, " * 1000 + b"0]}"
    assert client.post("/api/brush", content=small).status_code == 200


def test_a_body_announced_over_64_kib_is_refused_before_it_is_read(app: Starlette) -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body was read")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {TOKEN}".encode()), (b"content-length", b"1000000000")]
    scope = {"type": "http", "method": "POST", "path": "/api/brush", "raw_path": b"/api/brush", "scheme": "http",
             "server": ("testserver", 80), "headers": headers, "query_string": b"", "http_version": "1.1"}
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 413


# --- views outside the allowlist ----------------------------------------------------


@pytest.mark.parametrize(
    ("group_by", "measure", "reason"),
    [
        (["reflect('java.lang.System', 'getProperty', 'user.home')"], None, "function reflect is not allowed"),
        (["java_method('java.lang.System', 'getenv', 'HOME')"], None, "function java_method is not allowed"),
        (['reflect("java.lang.System", "getProperty", "user.home")'], None, "function reflect is not allowed"),
        (["(SELECT max(a) FROM t)"], None, "subquery is not allowed"),
        (["a + (SELECT 1)"], None, "subquery is not allowed"),
        (["my_udf(a)"], None, "function my_udf is not allowed"),
        (["upper(read_files('/etc/passwd'))"], None, "function read_files is not allowed"),
        (["input_file_name()"], None, "function input_file_name is not allowed"),
        (["a FROM t"], None, "one expression only"),
        (["a, reflect('x', 'y')"], None, "one expression only"),
        (["a; SELECT 1"], None, "one expression only"),
        (["nope"], None, "no column 'nope'"),
        (["t.a"], None, "without a qualifier"),
        (["*"], None, "* is not allowed"),
        (["date_format(d, 'yyyy'' -- ')"], None, "string"),
        (["a"], "a) FROM t --", "no column"),
        (["a", "s", "d"], None, "one or two"),
    ],
)
def test_a_view_outside_the_allowlist_is_400_and_not_written(
    client: TestClient, folder: Path, group_by: list[str], measure: str | None, reason: str
) -> None:
    before = (folder / "views.toml").read_bytes()
    response = client.post("/api/views", json={"name": "sneaky", "group_by": group_by, "sum": measure})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert reason in error and "\n" not in error
    assert (folder / "views.toml").read_bytes() == before and not (folder / ".ui-views").exists()


@pytest.mark.parametrize("name", ["line\nbreak", "x" * 200, "   "])
def test_a_bad_view_name_is_400_and_not_written(client: TestClient, folder: Path, name: str) -> None:
    before = (folder / "views.toml").read_bytes()
    response = client.post("/api/views", json={"name": name, "group_by": ["a"]})
    assert response.status_code == 400 and (folder / "views.toml").read_bytes() == before


@pytest.mark.parametrize(
    "view",
    [
        'name = "home"\ngroup_by = ["reflect(\'java.lang.System\', \'getProperty\', \'user.home\')"]',
        'name = "sub"\ngroup_by = ["(SELECT 1)"]',
        'name = "sum"\ngroup_by = ["a"]\nsum = "a) FROM t --"',
    ],
)
def test_a_malicious_views_toml_is_refused_at_start_and_nothing_runs(folder: Path, view: str) -> None:
    (folder / "views.toml").write_text(f'[table]\nname = "t"\npath = "t.parquet"\n\n[[view]]\nname = "ok"\ngroup_by = ["a"]\n\n[[view]]\n{view}\n')
    with pytest.raises(EmberError, match="refused, nothing run") as refused:
        build_app(folder, NoSpark())  # type: ignore[arg-type]
    assert "views.toml" in str(refused.value) and not (folder / ".ui-views").exists()


def test_a_malicious_table_name_is_refused(folder: Path) -> None:
    (folder / "views.toml").write_text('[table]\nname = "t, (SELECT 1)"\npath = "t.parquet"\n\n[[view]]\nname = "v"\ngroup_by = ["a"]\n')
    with pytest.raises(EmberError, match="letters, digits and _"):
        build_app(folder, NoSpark())  # type: ignore[arg-type]


ALLOWED = {
    "a": "a",
    "A": "a",
    '"odd name"': "`odd name`",
    "`odd name` * 2": "(`odd name` * 2)",
    "year(d) AS y": "year(d) AS y",
    "date_trunc('month', d)": "date_trunc('month', d)",
    "date_format(d, 'yyyy-MM') AS ym": "date_format(d, 'yyyy-MM') AS ym",
    "a % 2 + 1": "((a % 2) + 1)",
    "-a - -1": "((- a) - -1)",
    "CAST(a AS DECIMAL(10, 2))": "CAST(a AS DECIMAL(10, 2))",
    "a::varchar": "CAST(a AS STRING)",
    "round(`odd name` / 3, 1)": "round((`odd name` / 3), 1)",
    "lower(s) || '/' || upper(s)": "((lower(s) || '/') || upper(s))",
    "substring(s, 1, 2) -- a comment": "substring(s, 1, 2)",
}


@pytest.mark.parametrize(("item", "sql"), ALLOWED.items())
def test_allowed_items_are_written_back_as_spark_sql(item: str, sql: str) -> None:
    assert check(item, COLUMNS) == sql


def test_the_pages_form_lists_the_allowlist() -> None:
    page = (STATIC / "index.html").read_text()
    listed = page.split("and the functions ")[1].split(" (docs/")[0]
    assert sorted(listed.split(", ")) == sorted(FUNCTIONS)


def test_spark_accepts_every_allowed_function(spark: SparkSession, tpch: Path) -> None:
    """Each function of the allowlist, written back, is valid Spark SQL over lineitem."""
    examples = {
        "date_trunc": "date_trunc('month', l_shipdate)", "trunc": "trunc(l_shipdate, 'year')",
        "date_format": "date_format(l_shipdate, 'yyyy-MM')", "to_date": "to_date(l_comment, 'yyyy-MM-dd')",
        "round": "round(l_discount * 100, 1)", "substring": "substring(l_comment, 1, 3)", "substr": "substr(l_comment, 2)",
        "concat": "concat(l_returnflag, '/', l_linestatus)",
    }
    numeric = {"floor", "ceil", "ceiling", "abs"}
    text = {"lower", "upper", "length", "trim"}
    columns = spark.read.parquet(str(tpch / "lineitem.parquet")).columns
    spark.read.parquet(str(tpch / "lineitem.parquet")).createOrReplaceTempView("lineitem_allowlist")
    for name in FUNCTIONS:
        item = examples.get(name) or (f"{name}(l_quantity)" if name in numeric else f"{name}(l_comment)" if name in text else f"{name}(l_shipdate)")
        items = (check(item, columns), check("CAST(l_quantity AS INT) % 7 AS q", columns))
        sql = Declared(name, "lineitem_allowlist", "", items, "l_quantity").sql()
        assert spark.sql(sql).schema is not None, sql  # parsed and analysed


def test_allowed_views_are_captured_through_the_api(
    ui_store: Path, spark: SparkSession, duck: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    folder = tmp_path / "store"
    shutil.copytree(ui_store, folder)
    client = authorized(build_app(folder, spark))
    item = "CAST(round(l_discount * 100) AS INT) AS discount_pct"
    added = client.post("/api/views", json={"name": "discount percent", "group_by": [item], "sum": "L_QUANTITY"})
    assert added.status_code == 200, added.text
    view = added.json()
    expected = duck.execute(
        "SELECT CAST(round(l_discount * 100) AS INT), count(*), sum(l_quantity)::DOUBLE FROM li GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert view["keys"] == ["discount_pct"]
    assert [(labels[0], n) for labels, n in zip(view["labels"], view["count"], strict=True)] == [(k, n) for k, n, _ in expected]
    assert view["sum"] == pytest.approx([s for _, _, s in expected])
    assert item in (folder / "views.toml").read_text()  # kept as written, checked again at the next start
    assert authorized(build_app(folder, spark)).get("/api/views").status_code == 200


# --- starting `ember ui` ------------------------------------------------------------


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """`ember ui` up to the server's start: the app over the tiny board, uvicorn not run."""
    import uvicorn

    runs: list[dict[str, Any]] = []

    def app_for(store_dir: str, **options: Any) -> Starlette:
        options.pop("hosts")
        return make_app(tiny_board(), **options)

    monkeypatch.setattr(ember.ui, "build_app", app_for)
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: runs.append({"app": app, **options}))
    yield runs


def test_ember_ui_prints_its_address_with_a_random_token_on_127_0_0_1(
    folder: Path, started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ui", str(folder)]) == 0
    assert main(["ui", str(folder)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ember ui: http")]
    tokens = [run["app"].state.token for run in started]
    assert lines[0].startswith(f"ember ui: http://127.0.0.1:8765/?token={tokens[0]} ")
    assert len(tokens[0]) >= 40 and tokens[0] != tokens[1]
    assert [run["host"] for run in started] == ["127.0.0.1", "127.0.0.1"]


def test_ember_ui_token_options(folder: Path, started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", str(folder), "--token", "chosen"]) == 0
    assert "http://127.0.0.1:8765/?token=chosen " in capsys.readouterr().out
    assert started[-1]["app"].state.token == "chosen"
    assert main(["ui", str(folder), "--no-token", "--port", "9000"]) == 0
    out, err = capsys.readouterr()
    assert "ember ui: http://127.0.0.1:9000/  (" in out and "warning: --no-token" in err
    assert started[-1]["app"].state.token is None
    assert main(["ui", str(folder), "--token", "x", "--no-token"]) == 2
    assert len(started) == 2
